package shard_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
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
// began: a List that took 2 s must not make the other replica's last
// renewal look 2 s older than it is, or the lease−renew-deadline margin
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
	in["b"] = startInstanceWith(t, ns, "b", clusters, trackingHandler{"b", tr}, slowListOnce(&armed, began, 2*time.Second), nil)
	want := expected(t, []string{"a", "b"}, clusters)
	settled(t, tr, ns, want, in, 30*time.Second)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for ctx.Err() == nil {
			for n, i := range in {
				for _, c := range clusters {
					if i.c.Owns(c) {
						writes.start(n, c)
					} else {
						writes.stop(n, c)
					}
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()

	// b's next read takes 2 s; a's last renewal lands inside it: a is
	// paused 1.9 s after that read began (a renews every retry period).
	armed.Store(true)
	select {
	case <-began:
	case <-time.After(10 * time.Second):
		t.Fatal("b made no List")
	}
	time.Sleep(1900 * time.Millisecond)
	resume := in["a"].c.Pause()
	defer resume()
	if err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, leaseDuration+8*time.Second, true, func(context.Context) (bool, error) {
		for _, c := range clusters {
			if !in["b"].c.Owns(c) {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Fatal("b did not take over the paused replica's clusters")
	}
	cancel()
	<-sampled
	if v := writes.check(); len(v) > 0 {
		t.Fatalf("write permissions overlapped: %v", v)
	}
}
