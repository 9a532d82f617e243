package shard_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/metrics"
	"github.com/clustershard/clustershard/shard"
)

// slowSpawn is a Handler whose "manager" takes delay to start, and which
// counts the clusters acquired whose manager does not run yet (the
// instance's runningHandler reports it running once Acquired returns).
type slowSpawn struct {
	trackingHandler
	delay time.Duration

	mu           sync.Mutex
	spawning     int
	mostSpawning int
}

func (h *slowSpawn) Acquired(ctx context.Context, cluster string) {
	h.mu.Lock()
	h.spawning++
	h.mostSpawning = max(h.mostSpawning, h.spawning)
	h.mu.Unlock()
	time.Sleep(h.delay)
	h.trackingHandler.Acquired(ctx, cluster)
	h.mu.Lock()
	h.spawning--
	h.mu.Unlock()
}

// most returns the most clusters that were acquired at once without a
// running manager since the last call, and starts counting again.
func (h *slowSpawn) most() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.mostSpawning
	h.mostSpawning = h.spawning
	return m
}

// withWindow sets the hand-over window of an instance.
func withWindow(n int, timeout time.Duration) func(*shard.Options) {
	return func(o *shard.Options) { o.HandoverWindow, o.HandoverWindowTimeout = n, timeout }
}

// A replica hands clusters over to a successor at most HandoverWindow at a
// time whose new manager is not running yet, on a scale-out and on a
// graceful shutdown: the successor never has more than the window spawning
// at once, the clusters not yet let go keep running on the old owner, and
// no two instances ever run a cluster at once. Without the window (the
// control) the successor has every moved cluster spawning at once.
func TestHandOverWindowPaces(t *testing.T) {
	for _, tc := range []struct {
		name   string
		window int
	}{{"window", 2}, {"control", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			ns := namespace(t, "window-"+tc.name)
			clusters := names(16)
			tr := newTracker()
			in := map[string]*instance{"a": startInstanceWith(t, ns, "a", clusters, trackingHandler{"a", tr}, nil, withWindow(tc.window, time.Minute))}
			settled(t, tr, ns, expected(t, []string{"a"}, clusters), in, 30*time.Second)
			moving := 0
			want := expected(t, []string{"a", "b"}, clusters)
			for _, c := range clusters {
				if want[c] == "b" {
					moving++
				}
			}
			b := &slowSpawn{trackingHandler: trackingHandler{"b", tr}, delay: 400 * time.Millisecond}
			in["b"] = startInstanceWith(t, ns, "b", clusters, b, nil, withWindow(tc.window, time.Minute))
			settled(t, tr, ns, want, in, 60*time.Second)
			scaleOut := b.most()

			in["a"].stop(t)
			settled(t, tr, ns, expected(t, []string{"b"}, clusters), map[string]*instance{"b": in["b"]}, 60*time.Second)
			shutdown := b.most()
			t.Logf("%d clusters moved on scale-out, at most %d spawning at once; %d on shutdown, at most %d", moving, scaleOut, len(clusters)-moving, shutdown)
			if tc.window > 0 && (scaleOut > tc.window || shutdown > tc.window) {
				t.Errorf("the successor had %d (scale-out) and %d (shutdown) clusters spawning at once, above the window of %d", scaleOut, shutdown, tc.window)
			}
			if tc.window < 0 && scaleOut <= 2 && shutdown <= 2 {
				t.Errorf("control: without a window the successor should spawn more than 2 at once, had %d and %d: the test does not tell pacing apart", scaleOut, shutdown)
			}
			if v := tr.check(); len(v) > 0 {
				t.Fatalf("overlaps: %v", v)
			}
		})
	}
}

// failMarks makes every patch of a cluster Lease fail: the successor's
// "manager running" marks never land (an older version, or a failed write).
func failMarks(c client.WithWatch) client.WithWatch {
	return interceptor.NewClient(c, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if patch.Type() == types.JSONPatchType {
				return errors.New("injected: the manager-running mark failed")
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
}

// A successor that never marks its managers running slows the hand-over by
// the window's timeout per place, but does not stall it: every cluster
// moves, each wait is counted, and a graceful shutdown still ends in time.
func TestHandOverWindowTimesOut(t *testing.T) {
	ns := namespace(t, "window-timeout")
	clusters := names(10)
	tr := newTracker()
	in := map[string]*instance{"a": startInstanceWith(t, ns, "a", clusters, trackingHandler{"a", tr}, nil, withWindow(1, 500*time.Millisecond))}
	settled(t, tr, ns, expected(t, []string{"a"}, clusters), in, 30*time.Second)
	before := testutil.ToFloat64(metrics.HandoverWindowTimeouts)
	in["b"] = startInstanceWith(t, ns, "b", clusters, trackingHandler{"b", tr}, failMarks, nil)
	settled(t, tr, ns, expected(t, []string{"a", "b"}, clusters), in, 60*time.Second)
	if got := testutil.ToFloat64(metrics.HandoverWindowTimeouts) - before; got < 1 {
		t.Errorf("window timeouts counted: %v, want at least 1", got)
	}
	in["a"].stop(t)
	settled(t, tr, ns, expected(t, []string{"b"}, clusters), map[string]*instance{"b": in["b"]}, 60*time.Second)
}

// Replicas that hand clusters over to one successor at once (a scale-out:
// every old owner gives the new replica its share) divide its window
// between them: the successor has about the window spawning, not the window
// per old owner. One more is allowed: an old owner that handed over its
// last cluster for the successor stops counting as one, so the other's
// share grows while that last cluster may still be spawning.
func TestHandOverWindowIsShared(t *testing.T) {
	ns := namespace(t, "window-shared")
	clusters := names(24)
	tr := newTracker()
	const window = 2
	in := map[string]*instance{}
	for _, n := range []string{"a", "b"} {
		in[n] = startInstanceWith(t, ns, n, clusters, trackingHandler{n, tr}, nil, withWindow(window, time.Minute))
	}
	settled(t, tr, ns, expected(t, []string{"a", "b"}, clusters), in, 30*time.Second)
	c := &slowSpawn{trackingHandler: trackingHandler{"c", tr}, delay: 400 * time.Millisecond}
	in["c"] = startInstanceWith(t, ns, "c", clusters, c, nil, withWindow(window, time.Minute))
	settled(t, tr, ns, expected(t, []string{"a", "b", "c"}, clusters), in, 60*time.Second)
	if most := c.most(); most > window+1 {
		t.Errorf("the new replica had %d clusters spawning at once from two old owners, above the window of %d (+1)", most, window)
	} else {
		t.Logf("at most %d spawning at once", most)
	}
	if v := tr.check(); len(v) > 0 {
		t.Fatalf("overlaps: %v", v)
	}
}

// staleLeases is a Reader whose cluster Leases carry a resourceVersion long
// gone, as a cache that is behind would: a write on it must conflict.
type staleLeases struct{ client.Reader }

func (r staleLeases) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := r.Reader.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if l, ok := obj.(*coordinationv1.Lease); ok && l.Labels[v1alpha1.LeaseRoleLabel] == "cluster" {
		l.ResourceVersion = "1"
	}
	return nil
}

// A hand-over releases the Lease from the cached copy first; a cache behind
// the server makes that write conflict, and the release is made again from
// a fresh read at once: the clusters move by release (not by waiting for an
// abandoned Lease), and never two instances run one.
func TestReleaseFromStaleCache(t *testing.T) {
	ns := namespace(t, "stale-release")
	clusters := names(8)
	tr := newTracker()
	stale := func(o *shard.Options) { o.Reader = staleLeases{o.Client} }
	in := map[string]*instance{"a": startInstanceWith(t, ns, "a", clusters, trackingHandler{"a", tr}, nil, stale)}
	settled(t, tr, ns, expected(t, []string{"a"}, clusters), in, 30*time.Second)
	released := testutil.ToFloat64(metrics.LeaseTransitions.WithLabelValues(metrics.LeaseReleased))
	abandoned := testutil.ToFloat64(metrics.LeaseTransitions.WithLabelValues(metrics.LeaseAbandoned))
	in["b"] = startInstance(t, ns, "b", clusters, trackingHandler{"b", tr})
	want := expected(t, []string{"a", "b"}, clusters)
	settled(t, tr, ns, want, in, 30*time.Second)
	moved := 0
	for _, o := range want {
		if o == "b" {
			moved++
		}
	}
	if got := testutil.ToFloat64(metrics.LeaseTransitions.WithLabelValues(metrics.LeaseReleased)) - released; got < float64(moved) {
		t.Errorf("%v Leases released for %d moved clusters", got, moved)
	}
	if got := testutil.ToFloat64(metrics.LeaseTransitions.WithLabelValues(metrics.LeaseAbandoned)) - abandoned; got != 0 {
		t.Errorf("%v Leases abandoned", got)
	}
}
