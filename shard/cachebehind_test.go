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

// laggingReader lists Leases as a cache that has not yet seen the Lease of
// one cluster (its acquisition by this replica), while lag is set.
type laggingReader struct {
	client.Reader
	lag    *atomic.Bool
	hidden string
}

func (r laggingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := r.Reader.List(ctx, list, opts...); err != nil {
		return err
	}
	if l, ok := list.(*coordinationv1.LeaseList); ok && r.lag.Load() {
		kept := l.Items[:0]
		for _, it := range l.Items {
			if it.Name != r.hidden {
				kept = append(kept, it)
			}
		}
		l.Items = kept
	}
	return nil
}

// A cached Lease that lags behind this replica's own acquisition keeps the
// cluster, without a read, within the window in which nobody else can hold
// the Lease (a lease duration from the write, less a renew deadline of
// margin): losing it on a read that proved nothing (a pass cut short by
// SIGTERM, the API server briefly away) left its Lease neither released
// nor handed over, and the next owner waited a lease duration and more for
// it (seen in the R=6 → 2 drill: 5.6 s without a manager on a graceful
// scale-down); a read per cluster just acquired held every pass behind it.
// Past the window a fresh read decides, and failed reads lose it again: a
// cache stuck behind while another replica takes the Lease must not keep
// two managers running.
func TestFailedConfirmationKeepsTheClusterForAWhile(t *testing.T) {
	ns := namespace(t, "cache-behind")
	clusters := names(3)
	target := clusters[0]
	var lag atomic.Bool
	lag.Store(true)
	var failed atomic.Int32
	tr := newTracker()
	in := map[string]*instance{}
	in["a"] = startInstanceWith(t, ns, "a", clusters, trackingHandler{"a", tr},
		func(c client.WithWatch) client.WithWatch {
			return interceptor.NewClient(c, interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if _, ok := obj.(*coordinationv1.Lease); ok && key.Name == shard.ClusterLeaseName(target) && lag.Load() {
						failed.Add(1)
						return context.Canceled
					}
					return c.Get(ctx, key, obj, opts...)
				},
			})
		},
		func(o *shard.Options) {
			o.Reader = laggingReader{Reader: o.Client, lag: &lag, hidden: shard.ClusterLeaseName(target)}
		})
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return in["a"].c.Owns(target), nil
	}); err != nil {
		t.Fatalf("%s never acquired", target)
	}
	acquired := time.Now()
	window := leaseDuration - renewDeadline
	// Passes (one every half retry period) with the cache behind, within
	// the window: the cluster is kept, and no pass reads its Lease again.
	for time.Since(acquired) < window-retryPeriod/2 {
		if !in["a"].c.Owns(target) {
			t.Fatalf("%s lost %v after its acquisition with the cache behind (%d failed reads)", target, time.Since(acquired), failed.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d confirmation reads within the window, where none is needed", n)
	}
	// Past the window, the fresh read decides, and one that fails does not
	// keep it.
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, window+2*retryPeriod, true, func(context.Context) (bool, error) {
		return !in["a"].c.Owns(target), nil
	}); err != nil {
		t.Fatalf("%s still kept %v after its acquisition on failed reads alone", target, time.Since(acquired))
	}
	if failed.Load() == 0 {
		t.Fatal("lost without a confirmation read: the test does not stage a lagging cache")
	}
	lag.Store(false)
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, leaseDuration+5*time.Second, true, func(context.Context) (bool, error) {
		return in["a"].c.Owns(target), nil
	}); err != nil {
		t.Fatalf("%s not owned again once the cache caught up", target)
	}
	if v := tr.check(); len(v) > 0 {
		t.Fatalf("overlaps: %v", v)
	}
}
