package monitor_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/remotecopy"
)

// The status a remote controller writes on a copy is mirrored onto its
// source, keeping the source's own RemoteSynced condition (and dropping
// none of the remote's); the copy and the source's spec and metadata are not
// written. ExampleChaos mirrors through /status and keeps its generation;
// the Chaos Mesh-shaped StrictChaos, without a status subresource, mirrors
// with the object, which bumps its generation. A second pass writes nothing.
func TestRemoteStatusMirrored(t *testing.T) {
	now := time.Now().UTC().Format(time.RFC3339)
	remote := map[string]map[string]any{
		"ExampleChaos": {"phase": "Injected", "conditions": []any{map[string]any{
			"type": "AllInjected", "status": "True", "reason": "Injected", "message": "2 pods", "lastTransitionTime": now,
		}}},
		"StrictChaos": {
			"experiment": map[string]any{"desiredPhase": "Run", "containerRecords": []any{map[string]any{"id": "default/pod-1", "phase": "Injected"}}},
			"conditions": []any{map[string]any{"type": "AllInjected", "status": "True", "reason": "Injected"}},
		},
	}
	for _, k := range []remotecopy.Kind{exampleKind, strictKind} {
		t.Run(k.GVK.Kind, func(t *testing.T) {
			ctx := t.Context()
			k := env.Learned(t, k)
			ns := "mirror-" + strings.ToLower(k.GVK.Kind)
			inBoth(t, ns)
			src := newSource(k, ns, "fault", cluster)
			if err := env.Client.Create(ctx, src); err != nil {
				t.Fatal(err)
			}
			key := client.ObjectKeyFromObject(src)
			if _, err := remotecopy.SetRemoteSynced(ctx, env.Client, k, src, true, v1alpha1.ReasonSynced, "copy applied"); err != nil {
				t.Fatal(err)
			}
			ours := remoteSynced(src)
			cp := createCopy(t, k, src)
			cp.Object["status"] = remote[k.GVK.Kind]
			var err error
			if k.Shape().StatusSubresource {
				err = env.RemoteClients[0].Status().Update(ctx, cp)
			} else {
				err = env.RemoteClients[0].Update(ctx, cp)
			}
			if err != nil {
				t.Fatal(err)
			}
			before := get(t, env.Client, k, key)

			if _, err := reconcile(t, newReconciler(k), key); err != nil {
				t.Fatal(err)
			}

			after := get(t, env.Client, k, key)
			want := map[string]any{}
			for f, v := range remote[k.GVK.Kind] {
				want[f] = v
			}
			want["conditions"] = append(append([]any{}, remote[k.GVK.Kind]["conditions"].([]any)...), ours)
			if got, _, _ := unstructured.NestedMap(after.Object, "status"); !reflect.DeepEqual(got, want) {
				t.Errorf("source status = %v\nwant %v", got, want)
			}
			if !reflect.DeepEqual(after.Object["spec"], before.Object["spec"]) || !reflect.DeepEqual(after.GetAnnotations(), before.GetAnnotations()) {
				t.Errorf("the source's spec or annotations changed: %v %v", after.Object["spec"], after.GetAnnotations())
			}
			bumped := after.GetGeneration() != before.GetGeneration()
			if bumped == k.Shape().StatusSubresource {
				t.Errorf("generation %d -> %d with status subresource %v", before.GetGeneration(), after.GetGeneration(), k.Shape().StatusSubresource)
			}
			if got := get(t, env.RemoteClients[0], k, key); got.GetResourceVersion() != cp.GetResourceVersion() {
				t.Error("the copy was written")
			}

			if _, err := reconcile(t, newReconciler(k), key); err != nil {
				t.Fatal(err)
			}
			if again := get(t, env.Client, k, key); again.GetResourceVersion() != after.GetResourceVersion() {
				t.Error("a second pass wrote the source again")
			}
		})
	}
}

// A copy deleted by hand while its source lives is put back, labelled as
// this cluster's copy and written by this replica. A source that names
// another cluster gets no copy here.
func TestDeletedCopyIsRecreated(t *testing.T) {
	ctx := t.Context()
	k := env.Learned(t, strictKind)
	inBoth(t, "recreate")
	mine := newSource(k, "recreate", "mine", cluster)
	theirs := newSource(k, "recreate", "theirs", "west")
	for _, s := range []*unstructured.Unstructured{mine, theirs} {
		if err := env.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	r := newReconciler(k)
	for _, s := range []*unstructured.Unstructured{mine, theirs} {
		if _, err := reconcile(t, r, client.ObjectKeyFromObject(s)); err != nil {
			t.Fatal(err)
		}
	}
	cp := get(t, env.RemoteClients[0], k, client.ObjectKeyFromObject(mine))
	if cp == nil {
		t.Fatal("the copy was not re-created")
	}
	if l, a := cp.GetLabels(), cp.GetAnnotations(); l[v1alpha1.CopyClusterLabel] != cluster || l[v1alpha1.ControlledByLabel] != v1alpha1.ControlledByValue ||
		a[v1alpha1.WrittenByAnnotation] != "replica-test" || a[v1alpha1.SourceUIDAnnotation] != string(mine.GetUID()) {
		t.Errorf("re-created copy: labels %v, annotations %v", l, a)
	}
	if get(t, env.RemoteClients[0], k, client.ObjectKeyFromObject(theirs)) != nil {
		t.Error("a copy was created for a source of another cluster")
	}
}

// A copy whose source is gone, or names another cluster it was not copied
// to here, is deleted once the API server (the Fresh reader) confirms it.
// A cache that lags and does not show a living source yet does not get its
// copy deleted: the Fresh read overrules it.
func TestOrphanCopyIsDeleted(t *testing.T) {
	ctx := t.Context()
	k := env.Learned(t, exampleKind)
	inBoth(t, "orphans")

	gone := newSource(k, "orphans", "gone", cluster)
	gone.SetUID("0000-gone")
	createCopy(t, k, gone) // its source was never created here
	moved := newSource(k, "orphans", "moved", "west")
	if err := env.Client.Create(ctx, moved); err != nil {
		t.Fatal(err)
	}
	createCopy(t, k, moved)
	for _, s := range []*unstructured.Unstructured{gone, moved} {
		key := client.ObjectKeyFromObject(s)
		if _, err := reconcile(t, newReconciler(k), key); err != nil {
			t.Fatal(err)
		}
		if get(t, env.RemoteClients[0], k, key) != nil {
			t.Errorf("orphan copy %s kept", key)
		}
	}

	lives := newSource(k, "orphans", "lives", cluster)
	if err := env.Client.Create(ctx, lives); err != nil {
		t.Fatal(err)
	}
	createCopy(t, k, lives)
	key := client.ObjectKeyFromObject(lives)
	direct, err := client.NewWithWatch(env.Management.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	stale := interceptor.NewClient(direct, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, read client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if read == key {
				return apierrors.NewNotFound(schema.GroupResource{Group: exampleKind.GVK.Group, Resource: "examplechaos"}, read.Name)
			}
			return c.Get(ctx, read, obj, opts...)
		},
	})
	r := newReconciler(k)
	r.Manage = stale
	if _, err := reconcile(t, r, key); err != nil {
		t.Fatal(err)
	}
	if get(t, env.RemoteClients[0], k, key) == nil {
		t.Error("the copy of a living source was deleted on a stale cache's word")
	}
}

// A remote status no schema checked (looseKind's) does not make the
// monitor fail: garbage conditions are mirrored as they are, except a
// RemoteSynced forged by the remote, which the source's own replaces; a
// status that is not an object is not mirrored at all. Only the source's
// status is written.
func TestGarbageRemoteStatus(t *testing.T) {
	ctx := t.Context()
	looseCRD(t)
	k := env.Learned(t, looseKind)
	inBoth(t, "garbage")
	cases := map[string]struct {
		remote any
		want   func(ours map[string]any) any // nil: the source is not written
	}{
		"garbage object": {
			remote: map[string]any{
				"phase":              map[string]any{"deep": []any{int64(1), "x"}},
				"observedGeneration": "nope",
				"conditions": []any{"not-a-condition", int64(42), map[string]any{"type": "Ready"},
					map[string]any{"type": v1alpha1.ConditionRemoteSynced, "status": "False", "reason": "Forged"}},
			},
			want: func(ours map[string]any) any {
				return map[string]any{
					"phase":              map[string]any{"deep": []any{int64(1), "x"}},
					"observedGeneration": "nope",
					"conditions":         []any{"not-a-condition", int64(42), map[string]any{"type": "Ready"}, ours},
				}
			},
		},
		"not an object": {remote: "Injected"},
		"conditions not a list": {
			remote: map[string]any{"phase": "Running", "conditions": map[string]any{"Ready": true}},
			want: func(ours map[string]any) any {
				return map[string]any{"phase": "Running", "conditions": []any{ours}}
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			src := newSource(k, "garbage", strings.ReplaceAll(name, " ", "-"), cluster)
			if err := env.Client.Create(ctx, src); err != nil {
				t.Fatal(err)
			}
			key := client.ObjectKeyFromObject(src)
			if _, err := remotecopy.SetRemoteSynced(ctx, env.Client, k, src, true, v1alpha1.ReasonSynced, "copy applied"); err != nil {
				t.Fatal(err)
			}
			ours := remoteSynced(src)
			cp := createCopy(t, k, src)
			cp.Object["status"] = tc.remote
			if err := env.RemoteClients[0].Update(ctx, cp); err != nil {
				t.Fatal(err)
			}
			before := get(t, env.Client, k, key)

			if _, err := reconcile(t, newReconciler(k), key); err != nil {
				t.Fatalf("Reconcile: %v", err)
			}

			after := get(t, env.Client, k, key)
			if tc.want == nil {
				if after.GetResourceVersion() != before.GetResourceVersion() {
					t.Errorf("the source was written: status %v", after.Object["status"])
				}
				return
			}
			if want := tc.want(ours); !reflect.DeepEqual(after.Object["status"], want) {
				t.Errorf("source status = %v\nwant %v", after.Object["status"], want)
			}
			if !reflect.DeepEqual(after.Object["spec"], before.Object["spec"]) || !reflect.DeepEqual(after.GetAnnotations(), before.GetAnnotations()) ||
				!reflect.DeepEqual(after.GetLabels(), before.GetLabels()) {
				t.Error("more than the source's status was written")
			}
			if got := get(t, env.RemoteClients[0], k, key); got.GetResourceVersion() != cp.GetResourceVersion() {
				t.Error("the copy was written")
			}
		})
	}
}

// remoteSynced returns src's RemoteSynced condition, which must be there.
func remoteSynced(src *unstructured.Unstructured) map[string]any {
	conds, _, _ := unstructured.NestedSlice(src.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == v1alpha1.ConditionRemoteSynced {
			return m
		}
	}
	panic("no RemoteSynced condition on " + src.GetName())
}
