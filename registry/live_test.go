package registry_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/registry"
)

// A remote client reads unstructured objects from the remote manager's
// cache, like typed ones (no round trip per read), and from the API server
// when asked with registry.Live: here told apart by a namespace the cache
// does not cover.
func TestRemoteReadsAreCachedUnlessLive(t *testing.T) {
	ctx := t.Context()
	ensureNamespace(t, env.RemoteClients[0], "live-in")
	ensureNamespace(t, env.RemoteClients[0], "live-out")
	for _, ns := range []string{"live-in", "live-out"} {
		if err := env.RemoteClients[0].Create(ctx, configMap(ns, "probe", nil)); err != nil {
			t.Fatal(err)
		}
	}
	r := newRegistry(t, &seen{})
	if err := r.Spawn("cached", env.Remotes[0].Config, registry.WithNamespaces("live-in")); err != nil {
		t.Fatal(err)
	}
	get := func(ns string, opts ...client.GetOption) error {
		return r.WithClient("cached", func(c client.Client) error {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
			return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "probe"}, u, opts...)
		})
	}
	eventually(t, 10*time.Second, "the cached read of an object in the cache's namespace", func() bool { return get("live-in") == nil })
	if err := get("live-out"); err == nil {
		t.Fatal("an unstructured read outside the cache's namespaces succeeded: it did not come from the cache")
	}
	for _, ns := range []string{"live-in", "live-out"} {
		if err := get(ns, registry.Live); err != nil {
			t.Fatalf("a live read in %s: %v", ns, err)
		}
	}
}
