package replicate_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/registry"
)

// While a cluster is held but its writes are fenced (a membership renewal
// answered late, within its grace), a source naming it is not written, not
// reported as failed or as run by nobody, and looked at again soon; a copy
// write cut by the fence then is not the source's failure either. On a kind
// shaped like Chaos Mesh's (no status subresource) and on the example.
func TestHeldClusterWritesNothingWhileFenced(t *testing.T) {
	for _, k := range []struct {
		name string
		kind string
	}{{"example", "example"}, {"chaos-shaped", "strict"}} {
		t.Run(k.name, func(t *testing.T) {
			kind := exampleKind
			if k.kind == "strict" {
				kind = strictKind
			}
			kind = env.Learned(t, kind)
			r, reg, rec := newReconciler(kind, "east")
			own := r.Ownership.(*fakeOwnership)
			own.held = map[string]bool{}
			var cut bool
			reg.running["east"] = interceptor.NewClient(directRemote(t), interceptor.Funcs{
				Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
					if cut { // validity ends while the write is on its way
						own.owned["east"], own.held["east"] = false, true
						return fmt.Errorf("%w: membership not valid", registry.ErrFenced)
					}
					return c.Apply(ctx, obj, opts...)
				},
			})
			src := createSource(t, kind, "held-"+k.name, "fault", "east")
			key := client.ObjectKeyFromObject(src)
			release(t, kind, key)
			if _, err := reconcile(t, r, src); err != nil {
				t.Fatalf("first sync: %v", err)
			}
			for nextEvent(rec) != "" {
			}
			before, _ := synced(t, kind, key)
			if before == nil || before["status"] != "True" {
				t.Fatalf("RemoteSynced after the first sync: %v", before)
			}
			change := func(action string) {
				cur := get(t, env.Client, kind, key)
				if err := unstructured.SetNestedField(cur.Object, action, "spec", "action"); err != nil {
					t.Fatal(err)
				}
				if err := env.Client.Update(t.Context(), cur); err != nil {
					t.Fatal(err)
				}
			}
			check := func(what string) {
				t.Helper()
				res, err := reconcile(t, r, src)
				if err != nil || res.RequeueAfter <= 0 || res.RequeueAfter > time.Second {
					t.Fatalf("%s: %+v, %v; want a requeue soon and no error", what, res, err)
				}
				if c, _ := synced(t, kind, key); c == nil || c["status"] != "True" || c["reason"] != before["reason"] {
					t.Fatalf("%s: RemoteSynced %v, want it unchanged (%v)", what, c, before)
				}
				if e := nextEvent(rec); e != "" {
					t.Fatalf("%s: event %q", what, e)
				}
				if cp := get(t, env.RemoteClients[0], kind, key); cp == nil || cp.Object["spec"].(map[string]any)["action"] != "pod-kill" {
					t.Fatalf("%s: the copy changed: %v", what, cp)
				}
			}

			// Held, fenced: nothing is written.
			own.owned["east"], own.held["east"] = false, true
			change("pod-failure")
			check("held, writes fenced")

			// Owned again, and the write is cut by the fence on its way.
			own.owned["east"], own.held["east"] = true, false
			cut = true
			check("copy write cut by the fence")

			// Writable again: the change goes.
			own.owned["east"], own.held["east"], cut = true, false, false
			if _, err := reconcile(t, r, src); err != nil {
				t.Fatalf("after the renewal: %v", err)
			}
			if cp := get(t, env.RemoteClients[0], kind, key); cp.Object["spec"].(map[string]any)["action"] != "pod-failure" {
				t.Fatalf("the change was not written once writable: %v", cp.Object["spec"])
			}
			if c, _ := synced(t, kind, key); c == nil || c["reason"] != v1alpha1.ReasonSynced {
				t.Fatalf("RemoteSynced after the renewal: %v", c)
			}
		})
	}
}
