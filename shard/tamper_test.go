package shard_test

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/shard"
)

// Leases changed by hand: the owner stops first, then the protocol restores
// ownership; no two replicas ever run a cluster at once.
func TestLeaseTampering(t *testing.T) {
	ns := namespace(t, "tamper")
	clusters := names(6)
	tr := newTracker()
	in := map[string]*instance{}
	for _, n := range []string{"a", "b"} {
		in[n] = startInstance(t, ns, n, clusters, trackingHandler{n, tr})
	}
	want := expected(t, []string{"a", "b"}, clusters)
	settled(t, tr, ns, want, in, 30*time.Second)
	x := firstOf(want, "a")
	key := client.ObjectKey{Namespace: ns, Name: shard.ClusterLeaseName(x)}
	lost := func(what string, at time.Time) {
		t.Helper()
		err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return tr.stoppedAfter("a", x, at), nil
		})
		if err != nil {
			t.Fatalf("%s: the owner kept running %s", what, x)
		}
	}

	// 1. The cluster Lease deleted by hand.
	var l coordinationv1.Lease
	if err := env.Client.Get(t.Context(), key, &l); err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	if err := env.Client.Delete(t.Context(), &l); err != nil {
		t.Fatal(err)
	}
	lost("deleted Lease", at)
	settled(t, tr, ns, want, in, 20*time.Second)

	// 2. The holder overwritten with a replica that does not exist.
	if err := env.Client.Get(t.Context(), key, &l); err != nil {
		t.Fatal(err)
	}
	l.Spec.HolderIdentity = ptr.To("bogus-replica")
	at = time.Now()
	if err := env.Client.Update(t.Context(), &l); err != nil {
		t.Fatal(err)
	}
	lost("bogus holder", at)
	// The bogus holder has no membership: after a lease duration the ring's
	// owner takes the cluster back.
	settled(t, tr, ns, want, in, leaseDuration+10*time.Second)

	// 3. A membership Lease deleted by hand: the elector recreates it and the
	// replica keeps its share.
	var m coordinationv1.Lease
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: shard.MemberLeaseName("a")}, &m); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(t.Context(), &m); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		return env.Client.Get(ctx, client.ObjectKeyFromObject(&m), &coordinationv1.Lease{}) == nil, nil
	})
	if err != nil {
		t.Fatal("the membership Lease was not recreated")
	}
	settled(t, tr, ns, want, in, 20*time.Second)
	if v := tr.check(); len(v) > 0 {
		t.Fatalf("overlaps: %v", v)
	}
}
