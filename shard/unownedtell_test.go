package shard_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/shard"
)

// tally counts calls per cluster and keeps the time of the first.
type tally struct {
	mu    sync.Mutex
	n     map[string]int
	first map[string]time.Time
}

func (t *tally) add(cluster string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == nil {
		t.n, t.first = map[string]int{}, map[string]time.Time{}
	}
	if t.n[cluster] == 0 {
		t.first[cluster] = time.Now()
	}
	t.n[cluster]++
}

func (t *tally) firstAt(cluster string) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.first[cluster]
}

func (t *tally) get(cluster string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n[cluster]
}

// A cluster nobody can run (its Lease cannot be created) is told to
// Options.Unowned once by the Reporter, once it was unowned for
// UnownedAfter, not on every pass and not by another replica; the clusters
// free only until their acquisition are not told; when the Reporter
// leaves, the next one tells it again: the controllers have no other event
// for such a cluster's sources.
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
	const after = 4 * retryPeriod
	var toldA, toldB tally
	a := startInstanceWith(t, ns, "a", clusters, trackingHandler{"a", tr}, refuse, func(o *shard.Options) { o.Unowned, o.UnownedAfter = toldA.add, after })
	eventuallyTrue(t, func() bool { return toldA.get(nobody) > 0 }, "a (the Reporter) tells of the cluster nobody runs")
	if since, _, ok := a.c.UnownedCluster(nobody); !ok || toldA.firstAt(nobody).Sub(since) < after {
		t.Fatalf("a told of the cluster at %v, unowned since %v (%v): want at least %v after", toldA.firstAt(nobody), since, ok, after)
	}
	for _, n := range clusters[:3] {
		if k := toldA.get(n); k != 0 {
			t.Errorf("cluster %s, free only until its acquisition, was told %d times", n, k)
		}
	}
	b := startInstanceWith(t, ns, "b", clusters, trackingHandler{"b", tr}, refuse, func(o *shard.Options) { o.Unowned, o.UnownedAfter = toldB.add, after })
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
