package shard_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/shard"
)

// frozenLeases lists the cluster Leases as they were when frozen (a cache
// that has not seen this replica's own releases), and the membership
// Leases as they are.
type frozenLeases struct {
	client.Reader
	frozen atomic.Pointer[coordinationv1.LeaseList]
}

func (r *frozenLeases) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := r.Reader.List(ctx, list, opts...); err != nil {
		return err
	}
	l, ok := list.(*coordinationv1.LeaseList)
	snap := r.frozen.Load()
	if !ok || snap == nil {
		return nil
	}
	var kept []coordinationv1.Lease
	for _, it := range l.Items {
		if it.Labels[v1alpha1.LeaseRoleLabel] != "cluster" {
			kept = append(kept, it)
		}
	}
	for _, it := range snap.Items {
		kept = append(kept, *it.DeepCopy())
	}
	l.Items = kept
	return nil
}

// A replica whose cache still lists the Leases it has just released (held
// by it, at the version its release replaced) leaves them alone: its sweep
// does not take them for Leases left behind and write them again (each such
// write is a conflict, one round trip per cluster, and every acquisition of
// the pass waits behind it). The hand-over itself is unchanged: the
// successor acquires what was released, and no cluster runs twice.
func TestSweepLeavesOurOwnReleasesAlone(t *testing.T) {
	ns := namespace(t, "own-releases")
	clusters := names(6)
	tr := newTracker()
	var conflicts atomic.Int32
	fr := &frozenLeases{}
	a := startInstanceWith(t, ns, "a", clusters, trackingHandler{"a", tr},
		func(c client.WithWatch) client.WithWatch {
			return interceptor.NewClient(c, interceptor.Funcs{
				Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
					err := c.Update(ctx, obj, opts...)
					if _, ok := obj.(*coordinationv1.Lease); ok && apierrors.IsConflict(err) {
						conflicts.Add(1)
					}
					return err
				},
			})
		},
		func(o *shard.Options) {
			fr.Reader = o.Client
			o.Reader = fr
		})
	if err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return len(a.c.Owned()) == len(clusters), nil
	}); err != nil {
		t.Fatalf("a owns %v, want all %d", a.c.Owned(), len(clusters))
	}
	var snap coordinationv1.LeaseList
	if err := env.Client.List(t.Context(), &snap, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LeaseRoleLabel: "cluster"}); err != nil {
		t.Fatal(err)
	}
	fr.frozen.Store(&snap)
	b := startInstance(t, ns, "b", clusters, trackingHandler{"b", tr})
	if err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return len(b.c.Owned()) > 0 && len(a.c.Owned())+len(b.c.Owned()) == len(clusters), nil
	}); err != nil {
		t.Fatalf("no hand-over: a owns %v, b %v", a.c.Owned(), b.c.Owned())
	}
	// Passes of a with its cache still listing the released Leases as its own.
	time.Sleep(6 * retryPeriod)
	if n := conflicts.Load(); n > 0 {
		t.Fatalf("a wrote %d times over Leases it had released itself (conflicts)", n)
	}
	if got := holders(t, ns); len(got) != len(clusters) {
		t.Fatalf("holders %v", got)
	}
	fr.frozen.Store(nil)
	time.Sleep(2 * retryPeriod)
	if v := tr.check(); len(v) > 0 {
		t.Fatalf("overlaps: %v", v)
	}
	t.Logf("a owns %v, b %v", a.c.Owned(), b.c.Owned())
}
