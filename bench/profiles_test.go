package bench

import (
	"testing"

	"github.com/google/pprof/profile"
)

func stack(names ...string) []*profile.Location {
	var locs []*profile.Location
	for _, n := range names {
		locs = append(locs, &profile.Location{Line: []profile.Line{{Function: &profile.Function{Name: n}}}})
	}
	return locs
}

// A sample goes to the first component, in components' order, that a frame
// of its stack belongs to, wherever the frame is.
func TestClassify(t *testing.T) {
	for _, c := range []struct {
		want  string
		stack []string
	}{
		{"caches (informers, reflectors, watches)", []string{"encoding/json.(*decodeState).object", "k8s.io/apimachinery/pkg/runtime.Decode", "k8s.io/client-go/rest.(*Request).Do", "k8s.io/client-go/tools/cache.(*Reflector).list", "runtime.goexit"}},
		{"Helm client (spec.install.helm)", []string{"net/http.(*Transport).RoundTrip", "k8s.io/client-go/tools/cache.(*Reflector).list", "helm.sh/helm/v4/pkg/action.(*Install).Run"}},
		{"remote fence (epoch raise, policy)", []string{"crypto/tls.(*Conn).Write", "github.com/clustershard/clustershard/internal/remotefence.Raise"}},
		{"HTTP/2, TLS and REST transport", []string{"crypto/tls.(*Conn).Read", "golang.org/x/net/http2.(*clientConnReadLoop).run", "runtime.goexit"}},
		{"manager and client set-up", []string{"sigs.k8s.io/controller-runtime/pkg/manager.New", "github.com/clustershard/clustershard/registry.(*Registry).Spawn", "github.com/clustershard/clustershard/replica.(*reconciler).Reconcile"}},
		{"RemoteCluster reconciler (status, conditions)", []string{"encoding/json.Marshal", "github.com/clustershard/clustershard/replica.(*reconciler).Reconcile"}},
		{"caches (informers, reflectors, watches)", []string{"k8s.io/client-go/tools/cache.NewSharedIndexInformer", "github.com/clustershard/clustershard/registry.(*Registry).Spawn", "github.com/clustershard/clustershard/shard.(*Coordinator).acquire.func1"}},
		{"membership and Lease work", []string{"k8s.io/client-go/rest.(*Request).Do", "k8s.io/client-go/tools/leaderelection.(*LeaderElector).renew"}},
		{runtimeComponent, []string{"runtime.gopark", "runtime.goexit"}},
		{runtimeComponent, []string{"runtime.scanobject", "runtime.gcBgMarkWorker"}},
		{otherComponent, []string{"sync.(*Cond).Wait", "main.main", "runtime.main"}},
	} {
		if got := classify(stack(c.stack...)); got != c.want {
			t.Errorf("classify(%v) = %q, want %q", c.stack, got, c.want)
		}
	}
}

func TestSlopesPerComponent(t *testing.T) {
	got := slopes([]float64{0, 10, 20}, []map[string]float64{
		{"fx app": 100, otherComponent: 50},
		{"fx app": 1124, otherComponent: 50},
		{"fx app": 2148, otherComponent: 50},
	}, 1.0/1024, 1)
	if len(got) != 1 || got[0].Component != "fx app" || got[0].Value != 0.1 || got[0].Share != 1 {
		t.Fatalf("slopes = %+v, want fx app at 0.1 KiB (102.4 B) per cluster, all of it", got)
	}
}
