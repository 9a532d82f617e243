package replicate_test

import (
	"context"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// A copy that already is what the source asks for is not written again.
// The source's own updates (its finalizer, its outcome, its condition)
// re-run its reconcile, and each of them used to re-apply the copy: a full
// write for the remote API server (admission, webhooks, the fence's policy)
// that changed nothing. A change of the source's spec or labels, and a copy
// edited by hand in the remote, are still written.
func TestCurrentCopyIsNotWrittenAgain(t *testing.T) {
	ctx := t.Context()
	k := env.Learned(t, exampleKind)
	r, reg, _ := newReconciler(k, "east")
	direct := directRemote(t)
	var applies atomic.Int64
	reg.running["east"] = interceptor.NewClient(direct, interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			applies.Add(1)
			return c.Apply(ctx, obj, opts...)
		},
	})
	src := createSource(t, k, "nowrite", "fault", "east")
	key := client.ObjectKeyFromObject(src)
	release(t, k, key)

	step := func(what string, want int64) {
		t.Helper()
		applies.Store(0)
		if _, err := reconcile(t, r, src); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := applies.Load(); got != want {
			t.Errorf("%s: %d applies of the copy, want %d", what, got, want)
		}
	}
	step("first sync", 1)
	for range 3 {
		step("the source's own updates re-run the reconcile", 0)
	}

	// The source's spec changes: written.
	cur := get(t, env.Client, k, key)
	if err := unstructured.SetNestedField(cur.Object, "pod-failure", "spec", "action"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	step("spec changed", 1)
	step("nothing changed since", 0)

	// A label removed from the source: written (the copy loses it too).
	cur = get(t, env.Client, k, key)
	cur.SetLabels(nil)
	if err := env.Client.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	step("label removed", 1)
	if l := get(t, env.RemoteClients[0], k, key).GetLabels(); l["app"] != "" {
		t.Errorf("the copy kept the label the source dropped: %v", l)
	}

	// The copy edited by hand in the remote: written back.
	cp := get(t, env.RemoteClients[0], k, key)
	if err := unstructured.SetNestedField(cp.Object, "edited", "spec", "duration"); err != nil {
		t.Fatal(err)
	}
	if err := env.RemoteClients[0].Update(ctx, cp); err != nil {
		t.Fatal(err)
	}
	step("copy edited by hand", 1)
	if d, _, _ := unstructured.NestedString(get(t, env.RemoteClients[0], k, key).Object, "spec", "duration"); d != "30s" {
		t.Errorf("copy spec.duration = %q after the repair, want the source's 30s", d)
	}
}
