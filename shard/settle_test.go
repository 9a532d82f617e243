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

// countingHandler counts the Acquired calls per cluster, on top of the tracker.
type countingHandler struct {
	trackingHandler
	mu     *sync.Mutex
	starts map[string]int
}

func (h countingHandler) Acquired(ctx context.Context, cluster string) {
	h.mu.Lock()
	h.starts[cluster]++
	h.mu.Unlock()
	h.trackingHandler.Acquired(ctx, cluster)
}

// Replicas that start together, each once the one before has joined, take no cluster before the
// ring settles: every cluster is started exactly once, on the replica of the
// final ring, whether the settle ends by the expected replica count or by
// the ring staying unchanged for the settle window. A replica joining the
// running fleet is not at a cold start and takes its share at once.
func TestColdStartSettles(t *testing.T) {
	for _, tc := range []struct {
		name     string
		expected int
	}{{"ExpectedReplicas", 3}, {"SettleWindow", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			ns := namespace(t, "settle")
			clusters := names(30)
			tr := newTracker()
			var mu sync.Mutex
			starts := map[string]int{}
			in := map[string]*instance{}
			began := time.Now()
			for _, id := range []string{"a", "b", "c"} {
				in[id] = startInstanceWith(t, ns, id, clusters, countingHandler{trackingHandler{id, tr}, &mu, starts}, nil, func(o *shard.Options) {
					o.ExpectedReplicas = tc.expected
				})
				// The next starts once this one is a member: replicas
				// join one after another, as StatefulSet pods come up.
				eventuallyTrue(t, func() bool { return memberHeld(t, ns, id) }, id+" a member")
			}
			settled(t, tr, ns, expected(t, []string{"a", "b", "c"}, clusters), in, 30*time.Second)
			t.Logf("settled %v after the first start", time.Since(began).Round(time.Millisecond))
			mu.Lock()
			for _, c := range clusters {
				if starts[c] != 1 {
					t.Errorf("%s started %d times during the cold start, want once", c, starts[c])
				}
			}
			mu.Unlock()

			// A fourth replica joins the running fleet: no settle wait.
			joined := time.Now()
			in["d"] = startInstanceWith(t, ns, "d", clusters, countingHandler{trackingHandler{"d", tr}, &mu, starts}, nil, func(o *shard.Options) {
				o.ExpectedReplicas = tc.expected
				o.SettleWindow, o.SettleTimeout = time.Minute, time.Minute
			})
			settled(t, tr, ns, expected(t, []string{"a", "b", "c", "d"}, clusters), in, 20*time.Second)
			t.Logf("a joining replica took its share %v after it started", time.Since(joined).Round(time.Millisecond))
		})
	}
}

// memberHeld reports whether replica id holds its membership Lease in ns.
func memberHeld(t *testing.T, ns, id string) bool {
	t.Helper()
	var l coordinationv1.Lease
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: shard.MemberLeaseName(id)}, &l); err != nil {
		return false
	}
	return l.Spec.HolderIdentity != nil && shard.HolderName(*l.Spec.HolderIdentity) == id
}
