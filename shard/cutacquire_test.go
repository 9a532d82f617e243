package shard_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/shard"
)

// An acquisition whose write has landed at the server when the process is
// told to stop, its answer still on its way, must not leave a Lease that
// names this replica behind a shutdown that returned: its successor would
// wait a lease duration for a cluster nobody runs. Here the answer of the
// target's Lease write never comes before the caller's context ends (a
// SIGTERM cancels the passes' context, the call's timeout ends the rest):
// the shutdown that follows must still end with the Lease released by a
// hand-over, and no cluster runs twice.
func TestAcquisitionCutAtShutdownLeavesNoLeaseNamingUs(t *testing.T) {
	ns := namespace(t, "cut-acquire")
	clusters := names(4)
	target := clusters[0]
	tr := newTracker()
	landed := make(chan struct{})
	var once atomic.Bool
	cut := func(ctx context.Context, obj client.Object, write func() error) error {
		l, ok := obj.(*coordinationv1.Lease)
		if !ok || l.Name != shard.ClusterLeaseName(target) || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != "a" {
			return write()
		}
		if err := write(); err != nil || !once.CompareAndSwap(false, true) {
			return err
		}
		close(landed)
		<-ctx.Done() // landed; the answer is lost with the caller's context
		return ctx.Err()
	}
	a := startInstanceWith(t, ns, "a", clusters, trackingHandler{"a", tr}, leaseWrites(cut), nil)
	select {
	case <-landed:
	case <-time.After(20 * time.Second):
		t.Fatal("a never wrote the target's Lease")
	}
	a.stop(t) // SIGTERM while the answer is on its way
	var l coordinationv1.Lease
	if err := env.Client.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: shard.ClusterLeaseName(target)}, &l); err != nil {
		t.Fatal(err)
	}
	if h := shard.LeaseHolder(&l); h != "" {
		t.Fatalf("after the shutdown the target's Lease still names %q: its successor waits a lease duration", h)
	}
	// The write landed, so the cluster was a's and handed over like the
	// others, not left to the sweep (which frees a Lease only once the
	// cache shows it, maybe after the shutdown returned).
	if r := l.Annotations[v1alpha1.HandoverReasonAnnotation]; r != v1alpha1.TransferShutdown {
		t.Fatalf("the target's Lease was released with reason %q, want %q (handed over at shutdown)", r, v1alpha1.TransferShutdown)
	}
	if v := tr.check(); len(v) > 0 {
		t.Fatalf("overlaps: %v", v)
	}
}
