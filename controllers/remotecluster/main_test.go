package remotecluster

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/registry"
	"github.com/clustershard/clustershard/test/localcluster"
	"github.com/clustershard/clustershard/test/testenv"
)

var env *testenv.Env

// One management API server and one remote for all the tests of the package.
func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, testenv.Options{Remotes: 1}, &env))
}

const identity = "replica-test"

// fakeOwnership owns a fixed set of clusters, held since the test began;
// a write to an owned cluster may be sent for another minute.
type fakeOwnership struct {
	owned map[string]bool
	since time.Time
	// held are clusters held with their writes fenced (a renewal late).
	held map[string]bool
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

func (o *fakeOwnership) Holder(cluster string) (string, time.Time, bool) {
	if !o.owned[cluster] {
		return "", time.Time{}, false
	}
	return identity, o.since, true
}

func (o *fakeOwnership) Placement(string) string { return "" }

func (o *fakeOwnership) WriteDeadline(cluster string) (time.Time, error) {
	if !o.owned[cluster] {
		return time.Time{}, fmt.Errorf("not the owner of %q", cluster)
	}
	return time.Now().Add(time.Minute), nil
}

// fakeRegistry records Spawn and Stop; a spawned cluster's manager runs
// at once, and WithClient hands a real client of the config it was spawned with.
type fakeRegistry struct {
	mu      sync.Mutex
	running map[string]*rest.Config
	spawns  []*rest.Config
	stops   int
	// unhealthy makes Get report these running clusters Unhealthy, with
	// the error.
	unhealthy map[string]error
}

// setUnhealthy makes the running manager of cluster fail its probes.
func (r *fakeRegistry) setUnhealthy(cluster string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.unhealthy == nil {
		r.unhealthy = map[string]error{}
	}
	r.unhealthy[cluster] = err
}

func (r *fakeRegistry) Spawn(cluster string, cfg *rest.Config, _ ...registry.SpawnOption) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.running[cluster]; ok {
		return registry.ErrAlreadyExist
	}
	r.running[cluster] = cfg
	r.spawns = append(r.spawns, cfg)
	return nil
}

func (r *fakeRegistry) Stop(_ context.Context, cluster string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.running[cluster]; !ok {
		return registry.ErrNotExist
	}
	delete(r.running, cluster)
	r.stops++
	return nil
}

func (r *fakeRegistry) Get(cluster string) (registry.Info, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.running[cluster]; !ok {
		return registry.Info{}, false
	}
	if err, ok := r.unhealthy[cluster]; ok {
		return registry.Info{Name: cluster, State: registry.StateUnhealthy, Err: err}, true
	}
	return registry.Info{Name: cluster, State: registry.StateRunning}, true
}

func (r *fakeRegistry) WithClient(cluster string, f func(client.Client) error) error {
	r.mu.Lock()
	cfg, ok := r.running[cluster]
	r.mu.Unlock()
	if !ok {
		return registry.ErrNotExist
	}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		return err
	}
	return f(c)
}

// counts returns how many Spawn and Stop calls stopped or started a manager.
func (r *fakeRegistry) counts() (spawns, stops int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.spawns), r.stops
}

// newReconciler is a controller of a replica that owns the clusters of owned.
func newReconciler(owned ...string) (*Reconciler, *fakeRegistry, *events.FakeRecorder) {
	own := &fakeOwnership{owned: map[string]bool{}, since: time.Now()}
	for _, c := range owned {
		own.owned[c] = true
	}
	reg := &fakeRegistry{running: map[string]*rest.Config{}}
	rec := events.NewFakeRecorder(100)
	return &Reconciler{
		Client: env.Client, Scheme: env.Scheme, Registry: reg, Ownership: own, Identity: identity,
		Recorder: rec, ProbeTimeout: 2 * time.Second, StopTimeout: 5 * time.Second,
		SecretNamespaces: []string{testenv.ControllerNamespace},
	}, reg, rec
}

// remoteCluster creates RemoteCluster name reading key "kubeconfig" of
// Secret secret, after writing content under key there (nil content: no
// Secret), and deletes it at the end.
func remoteCluster(t *testing.T, name, secret, key string, content []byte) *v1alpha1.RemoteCluster {
	t.Helper()
	ctx := t.Context()
	if content != nil {
		if err := localcluster.WriteKubeConfigSecret(ctx, env.Client, testenv.ControllerNamespace, secret, key, content); err != nil {
			t.Fatal(err)
		}
	}
	rc := &v1alpha1.RemoteCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.RemoteClusterSpec{KubeConfig: v1alpha1.KubeConfigSource{
			SecretRef: v1alpha1.SecretKeyReference{Namespace: testenv.ControllerNamespace, Name: secret, Key: localcluster.DefaultSecretKey},
		}},
	}
	if err := env.Client.Create(ctx, rc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		var got v1alpha1.RemoteCluster
		if env.Client.Get(ctx, client.ObjectKeyFromObject(rc), &got) == nil {
			before := got.DeepCopy()
			controllerutil.RemoveFinalizer(&got, v1alpha1.RemoteClusterFinalizer)
			_ = env.Client.Patch(ctx, &got, client.MergeFrom(before))
			_ = env.Client.Delete(ctx, &got)
		}
	})
	return rc
}

func reconcileOnce(t *testing.T, r *Reconciler, name string) (ctrl.Result, error) {
	t.Helper()
	return r.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKey{Name: name}})
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

// read returns the RemoteCluster as stored.
func read(t *testing.T, name string) *v1alpha1.RemoteCluster {
	t.Helper()
	var rc v1alpha1.RemoteCluster
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, &rc); err != nil {
		t.Fatal(err)
	}
	return &rc
}

// condition returns the condition typ of the stored RemoteCluster, or an empty one.
func condition(t *testing.T, name, typ string) metav1.Condition {
	t.Helper()
	if c := meta.FindStatusCondition(read(t, name).Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}
