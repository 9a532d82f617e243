package replicate_test

import (
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/controllers/replicate"
)

// A source whose existing RemoteCluster nobody runs is reported by the
// Reporter whether or not the ring assigns the cluster to it (the ring's
// choice may be a replica that cannot run it, and the Reporter another),
// once the grace has passed, with a Warning; before the grace it looks
// again when the grace ends. Another replica writes nothing. On the
// example kind and on a kind shaped like Chaos Mesh's (no status
// subresource).
func TestReporterSaysClusterUnowned(t *testing.T) {
	createRemoteCluster(t, "nobody")
	for _, kind := range []string{"example", "strict"} {
		t.Run(kind, func(t *testing.T) {
			k := env.Learned(t, exampleKind)
			if kind == "strict" {
				k = env.Learned(t, strictKind)
			}
			src := createSource(t, k, "unowned-"+kind, "fault", "nobody")
			key := client.ObjectKeyFromObject(src)
			release(t, k, key)

			// Another replica, the ring's choice or not: nothing.
			for _, assigned := range []bool{false, true} {
				r, reg, rec := newReconciler(k)
				own := r.Ownership.(*fakeOwnership)
				own.assigned, own.notReporter = assigned, true
				own.unowned = map[string]time.Time{"nobody": time.Now().Add(-time.Hour)}
				if res, err := reconcile(t, r, src); err != nil || res.RequeueAfter != 0 {
					t.Fatalf("not the reporter, assigned=%v: Reconcile = %+v, %v", assigned, res, err)
				}
				if n := reg.callsFor("nobody"); n != 0 {
					t.Errorf("not the reporter: %d remote calls", n)
				}
				if e := nextEvent(rec); e != "" {
					t.Errorf("not the reporter: event %q", e)
				}
			}
			if got := get(t, env.Client, k, key); got.GetResourceVersion() != src.GetResourceVersion() {
				t.Errorf("a replica that does not report wrote the source: %v", got.Object["metadata"])
			}

			// The Reporter, not the ring's choice, within the grace:
			// nothing yet, a look when the grace ends.
			r, _, rec := newReconciler(k)
			r.UnownedGrace = time.Minute
			own := r.Ownership.(*fakeOwnership)
			own.assigned = false
			own.unowned = map[string]time.Time{"nobody": time.Now().Add(-20 * time.Second)}
			res, err := reconcile(t, r, src)
			if err != nil || res.RequeueAfter <= 30*time.Second || res.RequeueAfter > 40*time.Second {
				t.Fatalf("within the grace: Reconcile = %+v, %v; want a look in about 40s", res, err)
			}
			if e := nextEvent(rec); e != "" {
				t.Errorf("within the grace: event %q", e)
			}

			// Past the grace: ClusterUnowned, a Warning, a re-check.
			own.unowned["nobody"] = time.Now().Add(-2 * time.Minute)
			res, err = reconcile(t, r, src)
			if err != nil || res.RequeueAfter < replicate.DefaultRecheck {
				t.Fatalf("past the grace: Reconcile = %+v, %v; want a re-check", res, err)
			}
			cond, o := synced(t, k, key)
			msg, _ := cond["message"].(string)
			if cond["reason"] != v1alpha1.ReasonClusterUnowned && o.Reason != v1alpha1.ReasonClusterUnowned {
				t.Errorf("RemoteSynced %v, outcome %+v: want %s", cond, o, v1alpha1.ReasonClusterUnowned)
			}
			if !strings.Contains(msg, "no replica runs") && !strings.Contains(o.Message, "no replica runs") {
				t.Errorf("RemoteSynced %v, outcome %+v: want it to say no replica runs the cluster", cond, o)
			}
			if e := nextEvent(rec); !strings.Contains(e, v1alpha1.ReasonClusterUnowned) {
				t.Errorf("event %q, want a %s Warning", e, v1alpha1.ReasonClusterUnowned)
			}
		})
	}
}
