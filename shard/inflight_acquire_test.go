package shard_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/clustershard/clustershard/shard"
)

// The passes do not wait for the acquisitions they start. One whose answer
// is slow (the Lease already written at the server, naming this replica)
// is still this replica's: while it is on its way, a ring change that moves
// its cluster to a replica that just joined must not make the sweep take
// the Lease for one left behind and free it, or the newcomer would acquire
// it and both would run the cluster once the slow answer came. Here the
// answer of a's acquisition of the target is held until b has joined and
// the ring gives the target to b: a frees nothing under it, the target ends
// on b by a hand-over, and no cluster runs twice.
func TestSlowAcquisitionIsNotSweptUnderIt(t *testing.T) {
	ns := namespace(t, "slow-acquire")
	clusters := names(6)
	var target string
	for n, m := range expected(t, []string{"a", "b"}, clusters) {
		if m == "b" {
			target = n
			break
		}
	}
	tr := newTracker()
	held := make(chan struct{})
	let := make(chan struct{})
	var once atomic.Bool
	var freedByA atomic.Int32
	isTarget := func(obj client.Object) (*coordinationv1.Lease, bool) {
		l, ok := obj.(*coordinationv1.Lease)
		return l, ok && l.Name == shard.ClusterLeaseName(target)
	}
	slow := func(ctx context.Context, obj client.Object, write func() error) error {
		l, ok := isTarget(obj)
		if !ok {
			return write()
		}
		if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == "" {
			freedByA.Add(1)
		}
		err := write()
		if err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == "a" && once.CompareAndSwap(false, true) {
			close(held)
			select { // the answer is on its way: the Lease names a already
			case <-let:
			case <-time.After(20 * time.Second):
			}
		}
		return err
	}
	a := startInstanceWith(t, ns, "a", clusters, trackingHandler{"a", tr}, leaseWrites(slow), nil)
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatal("a never acquired the target")
	}
	b := startInstance(t, ns, "b", clusters, trackingHandler{"b", tr})
	// b joins and a's passes, which see the Lease name a, put the target
	// on b; hold the answer for a few of a's passes more.
	if err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return len(b.c.Owned()) > 0, nil
	}); err != nil {
		t.Fatal("b never acquired anything")
	}
	time.Sleep(4 * retryPeriod)
	if a.c.Owns(target) {
		t.Fatal("a owns the target before its acquisition's answer came")
	}
	if n := freedByA.Load(); n > 0 {
		t.Fatalf("a freed the target's Lease %d times while its acquisition was on its way", n)
	}
	close(let)
	settled(t, tr, ns, expected(t, []string{"a", "b"}, clusters), map[string]*instance{"a": a, "b": b}, 30*time.Second)
	if v := tr.check(); len(v) > 0 {
		t.Fatalf("overlaps: %v", v)
	}
}

// leaseWrites wraps a coordinator's client so that every Create and Update
// goes through around(ctx, obj, write), which does the real write by
// calling write (or not).
func leaseWrites(around func(ctx context.Context, obj client.Object, write func() error) error) func(client.WithWatch) client.WithWatch {
	return func(c client.WithWatch) client.WithWatch {
		return interceptor.NewClient(c, interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				return around(ctx, obj, func() error { return c.Create(ctx, obj, opts...) })
			},
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				return around(ctx, obj, func() error { return c.Update(ctx, obj, opts...) })
			},
		})
	}
}
