package shard_test

import (
	"context"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/shard"
)

// TestOrphanedOnlyWithoutSuccessor: a replica shutting down while another is
// on the ring hands over without calling Orphaned; the last one calls it for
// each of its clusters, after their managers stopped and while it still
// holds their Leases, then releases them.
func TestOrphanedOnlyWithoutSuccessor(t *testing.T) {
	ns := namespace(t, "orphan")
	clusters := names(6)
	tr := newTracker()
	var mu sync.Mutex
	calls := map[string][]string{} // instance -> clusters
	var bad []string
	orphaned := func(instance string) func(*shard.Options) {
		return func(o *shard.Options) {
			o.Orphaned = func(ctx context.Context, cluster, why string) error {
				var l coordinationv1.Lease
				err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: shard.ClusterLeaseName(cluster)}, &l)
				mu.Lock()
				defer mu.Unlock()
				calls[instance] = append(calls[instance], cluster)
				if err != nil || shard.HolderName(shard.LeaseHolder(&l)) != instance {
					bad = append(bad, cluster+": Lease not held by "+instance+" when Orphaned ran")
				}
				for _, r := range tr.running()[cluster] {
					bad = append(bad, cluster+": still running on "+r+" when Orphaned ran")
				}
				if why == "" {
					bad = append(bad, cluster+": no reason")
				}
				return nil
			}
		}
	}
	in := map[string]*instance{}
	for _, n := range []string{"replica-0", "replica-1"} {
		in[n] = startInstanceWith(t, ns, n, clusters, trackingHandler{n, tr}, nil, orphaned(n))
	}
	settled(t, tr, ns, expected(t, []string{"replica-0", "replica-1"}, clusters), in, 30*time.Second)

	in["replica-0"].stop(t)
	settled(t, tr, ns, expected(t, []string{"replica-1"}, clusters), in, 10*time.Second)
	mu.Lock()
	if len(calls["replica-0"]) != 0 {
		t.Fatalf("replica-0 had a successor but called Orphaned for %v", calls["replica-0"])
	}
	mu.Unlock()

	in["replica-1"].stop(t)
	mu.Lock()
	defer mu.Unlock()
	if len(calls["replica-1"]) != len(clusters) || len(bad) > 0 {
		t.Fatalf("the last replica called Orphaned for %v (want all %d): %v", calls["replica-1"], len(clusters), bad)
	}
	if h := holders(t, ns); len(h) != 0 {
		t.Fatalf("Leases still held after the last shutdown: %v", h)
	}
}
