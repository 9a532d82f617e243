package shard_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/shard"
)

// tally counts calls per cluster.
type tally struct {
	mu sync.Mutex
	n  map[string]int
}

func (t *tally) add(cluster string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == nil {
		t.n = map[string]int{}
	}
	t.n[cluster]++
}

func (t *tally) get(cluster string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n[cluster]
}

// A cluster nobody can run (its Lease cannot be created) is told to
// Options.Unowned once by the Reporter, not on every pass and not by
// another replica; when the Reporter leaves, the next one tells it again:
// the controllers have no other event for such a cluster's sources.
func TestReporterTellsOfAClusterNobodyRuns(t *testing.T) {
	ns := namespace(t, "tell-unowned")
	const nobody = "nobody"
	clusters := append(names(3), nobody)
	refuse := leaseWrites(func(_ context.Context, obj client.Object, write func() error) error {
		if l, ok := obj.(*coordinationv1.Lease); ok && l.Name == shard.ClusterLeaseName(nobody) {
			return errors.New("refused by the test")
		}
		return write()
	})
	tr := newTracker()
	var toldA, toldB tally
	a := startInstanceWith(t, ns, "a", clusters, trackingHandler{"a", tr}, refuse, func(o *shard.Options) { o.Unowned = toldA.add })
	eventuallyTrue(t, func() bool { return toldA.get(nobody) > 0 }, "a (the Reporter) tells of the cluster nobody runs")
	b := startInstanceWith(t, ns, "b", clusters, trackingHandler{"b", tr}, refuse, func(o *shard.Options) { o.Unowned = toldB.add })
	eventuallyTrue(t, b.c.Ready, "b's first pass")
	consistently(t, 4*retryPeriod, func() string {
		if n := toldA.get(nobody); n != 1 {
			return fmt.Sprintf("a told of the cluster %d times, want once", n)
		}
		if n := toldB.get(nobody); n != 0 {
			return fmt.Sprintf("b, not the Reporter, told of the cluster %d times", n)
		}
		return ""
	})
	a.stop(t)
	eventuallyTrue(t, func() bool { return toldB.get(nobody) > 0 }, "b, the Reporter once a left, tells of the cluster")
	if v := tr.check(); len(v) > 0 {
		t.Fatalf("overlaps: %v", v)
	}
}
