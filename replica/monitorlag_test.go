package replica_test

import (
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1alpha1 "github.com/clustershard/clustershard/api/example/v1alpha1"
	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/controllers/monitor"
)

// laggingClient is a management client whose cache never sees the sources:
// the worst case of a cache that lags behind the API server.
func laggingClient(t *testing.T) client.Client {
	t.Helper()
	c, err := cache.New(env.Management.Config, cache.Options{Scheme: env.Scheme, DefaultLabelSelector: labels.SelectorFromSet(labels.Set{"cache": "never-sees-it"})})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(t.Context()) }()
	if !c.WaitForCacheSync(t.Context()) {
		t.Fatal("cache not synced")
	}
	cl, err := client.New(env.Management.Config, client.Options{Scheme: env.Scheme, Cache: &client.CacheOptions{Reader: c, Unstructured: true}})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// The monitor never deletes the copy of a live source because its
// management cache does not show the source (yet): "not found" is
// confirmed with a read from the API server first.
func TestMonitorKeepsCopyWhenCacheLags(t *testing.T) {
	ctx := t.Context()
	const cluster, ns = "lag-east", "lag-ns"
	ensureNamespace(t, env.Client, ns)
	ensureNamespace(t, env.RemoteClients[0], ns)
	ensureRemoteCRD(t, 0, exampleKind.CRD)
	src := &examplev1alpha1.ExampleChaos{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alive"},
		Spec:       examplev1alpha1.ExampleChaosSpec{RemoteCluster: cluster, Action: "pod-kill"},
	}
	if err := env.Client.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	cp := &examplev1alpha1.ExampleChaos{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alive", Labels: map[string]string{
			v1alpha1.ControlledByLabel: v1alpha1.ControlledByValue, v1alpha1.CopyClusterLabel: cluster,
		}},
		Spec: examplev1alpha1.ExampleChaosSpec{Action: "pod-kill"},
	}
	if err := env.RemoteClients[0].Create(ctx, cp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.RemoteClients[0].Delete(ctx, cp)
		_ = env.Client.Delete(ctx, src)
	})
	// Fresh is what replicas give the monitor: a reader of the API server.
	r := &monitor.Reconciler{Kind: exampleKind, Remote: env.RemoteClients[0], Manage: laggingClient(t), Fresh: env.Client, Cluster: cluster, Identity: "lagging"}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(src)}); err != nil {
		t.Logf("reconcile: %v", err)
	}
	time.Sleep(200 * time.Millisecond) // a deletion is synchronous; this only lets a buggy one land
	if err := env.RemoteClients[0].Get(ctx, client.ObjectKeyFromObject(cp), &examplev1alpha1.ExampleChaos{}); err != nil {
		t.Fatalf("the copy of a live source was deleted because the cache did not show the source: %v", err)
	}

	// Once the source is really gone, the copy is an orphan and goes.
	if err := env.Client.Delete(ctx, src); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(src)}); err != nil {
		t.Fatal(err)
	}
	if err := env.RemoteClients[0].Get(ctx, client.ObjectKeyFromObject(cp), &examplev1alpha1.ExampleChaos{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the orphan copy was not deleted: %v", err)
	}
}

// ensureRemoteCRD copies a CRD of the management cluster into remote i
// (spec.install does this when a replica runs) and waits until it is served.
func ensureRemoteCRD(t *testing.T, remote int, name string) {
	t.Helper()
	var crd apiextensionsv1.CustomResourceDefinition
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, &crd); err != nil {
		t.Fatal(err)
	}
	cp := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: crd.Spec}
	if err := env.RemoteClients[remote].Create(t.Context(), cp); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, name+" served in the remote", func() bool {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(exampleKind.GVK.GroupVersion().WithKind(exampleKind.GVK.Kind + "List"))
		return env.RemoteClients[remote].List(t.Context(), list) == nil
	})
}
