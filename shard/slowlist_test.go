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

// slowListOnce delays the next List after it is armed by d before it is
// sent, and signals when that List began.
func slowListOnce(armed *atomic.Bool, began chan<- struct{}, d time.Duration) func(client.WithWatch) client.WithWatch {
	return func(c client.WithWatch) client.WithWatch {
		return interceptor.NewClient(c, interceptor.Funcs{
			List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				if armed.CompareAndSwap(true, false) {
					close(began)
					time.Sleep(d)
				}
				return c.List(ctx, list, opts...)
			},
		})
	}
}

// An observation is stamped when its read returned, not when the pass
// began: a List that took 1.8 s must not make the other replica's last
// renewal look up to 1.8 s older than it is, or the lease−renew-deadline margin
// shrinks by that much and b may write for a's clusters while a still may.
func TestSlowReadDoesNotShrinkTheMargin(t *testing.T) {
	ns := namespace(t, "slow-list")
	clusters := names(8)
	tr := newTracker()
	writes := newTracker()
	var armed atomic.Bool
	began := make(chan struct{})
	in := map[string]*instance{}
	in["a"] = startInstance(t, ns, "a", clusters, trackingHandler{"a", tr})
	in["b"] = startInstanceWith(t, ns, "b", clusters, trackingHandler{"b", tr}, slowListOnce(&armed, began, 1800*time.Millisecond), nil)
	want := expected(t, []string{"a", "b"}, clusters)
	settled(t, tr, ns, want, in, 30*time.Second)

	stop := sampleOwnership(t, in, clusters, writes)

	// b's next read takes 1.8 s (under the renew deadline that bounds
	// every call of a pass); a's last renewal lands late inside it: a is
	// paused right after a renewal seen at least 1.3 s after that read
	// began (a renews every retry period, 500 ms).
	armed.Store(true)
	select {
	case <-began:
	case <-time.After(10 * time.Second):
		t.Fatal("b made no List")
	}
	listed := time.Now()
	member := func() string {
		var l coordinationv1.Lease
		if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: shard.MemberLeaseName("a")}, &l); err != nil {
			return ""
		}
		return l.ResourceVersion
	}
	var resume func()
	last := member()
	if err := wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, 1800*time.Millisecond, true, func(context.Context) (bool, error) {
		rv := member()
		renewed := rv != last && rv != ""
		last = rv
		if renewed && time.Since(listed) >= 1300*time.Millisecond {
			resume = in["a"].c.Pause()
			return true, nil
		}
		return false, nil
	}); err != nil {
		t.Fatal("a did not renew late inside b's slow read: the test did not stage its fault")
	}
	defer resume()
	waitOwnsAll(t, in["b"], clusters, leaseDuration+8*time.Second, "b, after a paused,")
	stop()
	if v := writes.check(); len(v) > 0 {
		t.Fatalf("write permissions overlapped: %v", v)
	}
}
