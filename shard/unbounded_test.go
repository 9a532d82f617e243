package shard_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/clustershard/clustershard/shard"
)

// A WithOwnership callback that runs for minutes (a Helm operation on a
// slow remote) does not hold a hand-over: after --stop-timeout the
// hand-over goes on (new writes are fenced already), the Lease is
// abandoned, and the new owner takes the cluster a lease duration later.
func TestHandOverDoesNotWaitForALongCallback(t *testing.T) {
	ns := namespace(t, "long-callback")
	clusters := names(8)
	tr := newTracker()
	in := map[string]*instance{}
	in["a"] = startInstance(t, ns, "a", clusters, trackingHandler{"a", tr})
	settled(t, tr, ns, expected(t, []string{"a"}, clusters), in, 30*time.Second)
	want := expected(t, []string{"a", "b"}, clusters)
	var target string
	for _, c := range clusters {
		if want[c] == "b" {
			target = c
			break
		}
	}
	release := make(chan struct{})
	defer close(release)
	entered := make(chan struct{})
	go func() {
		_ = in["a"].c.WithOwnership(target, func() error {
			close(entered)
			<-release // for the whole test: ignores every deadline
			return nil
		})
	}()
	<-entered
	in["b"] = startInstance(t, ns, "b", clusters, trackingHandler{"b", tr})
	moved := time.Now()
	bound := 2*time.Second + leaseDuration + 8*time.Second // stop timeout + lease duration + passes
	if err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, bound, true, func(context.Context) (bool, error) {
		return in["b"].c.Owns(target), nil
	}); err != nil {
		t.Fatalf("%s not taken over within %v: the hand-over waits for the callback", target, bound)
	}
	t.Logf("%s owned by b %v after b joined, while a's callback still runs", target, time.Since(moved).Round(time.Millisecond))
	if in["a"].c.Owns(target) {
		t.Fatal("a still owns the cluster it handed over")
	}
	if v := tr.check(); len(v) > 0 {
		t.Fatalf("overlaps: %v", v)
	}
}

// hangMemberGets makes every fresh Get of a membership Lease hang until its
// context ends, once armed: an API server that accepts the request and
// never answers.
func hangMemberGets(armed *atomic.Bool, hung *atomic.Int32) func(client.WithWatch) client.WithWatch {
	return func(c client.WithWatch) client.WithWatch {
		return interceptor.NewClient(c, interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*coordinationv1.Lease); ok && armed.Load() && strings.HasPrefix(key.Name, shard.MemberLeasePrefix) {
					hung.Add(1)
					<-ctx.Done()
					return ctx.Err()
				}
				return c.Get(ctx, key, obj, opts...)
			},
		})
	}
}

// A call of the ownership pass that never returns does not stop the passes:
// every API call of a pass is bounded, so a replica whose fresh read hangs
// (and then answers again) still takes a crashed replica's clusters.
func TestHungCallDoesNotStopThePasses(t *testing.T) {
	ns := namespace(t, "hung-call")
	clusters := names(8)
	tr := newTracker()
	var armed atomic.Bool
	var hung atomic.Int32
	in := map[string]*instance{}
	in["a"] = startInstance(t, ns, "a", clusters, trackingHandler{"a", tr})
	in["b"] = startInstanceWith(t, ns, "b", clusters, trackingHandler{"b", tr}, hangMemberGets(&armed, &hung), nil)
	settled(t, tr, ns, expected(t, []string{"a", "b"}, clusters), in, 30*time.Second)
	armed.Store(true)
	in["a"].cleanup = in["a"].c.Crash()
	tr.stopAll("a")
	// The first fresh read of a's membership hangs; heal after it did.
	if err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, leaseDuration+10*time.Second, true, func(context.Context) (bool, error) {
		return hung.Load() > 0, nil
	}); err != nil {
		t.Fatal("b never read a's membership Lease: the test did not stage its fault")
	}
	armed.Store(false)
	healed := time.Now()
	bound := renewDeadline + leaseDuration + 8*time.Second
	if err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, bound, true, func(context.Context) (bool, error) {
		return ownsAll(in["b"], clusters), nil
	}); err != nil {
		t.Fatalf("b did not take a's clusters within %v of the hung read healing: the pass is stuck in it", bound)
	}
	t.Logf("b owns every cluster %v after the hung read healed", time.Since(healed).Round(time.Millisecond))
}
