package shard_test

import (
	"crypto/rand"
	"encoding/base64"
	"net/url"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/clustershard/clustershard/registry"
	"github.com/clustershard/clustershard/test/netproxy"
)

// TestLongRemoteWriteRunsWhileOwned writes a 250 KB ConfigMap to a real
// remote API server through a loopback proxy that trickles its answer a
// byte at a time (tens of KB/s), so that the write takes several seconds,
// longer than the 2 s renew deadline, under the fence of a real coordinator: it succeeds while the
// replica keeps renewing, and the same write is cut when membership lapses
// mid-way.
func TestLongRemoteWriteRunsWhileOwned(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t, "longwrite")
	tr := newTracker()
	in := startInstance(t, ns, "replica-0", []string{"cluster-00"}, trackingHandler{"replica-0", tr})
	settled(t, tr, ns, map[string]string{"cluster-00": "replica-0"}, map[string]*instance{"replica-0": in}, 30*time.Second)

	remote := env.Remotes[0].Config
	u, err := url.Parse(remote.Host)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := netproxy.New(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = proxy.Close() }()
	proxy.SetRate(40 << 10) // the answer (about 190 KB gzipped) takes about 5 s
	cfg := rest.CopyConfig(remote)
	cfg.Host = "https://" + proxy.Addr()
	cfg.ServerName = u.Hostname()
	cfg.Timeout = 30 * time.Second
	cs, err := kubernetes.NewForConfig(registry.FencedConfig(cfg, "cluster-00", in.c))
	if err != nil {
		t.Fatal(err)
	}
	// Random, so that the answer does not compress.
	raw := make([]byte, 190<<10)
	_, _ = rand.Read(raw)
	big := base64.StdEncoding.EncodeToString(raw) // 250 KB
	write := func(name string) (time.Duration, error) {
		start := time.Now()
		_, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Data: map[string]string{"big": big},
		}, metav1.CreateOptions{})
		return time.Since(start), err
	}
	took, err := write("long-while-owned")
	if err != nil {
		t.Fatalf("a %v write while the replica renews: %v", took, err)
	}
	if took < renewDeadline {
		t.Fatalf("the write took %v, not longer than the renew deadline %v: the test proves nothing", took, renewDeadline)
	}
	t.Logf("a 250 KB write took %v (renew deadline %v) and succeeded", took.Round(10*time.Millisecond), renewDeadline)

	// Membership lapses 300 ms into the same kind of write: it is cut.
	resume := in.c.Pause()
	defer resume()
	took, err = write("long-lapsed")
	if err == nil {
		t.Fatalf("a write whose membership lapsed mid-way succeeded after %v", took)
	}
	if took > renewDeadline+time.Second {
		t.Fatalf("the write was cut after %v, later than the renew deadline %v allows", took, renewDeadline)
	}
	t.Logf("with renewals stopped, the write was cut after %v: %v", took.Round(10*time.Millisecond), err)
}
