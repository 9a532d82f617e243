package replicate_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/controllers/replicate"
	"github.com/clustershard/clustershard/internal/remotecopy"
	"github.com/clustershard/clustershard/registry"
	"github.com/clustershard/clustershard/test/testenv"
)

var env *testenv.Env

// One management API server and one remote holding the example CRDs, for
// all the tests of the package.
func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, testenv.Options{Remotes: 1, RemoteCRDs: true}, &env))
}

var (
	exampleKind = testenv.MustKind(testenv.ExampleKind)
	// strictKind is shaped like Chaos Mesh's chaos kinds (no status
	// subresource, status.experiment required, minimal conditions).
	strictKind = testenv.MustKind(testenv.StrictKind)
)

// fakeOwnership owns a fixed set of clusters; the ring assigns it every
// name when assigned is set.
type fakeOwnership struct {
	owned    map[string]bool
	assigned bool
	// held are clusters held with their writes fenced (a renewal late).
	held map[string]bool
	// unowned are the clusters nobody runs, since when; notReporter makes
	// another replica the one that reports them.
	unowned     map[string]time.Time
	notReporter bool
}

func (o *fakeOwnership) Owns(cluster string) bool { return o.owned[cluster] }

func (o *fakeOwnership) Holds(cluster string) bool { return o.owned[cluster] || o.held[cluster] }

func (o *fakeOwnership) HeldRetry() time.Duration { return 50 * time.Millisecond }

func (o *fakeOwnership) WithOwnership(cluster string, f func() error) error {
	if !o.owned[cluster] {
		return fmt.Errorf("not the owner of %q", cluster)
	}
	return f()
}

func (o *fakeOwnership) Assigned(string) bool { return o.assigned }

func (o *fakeOwnership) UnownedCluster(cluster string) (time.Time, string, bool) {
	since, ok := o.unowned[cluster]
	return since, "its Lease is free and no replica has acquired it", ok
}

func (o *fakeOwnership) Reporter() bool { return !o.notReporter }

// fakeRegistry runs a remote manager for each cluster of running, whose
// client is a real client of a remote API server, and counts WithClient calls.
type fakeRegistry struct {
	running map[string]client.Client
	mu      sync.Mutex
	calls   map[string]int
}

func (r *fakeRegistry) Get(cluster string) (registry.Info, bool) {
	if _, ok := r.running[cluster]; !ok {
		return registry.Info{}, false
	}
	return registry.Info{Name: cluster, State: registry.StateRunning}, true
}

func (r *fakeRegistry) WithClient(cluster string, f func(client.Client) error) error {
	r.mu.Lock()
	if r.calls == nil {
		r.calls = map[string]int{}
	}
	r.calls[cluster]++
	r.mu.Unlock()
	c, ok := r.running[cluster]
	if !ok {
		return registry.ErrNotExist
	}
	return f(c)
}

func (r *fakeRegistry) callsFor(cluster string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[cluster]
}

// newReconciler replicates k for a replica that owns the clusters of owned,
// each run on remote 0, with a fake event recorder.
func newReconciler(k remotecopy.Kind, owned ...string) (*replicate.Reconciler, *fakeRegistry, *events.FakeRecorder) {
	reg := &fakeRegistry{running: map[string]client.Client{}}
	own := &fakeOwnership{owned: map[string]bool{}, assigned: true}
	for _, c := range owned {
		reg.running[c] = env.RemoteClients[0]
		own.owned[c] = true
	}
	rec := events.NewFakeRecorder(20)
	return &replicate.Reconciler{
		Client: env.Client, Registry: reg, Ownership: own, Identity: "replica-test",
		Kind: k, Recorder: rec,
	}, reg, rec
}

// createRemoteCluster creates a RemoteCluster named name (its Secret need
// not exist: no manager runs it here), deleted when the test ends.
func createRemoteCluster(t *testing.T, name string) {
	t.Helper()
	rc := &v1alpha1.RemoteCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.RemoteClusterSpec{KubeConfig: v1alpha1.KubeConfigSource{
			SecretRef: v1alpha1.SecretKeyReference{Namespace: "default", Name: name + "-kubeconfig", Key: "kubeconfig"},
		}},
	}
	if err := env.Client.Create(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), rc) })
}

// createSource creates a namespace and a source of k in it naming cluster.
func createSource(t *testing.T, k remotecopy.Kind, ns, name, cluster string) *unstructured.Unstructured {
	t.Helper()
	err := env.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	src := k.New()
	src.SetNamespace(ns)
	src.SetName(name)
	src.SetLabels(map[string]string{"app": "demo"})
	src.Object["spec"] = map[string]any{"remoteCluster": cluster, "action": "pod-kill", "duration": "30s"}
	if err := env.Client.Create(t.Context(), src); err != nil {
		t.Fatal(err)
	}
	return src
}

func reconcile(t *testing.T, r *replicate.Reconciler, src client.Object) (ctrl.Result, error) {
	t.Helper()
	return r.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(src)})
}

// directRemote is a client of the remote API server, to wrap with an
// interceptor as a fake registry's remote client.
func directRemote(t *testing.T) client.WithWatch {
	t.Helper()
	remote, err := testenv.RESTConfigFromKubeConfig(env.Remotes[0].KubeConfig)
	if err != nil {
		t.Fatal(err)
	}
	direct, err := client.NewWithWatch(remote, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return direct
}

// get reads an object of k through c; nil when it does not exist.
func get(t *testing.T, c client.Client, k remotecopy.Kind, key client.ObjectKey) *unstructured.Unstructured {
	t.Helper()
	o := k.New()
	if err := c.Get(t.Context(), key, o); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		t.Fatal(err)
	}
	return o
}

// synced returns the source's RemoteSynced condition (nil if none) and outcome.
func synced(t *testing.T, k remotecopy.Kind, key client.ObjectKey) (map[string]any, remotecopy.Outcome) {
	t.Helper()
	src := get(t, env.Client, k, key)
	if src == nil {
		t.Fatalf("source %s is gone", key)
	}
	o, _ := remotecopy.ReadOutcome(src)
	conds, _, _ := unstructured.NestedSlice(src.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == v1alpha1.ConditionRemoteSynced {
			return m, o
		}
	}
	return nil, o
}

// nextEvent returns the next recorded event, or "" if none is waiting.
func nextEvent(rec *events.FakeRecorder) string {
	select {
	case e := <-rec.Events:
		return e
	default:
		return ""
	}
}

// release drops every finalizer of the source, so the test leaves nothing Terminating.
func release(t *testing.T, k remotecopy.Kind, key client.ObjectKey) {
	t.Cleanup(func() {
		ctx := context.Background()
		src := k.New()
		if err := env.Client.Get(ctx, key, src); err != nil {
			return
		}
		before := src.DeepCopy()
		src.SetFinalizers(nil)
		_ = env.Client.Patch(ctx, src, client.MergeFrom(before))
		_ = env.Client.Delete(ctx, src)
	})
}
