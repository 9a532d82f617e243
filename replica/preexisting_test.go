package replica_test

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1alpha1 "github.com/clustershard/clustershard/api/example/v1alpha1"
	"github.com/clustershard/clustershard/api/v1alpha1"
)

// Sources that exist before any replica owns their cluster, and see no
// change afterwards, are replicated once a replica acquires the cluster: the
// cluster event must find them (through the cache's field index).
func TestSourcesExistingBeforeOwnershipAreReplicated(t *testing.T) {
	ns := "preexisting"
	ensureNamespace(t, env.Client, ns)
	remoteCluster(t, "pre", 0)
	for i := range 3 {
		if err := env.Client.Create(t.Context(), source(ns, objName("pre", i), "pre")); err != nil {
			t.Fatal(err)
		}
	}
	startReplica(t, "pre-replica")
	for i := range 3 {
		eventually(t, 30*time.Second, "copy of "+objName("pre", i), func() bool {
			_, err := copyOf(t, 0, ns, objName("pre", i))
			return err == nil
		})
	}
	// A spec change reaches the copy, and RemoteSynced says which
	// generation it is true for, even though its message is the same.
	var src examplev1alpha1.ExampleChaos
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: objName("pre", 0)}, &src); err != nil {
		t.Fatal(err)
	}
	before := src.DeepCopy()
	src.Spec.Duration = "45s"
	if err := env.Client.Patch(t.Context(), &src, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the new spec in the copy and RemoteSynced at the new generation", func() bool {
		cp, err := copyOf(t, 0, ns, src.Name)
		if err != nil || cp.Spec.Duration != "45s" {
			return false
		}
		var now examplev1alpha1.ExampleChaos
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(&src), &now); err != nil {
			return false
		}
		c := meta.FindStatusCondition(now.Status.Conditions, v1alpha1.ConditionRemoteSynced)
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == now.Generation && now.Generation > before.Generation
	})
}
