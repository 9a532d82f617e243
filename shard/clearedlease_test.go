package shard_test

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/shard"
)

// A cluster Lease deleted or cleared by hand (not released by its holder)
// while its holder still runs the cluster, here during a rate-limited
// hand-over, is not taken at once by the replica the ring now assigns it
// to: the holder may still run the manager until it notices. It is free
// only after a lease duration unchanged; never two run it at once.
func TestClearedLeaseIsNotTakenAtOnce(t *testing.T) {
	ns := namespace(t, "cleared")
	clusters := names(12)
	tr := newTracker()
	in := map[string]*instance{}
	// One hand-over every 20 s: a's clusters stay with it while b waits.
	// a's managers take a second to stop, as real ones do.
	in["a"] = startInstanceWith(t, ns, "a", clusters, slowStop{trackingHandler{"a", tr}, time.Second}, nil, func(o *shard.Options) { o.MovesPerSecond = 0.05 })
	settled(t, tr, ns, expected(t, []string{"a"}, clusters), in, 30*time.Second)
	in["b"] = startInstance(t, ns, "b", clusters, trackingHandler{"b", tr})
	want := expected(t, []string{"a", "b"}, clusters)
	var victims []string
	if err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 10*time.Second, true, func(ctx2 context.Context) (bool, error) {
		victims = victims[:0]
		h := holders(t, ns)
		for _, c := range clusters {
			if want[c] == "b" && h[c] == "a" {
				victims = append(victims, c)
			}
		}
		return len(victims) >= 2 && in["b"].c.Observed().Members["b"], nil
	}); err != nil {
		t.Fatalf("no cluster of b's still held by a: %v", victims)
	}
	time.Sleep(retryPeriod) // b has seen them held by a
	var deleted, cleared coordinationv1.Lease
	key := client.ObjectKey{Namespace: ns, Name: shard.ClusterLeaseName(victims[0])}
	if err := env.Client.Get(t.Context(), key, &deleted); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(t.Context(), &deleted); err != nil {
		t.Fatal(err)
	}
	key.Name = shard.ClusterLeaseName(victims[1])
	if err := env.Client.Get(t.Context(), key, &cleared); err != nil {
		t.Fatal(err)
	}
	cleared.Spec.HolderIdentity = new(string)
	if err := env.Client.Update(t.Context(), &cleared); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // a window in which b must not start them while a runs them
	if v := tr.check(); len(v) > 0 {
		t.Fatalf("two instances ran a cluster at once: %v", v)
	}
	// And nothing is stuck: b takes both once they have been unchanged for a
	// lease duration (a stopped them when it saw the change).
	if err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, leaseDuration+5*time.Second, true, func(context.Context) (bool, error) {
		h := holders(t, ns)
		return h[victims[0]] == "b" && h[victims[1]] == "b" && in["b"].c.Owns(victims[0]) && in["b"].c.Owns(victims[1]), nil
	}); err != nil {
		t.Fatalf("b did not take %v after a lease duration: holders %v", victims[:2], holders(t, ns))
	}
	if v := tr.check(); len(v) > 0 {
		t.Fatalf("two instances ran a cluster at once: %v", v)
	}
}

// slowStop is a handler whose managers take a while to stop.
type slowStop struct {
	trackingHandler
	delay time.Duration
}

func (h slowStop) Lost(ctx context.Context, cluster string) error {
	time.Sleep(h.delay)
	return h.trackingHandler.Lost(ctx, cluster)
}
