package replicate_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/controllers/replicate"
	"github.com/clustershard/clustershard/internal/remotecopy"
)

// A source naming a cluster this replica owns gets its copy in that
// cluster's remote: same namespace and name, the remote-cluster field
// cleared, labelled as clustershard's copy for the cluster and annotated
// with its writer and its source. The source holds the finalizer and names
// the cluster it was copied to, and says Synced in the form its kind keeps:
// a full condition for ExampleChaos, type, status and reason only (and the
// required status.experiment) for the Chaos Mesh-shaped StrictChaos.
func TestOwnedSourceIsCopied(t *testing.T) {
	for _, k := range []remotecopy.Kind{exampleKind, strictKind} {
		t.Run(k.GVK.Kind, func(t *testing.T) {
			k := env.Learned(t, k)
			r, _, _ := newReconciler(k, "east")
			ns := "copied-" + strings.ToLower(k.GVK.Kind)
			src := createSource(t, k, ns, "fault", "east")
			key := client.ObjectKeyFromObject(src)
			release(t, k, key)

			if res, err := reconcile(t, r, src); err != nil || res.RequeueAfter != 0 {
				t.Fatalf("Reconcile = %+v, %v; want done", res, err)
			}

			cp := get(t, env.RemoteClients[0], k, key)
			if cp == nil {
				t.Fatal("no copy in the remote cluster")
			}
			l, a := cp.GetLabels(), cp.GetAnnotations()
			if l[v1alpha1.ControlledByLabel] != v1alpha1.ControlledByValue || l[v1alpha1.CopyClusterLabel] != "east" || l["app"] != "demo" {
				t.Errorf("copy labels = %v", l)
			}
			src = get(t, env.Client, k, key)
			if a[v1alpha1.WrittenByAnnotation] != "replica-test" || a[v1alpha1.SourceUIDAnnotation] != string(src.GetUID()) || a[v1alpha1.SpecHashAnnotation] != remotecopy.SpecHash(src) {
				t.Errorf("copy annotations = %v", a)
			}
			if field := k.Cluster(cp); field != "" {
				t.Errorf("the copy still names remote cluster %q", field)
			}
			if action, _, _ := unstructured.NestedString(cp.Object, "spec", "action"); action != "pod-kill" {
				t.Errorf("copy spec.action = %q, want the source's", action)
			}

			if !controllerutil.ContainsFinalizer(src, v1alpha1.SourceFinalizer) || src.GetAnnotations()[v1alpha1.ReplicatedToAnnotation] != "east" {
				t.Errorf("source finalizers %v, annotations %v: want %s and %s=east", src.GetFinalizers(), src.GetAnnotations(), v1alpha1.SourceFinalizer, v1alpha1.ReplicatedToAnnotation)
			}
			cond, o := synced(t, k, key)
			if cond == nil || cond["status"] != "True" || cond["reason"] != v1alpha1.ReasonSynced {
				t.Fatalf("RemoteSynced = %v, want True/Synced", cond)
			}
			if o.Reason != v1alpha1.ReasonSynced || !strings.Contains(o.Message, "east") {
				t.Errorf("outcome = %+v", o)
			}
			_, hasMessage := cond["message"]
			if strict := !k.Shape().StatusSubresource; strict {
				if hasMessage {
					t.Errorf("StrictChaos keeps no message in a condition, got %v", cond)
				}
				if _, ok, _ := unstructured.NestedMap(src.Object, "status", "experiment"); !ok {
					t.Error("StrictChaos status written without the required experiment")
				}
			} else if !hasMessage {
				t.Errorf("ExampleChaos condition without its message: %v", cond)
			}
		})
	}
}

// A deleted source keeps its finalizer while its copy holds remote
// finalizers (Chaos Mesh's chaos-mesh/records while it recovers): the copy
// is deleted, the source names the finalizers it waits for and says
// DeletingRemoteCopy; once the copy is gone the source is released.
func TestDeletedSourceWaitsForItsCopy(t *testing.T) {
	ctx := t.Context()
	k := env.Learned(t, strictKind)
	r, _, _ := newReconciler(k, "east")
	src := createSource(t, k, "deleted-src", "fault", "east")
	key := client.ObjectKeyFromObject(src)
	release(t, k, key)
	if _, err := reconcile(t, r, src); err != nil {
		t.Fatal(err)
	}
	cp := get(t, env.RemoteClients[0], k, key)
	if cp == nil {
		t.Fatal("no copy")
	}
	const remoteFinalizer = "chaos-mesh/records"
	controllerutil.AddFinalizer(cp, remoteFinalizer)
	if err := env.RemoteClients[0].Update(ctx, cp); err != nil {
		t.Fatal(err)
	}

	if err := env.Client.Delete(ctx, src); err != nil {
		t.Fatal(err)
	}
	res, err := reconcile(t, r, src)
	if err != nil || res.RequeueAfter == 0 {
		t.Fatalf("Reconcile = %+v, %v; want a requeue while the copy goes", res, err)
	}
	if cp = get(t, env.RemoteClients[0], k, key); cp == nil || cp.GetDeletionTimestamp().IsZero() {
		t.Fatalf("the copy was not deleted (it is %v)", cp)
	}
	held := get(t, env.Client, k, key)
	if held == nil || !controllerutil.ContainsFinalizer(held, v1alpha1.SourceFinalizer) {
		t.Fatal("the source was released before its copy was gone")
	}
	if got := held.GetAnnotations()[v1alpha1.RemoteFinalizersAnnotation]; got != remoteFinalizer {
		t.Errorf("%s = %q, want %q", v1alpha1.RemoteFinalizersAnnotation, got, remoteFinalizer)
	}
	if _, o := synced(t, k, key); o.Reason != v1alpha1.ReasonDeleting || !strings.Contains(o.Message, remoteFinalizer) {
		t.Errorf("outcome while deleting = %+v", o)
	}

	controllerutil.RemoveFinalizer(cp, remoteFinalizer)
	if err := env.RemoteClients[0].Update(ctx, cp); err != nil {
		t.Fatal(err)
	}
	if res, err := reconcile(t, r, src); err != nil || res.RequeueAfter != 0 {
		t.Fatalf("Reconcile after the copy went = %+v, %v", res, err)
	}
	if get(t, env.RemoteClients[0], k, key) != nil {
		t.Error("the copy is still there")
	}
	if get(t, env.Client, k, key) != nil {
		t.Error("the source was not released")
	}
}

// A source naming a RemoteCluster that does not exist says ClusterNotFound
// (condition and Warning event, from the replica the ring assigns the name
// to), is looked at again later, and is neither tracked nor copied. The
// message names the cluster and says no RemoteCluster of that name exists:
// in the condition where the kind keeps a message (ExampleChaos), and in the
// outcome annotation and the event for a Chaos Mesh-shaped kind, whose
// conditions keep type, status and reason only (StrictChaos).
func TestMissingClusterSaysClusterNotFound(t *testing.T) {
	for _, k := range []remotecopy.Kind{exampleKind, strictKind} {
		t.Run(k.GVK.Kind, func(t *testing.T) {
			k := env.Learned(t, k)
			r, reg, rec := newReconciler(k) // owns nothing: nobody owns "nowhere"
			src := createSource(t, k, "missing-cluster-"+strings.ToLower(k.GVK.Kind), "fault", "nowhere")
			key := client.ObjectKeyFromObject(src)
			release(t, k, key)

			res, err := reconcile(t, r, src)
			if err != nil || res.RequeueAfter == 0 {
				t.Fatalf("Reconcile = %+v, %v; want a later look without error", res, err)
			}
			const says = `RemoteCluster "nowhere" does not exist`
			cond, o := synced(t, k, key)
			if cond == nil || cond["status"] != "False" || cond["reason"] != v1alpha1.ReasonClusterNotFound {
				t.Fatalf("RemoteSynced = %v, want False/%s", cond, v1alpha1.ReasonClusterNotFound)
			}
			msg, hasMessage := cond["message"].(string)
			switch strict := !k.Shape().StatusSubresource; {
			case strict && hasMessage:
				t.Errorf("StrictChaos keeps no message in a condition, got %v", cond)
			case !strict && !strings.Contains(msg, says):
				t.Errorf("RemoteSynced message %q, want it to say %q", msg, says)
			}
			if o.Reason != v1alpha1.ReasonClusterNotFound || !strings.Contains(o.Message, says) {
				t.Errorf("outcome annotation %+v, want %s saying %q", o, v1alpha1.ReasonClusterNotFound, says)
			}
			if e := nextEvent(rec); !strings.HasPrefix(e, "Warning "+v1alpha1.ReasonClusterNotFound+" ") || !strings.Contains(e, says) {
				t.Errorf("event = %q, want a Warning %s saying %q", e, v1alpha1.ReasonClusterNotFound, says)
			}
			if got := get(t, env.Client, k, key); controllerutil.ContainsFinalizer(got, v1alpha1.SourceFinalizer) {
				t.Error("a source of a missing cluster got the finalizer")
			}
			if n := reg.callsFor("nowhere"); n != 0 {
				t.Errorf("%d remote calls for a missing cluster", n)
			}
			// Looked at again while nothing changed: the outcome stands, and no
			// second Warning is emitted (one per recheck would flood the events).
			if _, err := reconcile(t, r, src); err != nil {
				t.Fatal(err)
			}
			if e := nextEvent(rec); e != "" {
				t.Errorf("a recheck with nothing changed emitted %q", e)
			}
		})
	}
}

// A source whose existing RemoteCluster another replica owns is not
// touched here, whether or not the ring assigns the name to this replica:
// no write to the source, no remote call, no copy.
func TestClusterOwnedElsewhereIsNotWritten(t *testing.T) {
	createRemoteCluster(t, "elsewhere")
	k := env.Learned(t, exampleKind)
	src := createSource(t, k, "owned-elsewhere", "fault", "elsewhere")
	key := client.ObjectKeyFromObject(src)
	release(t, k, key)

	for _, assigned := range []bool{false, true} {
		r, reg, rec := newReconciler(k, "east")
		r.Ownership.(*fakeOwnership).assigned = assigned
		if res, err := reconcile(t, r, src); err != nil || res.RequeueAfter != 0 {
			t.Fatalf("assigned=%v: Reconcile = %+v, %v", assigned, res, err)
		}
		if n := reg.callsFor("elsewhere"); n != 0 {
			t.Errorf("assigned=%v: %d remote calls for a cluster owned elsewhere", assigned, n)
		}
		if e := nextEvent(rec); e != "" {
			t.Errorf("assigned=%v: event %q", assigned, e)
		}
	}
	if got := get(t, env.Client, k, key); got.GetResourceVersion() != src.GetResourceVersion() {
		t.Errorf("the source was written: %v", got.Object["metadata"])
	}
	if get(t, env.RemoteClients[0], k, key) != nil {
		t.Error("a copy was written for a cluster owned elsewhere")
	}
}

// A source of an owned cluster whose remote manager does not run here
// (not spawned yet) says ClusterNotReady with a Warning event and writes no
// copy; it returns no error (no backoff retries spending the workers on an
// unhealthy cluster's sources) but a re-check after the recheck interval,
// the fallback of the cluster's next state change.
func TestClusterNotRunningSaysClusterNotReady(t *testing.T) {
	k := env.Learned(t, strictKind)
	r, reg, rec := newReconciler(k, "east")
	delete(reg.running, "east")
	src := createSource(t, k, "not-running", "fault", "east")
	key := client.ObjectKeyFromObject(src)
	release(t, k, key)

	res, err := reconcile(t, r, src)
	if err != nil || res.RequeueAfter < replicate.DefaultRecheck || res.RequeueAfter > replicate.DefaultRecheck*6/5 || res.Priority == nil || *res.Priority >= 0 {
		t.Fatalf("Reconcile = %+v, %v; want no error (no backoff retries) and a low-priority re-check after about %v", res, err, replicate.DefaultRecheck)
	}
	cond, o := synced(t, k, key)
	if msg, _ := cond["message"].(string); !strings.Contains(o.Message, "not spawned") && !strings.Contains(msg, "not spawned") {
		t.Errorf("RemoteSynced %v, outcome %+v: want it to say the manager is not spawned", cond, o)
	}
	if cond == nil || cond["status"] != "False" || cond["reason"] != v1alpha1.ReasonClusterNotReady || o.Reason != v1alpha1.ReasonClusterNotReady {
		t.Errorf("RemoteSynced = %v, outcome %+v; want False/%s", cond, o, v1alpha1.ReasonClusterNotReady)
	}
	if e := nextEvent(rec); !strings.HasPrefix(e, "Warning "+v1alpha1.ReasonClusterNotReady+" ") {
		t.Errorf("event = %q", e)
	}
	if get(t, env.RemoteClients[0], k, key) != nil {
		t.Error("a copy was written without a running manager")
	}
}
