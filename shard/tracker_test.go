package shard_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"
)

// tracker is the overlap detector: it records, on the one monotonic clock of
// the test process, every interval during which an instance runs a (fake)
// remote manager or may write for a cluster, and finds any two instances'
// intervals of one cluster that overlap.
type tracker struct {
	mu         sync.Mutex
	open       map[string]map[string]time.Time // cluster -> instance -> start
	closed     map[string][]interval
	violations []string
}

type interval struct {
	instance   string
	start, end time.Time
}

func newTracker() *tracker {
	return &tracker{open: map[string]map[string]time.Time{}, closed: map[string][]interval{}}
}

func (t *tracker) start(instance, cluster string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.open[cluster] == nil {
		t.open[cluster] = map[string]time.Time{}
	}
	for other := range t.open[cluster] {
		if other != instance {
			t.violations = append(t.violations, fmt.Sprintf("%s started %s while %s still ran it", instance, cluster, other))
		}
	}
	if _, ok := t.open[cluster][instance]; !ok {
		t.open[cluster][instance] = time.Now()
	}
}

func (t *tracker) stop(instance, cluster string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.open[cluster][instance]; ok {
		t.closed[cluster] = append(t.closed[cluster], interval{instance, s, time.Now()})
		delete(t.open[cluster], instance)
	}
}

// stopAll closes every interval of instance (its process died).
func (t *tracker) stopAll(instance string) {
	t.mu.Lock()
	var clusters []string
	for c, m := range t.open {
		if _, ok := m[instance]; ok {
			clusters = append(clusters, c)
		}
	}
	t.mu.Unlock()
	for _, c := range clusters {
		t.stop(instance, c)
	}
}

// running returns cluster -> instances currently running it.
func (t *tracker) running() map[string][]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string][]string{}
	for c, m := range t.open {
		for i := range m {
			out[c] = append(out[c], i)
		}
	}
	return out
}

// lastStop and firstStartAfter give hand-over gaps.
func (t *tracker) gap(cluster, from, to string) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var stopped time.Time
	for _, iv := range t.closed[cluster] {
		if iv.instance == from && iv.end.After(stopped) {
			stopped = iv.end
		}
	}
	started, ok := t.open[cluster][to]
	if !ok || stopped.IsZero() {
		return 0, false
	}
	return started.Sub(stopped), true
}

// check returns every overlap of two instances' intervals of one cluster.
func (t *tracker) check() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := append([]string(nil), t.violations...)
	now := time.Now()
	for c := range t.closed {
		ivs := append([]interval(nil), t.closed[c]...)
		for i, s := range t.open[c] {
			ivs = append(ivs, interval{i, s, now})
		}
		sort.Slice(ivs, func(a, b int) bool { return ivs[a].start.Before(ivs[b].start) })
		for a := range ivs {
			for b := a + 1; b < len(ivs) && ivs[b].start.Before(ivs[a].end); b++ {
				if ivs[a].instance != ivs[b].instance {
					out = append(out, fmt.Sprintf("%s: %s [%v] and %s [%v] overlap", c, ivs[a].instance, ivs[a].end.Sub(ivs[a].start), ivs[b].instance, ivs[b].end.Sub(ivs[b].start)))
				}
			}
		}
	}
	return out
}

// trackingHandler is a shard.Handler whose "remote manager" is an interval
// in the tracker.
type trackingHandler struct {
	instance string
	t        *tracker
}

func (h trackingHandler) Acquired(_ context.Context, cluster string) { h.t.start(h.instance, cluster) }

func (h trackingHandler) Lost(_ context.Context, cluster string) error {
	h.t.stop(h.instance, cluster)
	return nil
}

// The detector is not vacuous: overlapping intervals of two instances fail it.
func TestTrackerCatchesOverlap(t *testing.T) {
	tr := newTracker()
	tr.start("a", "x")
	tr.start("b", "x") // b starts while a still runs x
	tr.stop("a", "x")
	tr.stop("b", "x")
	if v := tr.check(); len(v) < 2 {
		t.Fatalf("overlap not reported: %v", v)
	}
	ok := newTracker()
	ok.start("a", "x")
	ok.stop("a", "x")
	ok.start("b", "x")
	if v := ok.check(); len(v) != 0 {
		t.Fatalf("sequential ownership reported as overlap: %v", v)
	}
}

// stoppedAfter reports whether instance stopped cluster after at.
func (t *tracker) stoppedAfter(instance, cluster string, at time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, iv := range t.closed[cluster] {
		if iv.instance == instance && iv.end.After(at) {
			return true
		}
	}
	return false
}
