package replica_test

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1alpha1 "github.com/clustershard/clustershard/api/example/v1alpha1"
	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/remotecopy"
	"github.com/clustershard/clustershard/replica"
)

// failedWrites counts the replica's writes to one resource of the
// management API server that were answered with an error, and which.
type failedWrites struct {
	resource string
	n        atomic.Int64
	// conflicts are answers 409 to writes with a stale resourceVersion.
	conflicts atomic.Int64
	mu        sync.Mutex
	seen      []string
}

func (f *failedWrites) RoundTrip(next http.RoundTripper, req *http.Request) (*http.Response, error) {
	resp, err := next.RoundTrip(req)
	if req.Method == http.MethodGet || !strings.Contains(req.URL.Path, "/"+f.resource) {
		return resp, err
	}
	if err == nil && resp.StatusCode == http.StatusConflict {
		f.conflicts.Add(1) // optimistic concurrency at work, retried
		return resp, err
	}
	if err != nil || resp.StatusCode >= 300 {
		f.n.Add(1)
		f.mu.Lock()
		code := 0
		if resp != nil {
			code = resp.StatusCode
		}
		f.seen = append(f.seen, req.Method+" "+req.URL.Path+" -> "+http.StatusText(code))
		f.mu.Unlock()
	}
	return resp, err
}

func (f *failedWrites) wrap(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) { return f.RoundTrip(rt, req) })
	}
	return out
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// strictOutcome reads a StrictChaos source: its outcome annotation and its
// RemoteSynced condition.
func strictOutcome(t *testing.T, ns, name string) (*examplev1alpha1.StrictChaos, remotecopy.Outcome, *examplev1alpha1.StrictChaosCondition) {
	t.Helper()
	var s examplev1alpha1.StrictChaos
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
		return nil, remotecopy.Outcome{}, nil
	}
	o, _ := remotecopy.ReadOutcome(&s)
	for i := range s.Status.Conditions {
		if s.Status.Conditions[i].Type == v1alpha1.ConditionRemoteSynced {
			return &s, o, &s.Status.Conditions[i]
		}
	}
	return &s, o, nil
}

func specHash(t *testing.T, s *examplev1alpha1.StrictChaos) string {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
	if err != nil {
		t.Fatal(err)
	}
	return remotecopy.SpecHash(&unstructured.Unstructured{Object: m})
}

// A kind shaped like Chaos Mesh's (no status subresource, status.experiment
// required, conditions of type/status/reason only): the copy is made, the
// status the remote writes with a plain update is mirrored to the source,
// the outcome shows on the source in the form its schema keeps, a spec
// change reaches the copy, nothing loops on the generation bumps that status
// writes cause, no write of the replica fails, and a typo in
// spec.remoteCluster shows as ClusterNotFound.
func TestChaosMeshShapedKind(t *testing.T) {
	ctx := t.Context()
	fails := &failedWrites{resource: "strictchaos"}
	startReplicaOn(t, "strict-0", fails.wrap(env.Management.Config), func(o *replica.Options) {
		o.Kinds = []remotecopy.Kind{exampleKind, strictKind}
	})
	const cluster, ns = "strict-east", "strict-ns"
	remoteCluster(t, cluster, 0)
	waitReady(t, cluster, 60*time.Second)
	ensureNamespace(t, env.Client, ns)

	src := &examplev1alpha1.StrictChaos{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pod-kill"},
		Spec:       examplev1alpha1.StrictChaosSpec{RemoteCluster: cluster, Action: "pod-kill", Duration: "30s"},
	}
	if err := env.Client.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	hash := specHash(t, src)
	eventually(t, 30*time.Second, "the copy, and Synced on the source", func() bool {
		var cp examplev1alpha1.StrictChaos
		if err := env.RemoteClients[0].Get(ctx, client.ObjectKeyFromObject(src), &cp); err != nil || cp.Spec.Action != "pod-kill" {
			return false
		}
		_, o, c := strictOutcome(t, ns, src.Name)
		return o.Status == "True" && o.Reason == v1alpha1.ReasonSynced && o.SpecHash == hash &&
			c != nil && c.Status == "True" && c.Reason == v1alpha1.ReasonSynced
	})
	s, o, _ := strictOutcome(t, ns, src.Name)
	t.Logf("created and copied: annotation %s=%s; conditions %+v", v1alpha1.OutcomeAnnotation, s.Annotations[v1alpha1.OutcomeAnnotation], s.Status.Conditions)
	if !strings.Contains(o.Message, cluster) {
		t.Fatalf("outcome message %q does not name the cluster", o.Message)
	}

	// The remote controller writes status with a plain update of the whole
	// object, as Chaos Mesh's do (there is no /status to write to).
	var cp examplev1alpha1.StrictChaos
	if err := env.RemoteClients[0].Get(ctx, client.ObjectKeyFromObject(src), &cp); err != nil {
		t.Fatal(err)
	}
	cp.Status = examplev1alpha1.StrictChaosStatus{
		Experiment: examplev1alpha1.StrictChaosExperiment{DesiredPhase: "Run", Records: []examplev1alpha1.StrictChaosRecord{{ID: "default/pod-a", Phase: "Injected"}}},
		Conditions: []examplev1alpha1.StrictChaosCondition{{Type: "Selected", Status: "True"}, {Type: "AllInjected", Status: "True"}},
	}
	if err := env.RemoteClients[0].Update(ctx, &cp); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the remote status mirrored to the source, RemoteSynced kept", func() bool {
		s, _, c := strictOutcome(t, ns, src.Name)
		if s == nil || s.Status.Experiment.DesiredPhase != "Run" || len(s.Status.Experiment.Records) != 1 || c == nil || c.Status != "True" {
			return false
		}
		types := map[string]bool{}
		for _, c := range s.Status.Conditions {
			types[c.Type] = true
		}
		return types["Selected"] && types["AllInjected"]
	})
	s, _, _ = strictOutcome(t, ns, src.Name)
	t.Logf("remote status written: status %+v", s.Status)

	// Status writes bump the generation of a kind without a status
	// subresource; nothing may write again because of it.
	rv := s.ResourceVersion
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		now, _, _ := strictOutcome(t, ns, src.Name)
		if now == nil || now.ResourceVersion != rv {
			t.Fatalf("the source keeps changing (resourceVersion %s, was %s): a write loop", now.ResourceVersion, rv)
		}
		time.Sleep(100 * time.Millisecond) // sampling a window in which nothing may happen, not synchronisation
	}

	// A spec change reaches the copy; the outcome names the new spec.
	s.Spec.Duration = "60s"
	if err := env.Client.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	newHash := specHash(t, s)
	eventually(t, 30*time.Second, "the new spec in the copy and the outcome for it", func() bool {
		var cp examplev1alpha1.StrictChaos
		if err := env.RemoteClients[0].Get(ctx, client.ObjectKeyFromObject(src), &cp); err != nil || cp.Spec.Duration != "60s" {
			return false
		}
		_, o, _ := strictOutcome(t, ns, src.Name)
		return o.Status == "True" && o.SpecHash == newHash
	})
	s, _, _ = strictOutcome(t, ns, src.Name)
	t.Logf("spec changed: annotation %s; status %+v", s.Annotations[v1alpha1.OutcomeAnnotation], s.Status)

	// A typo in spec.remoteCluster.
	typo := &examplev1alpha1.StrictChaos{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "typo"},
		Spec:       examplev1alpha1.StrictChaosSpec{RemoteCluster: "strict-eats", Action: "pod-kill"},
	}
	if err := env.Client.Create(ctx, typo); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "ClusterNotFound on the source naming an unknown cluster", func() bool {
		_, o, c := strictOutcome(t, ns, typo.Name)
		return o.Reason == v1alpha1.ReasonClusterNotFound && strings.Contains(o.Message, "strict-eats") &&
			c != nil && c.Status == "False" && c.Reason == v1alpha1.ReasonClusterNotFound
	})
	s, _, _ = strictOutcome(t, ns, typo.Name)
	t.Logf("unknown cluster: annotation %s; conditions %+v", s.Annotations[v1alpha1.OutcomeAnnotation], s.Status.Conditions)

	// Deleted while the remote still recovers the experiment (Chaos Mesh's
	// finalizer on the copy): the source shows it, and goes once the copy is
	// gone.
	if err := env.RemoteClients[0].Get(ctx, client.ObjectKeyFromObject(src), &cp); err != nil {
		t.Fatal(err)
	}
	cp.Finalizers = append(cp.Finalizers, "chaos-mesh/records")
	if err := env.RemoteClients[0].Update(ctx, &cp); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []client.Object{src, typo} {
		if err := env.Client.Delete(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "the remote finalizer and Deleting on the source", func() bool {
		s, o, c := strictOutcome(t, ns, src.Name)
		return s != nil && s.Annotations[v1alpha1.RemoteFinalizersAnnotation] == "chaos-mesh/records" &&
			o.Reason == v1alpha1.ReasonDeleting && strings.Contains(o.Message, "chaos-mesh/records") && c != nil && c.Reason == v1alpha1.ReasonDeleting
	})
	s, _, _ = strictOutcome(t, ns, src.Name)
	t.Logf("deleted, remote recovering: annotations %v; conditions %+v", s.Annotations, s.Status.Conditions)
	if err := env.RemoteClients[0].Get(ctx, client.ObjectKeyFromObject(src), &cp); err != nil {
		t.Fatal(err)
	}
	cp.Finalizers = nil
	if err := env.RemoteClients[0].Update(ctx, &cp); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "copy and source gone", func() bool {
		s, _, _ := strictOutcome(t, ns, src.Name)
		var cp examplev1alpha1.StrictChaos
		err := env.RemoteClients[0].Get(ctx, client.ObjectKeyFromObject(src), &cp)
		return s == nil && err != nil
	})
	t.Logf("optimistic-concurrency conflicts on strictchaos writes: %d", fails.conflicts.Load())
	if n := fails.n.Load(); n != 0 {
		fails.mu.Lock()
		defer fails.mu.Unlock()
		t.Fatalf("%d writes of the replica to strictchaos failed: %v", n, fails.seen)
	}
}
