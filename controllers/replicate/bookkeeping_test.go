package replicate

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/clustershard/clustershard/api/v1alpha1"
)

// An update that only carries replication's own reports (status, the
// outcome and remote-finalizer annotations, the API server's bookkeeping)
// is not reconciled again; every other change is, the finalizer and the
// replicated-to annotation (which the owner of another cluster waits for)
// included.
func TestOnlyBookkeeping(t *testing.T) {
	base := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.clustershard.io/v1alpha1", "kind": "ExampleChaos",
			"metadata": map[string]any{
				"name": "a", "namespace": "ns", "resourceVersion": "1", "generation": int64(1),
				"labels":      map[string]any{"app": "demo"},
				"annotations": map[string]any{"user": "x"},
			},
			"spec": map[string]any{"remoteCluster": "east", "action": "pod-kill"},
		}}
		return u
	}
	for _, tc := range []struct {
		name string
		edit func(u *unstructured.Unstructured)
		skip bool
	}{
		{"nothing but the resourceVersion", func(u *unstructured.Unstructured) { u.SetResourceVersion("2") }, true},
		{"status written (the outcome condition, the mirror)", func(u *unstructured.Unstructured) {
			u.Object["status"] = map[string]any{"phase": "Running"}
			u.SetResourceVersion("2")
		}, true},
		{"status written on a kind without the subresource (generation bumped)", func(u *unstructured.Unstructured) {
			u.Object["status"] = map[string]any{"experiment": map[string]any{}}
			u.SetGeneration(2)
		}, true},
		{"the outcome annotation", func(u *unstructured.Unstructured) {
			a := u.GetAnnotations()
			a[v1alpha1.OutcomeAnnotation] = `{"status":"True"}`
			u.SetAnnotations(a)
		}, true},
		{"the remote finalizers shown", func(u *unstructured.Unstructured) {
			a := u.GetAnnotations()
			a[v1alpha1.RemoteFinalizersAnnotation] = "chaos-mesh/records"
			u.SetAnnotations(a)
		}, true},
		{"managed fields", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"manager": "x"}}, "metadata", "managedFields")
		}, true},
		{"spec changed", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "pod-failure", "spec", "action")
			u.SetGeneration(2)
		}, false},
		{"moved to another cluster", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "west", "spec", "remoteCluster")
		}, false},
		{"a label", func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"app": "other"}) }, false},
		{"a user's annotation", func(u *unstructured.Unstructured) { u.SetAnnotations(map[string]string{"user": "y"}) }, false},
		{"the replicated-to annotation removed", func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{"user": "x", v1alpha1.ReplicatedToAnnotation: "east"})
		}, false},
		{"the finalizer", func(u *unstructured.Unstructured) { u.SetFinalizers([]string{v1alpha1.SourceFinalizer}) }, false},
		{"deletion", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "2026-12-04T00:00:00Z", "metadata", "deletionTimestamp")
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, cur := base(), base()
			tc.edit(cur)
			if got := onlyBookkeeping(old, cur); got != tc.skip {
				t.Errorf("onlyBookkeeping = %v, want %v", got, tc.skip)
			}
			if got := onlyBookkeeping(cur, old); got != tc.skip {
				t.Errorf("reversed: onlyBookkeeping = %v, want %v", got, tc.skip)
			}
		})
	}
}
