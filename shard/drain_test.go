package shard_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clustershard/clustershard/shard"
)

// work is a WithOwnership callback that runs until released, asking the
// fence before every "write" (every 20 ms) as a remote write does, and
// checking at each allowed one that no other instance runs the cluster and
// that the Lease still names the writer.
type work struct {
	entered, release, done chan struct{}
	writes, refusals       atomic.Int64
	lastAllowed            atomic.Int64 // UnixNano of the last allowed write
	violation              atomic.Value // string
	err                    error
}

func startWork(t *testing.T, in *instance, ns, cluster string, tr *tracker) *work {
	t.Helper()
	w := &work{entered: make(chan struct{}), release: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		w.err = in.c.WithOwnership(cluster, func() error {
			close(w.entered)
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-w.release:
					return nil
				case <-tick.C:
				}
				if _, err := in.c.WriteDeadline(cluster); err != nil {
					w.refusals.Add(1)
					continue
				}
				w.writes.Add(1)
				w.lastAllowed.Store(time.Now().UnixNano())
				for _, r := range tr.running()[cluster] {
					if r != in.name {
						w.violation.Store(r + " ran " + cluster + " while " + in.name + " could write")
					}
				}
				if h := holders(t, ns)[cluster]; h != in.name {
					w.violation.Store(in.name + " could write " + cluster + " whose Lease names " + h)
				}
			}
		})
	}()
	select {
	case <-w.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the callback did not start")
	}
	return w
}

// A planned hand-over (a replica joins) of a cluster with work under way
// lets that work finish first: while it runs, the old owner still holds the
// Lease and its writes pass the fence, no new callback starts, and the new
// owner runs nothing; once it ends, the cluster moves. Work that outlasts
// the stop timeout is fenced at its end (the drain is cut) and the Lease is
// abandoned, never released under it. The overlap tracker is on throughout.
func TestHandOverDrainsWorkUnderWay(t *testing.T) {
	ns := namespace(t, "drain")
	clusters := names(8)
	tr := newTracker()
	in := map[string]*instance{"a": startInstance(t, ns, "a", clusters, trackingHandler{"a", tr})}
	settled(t, tr, ns, expected(t, []string{"a"}, clusters), in, 30*time.Second)
	want := expected(t, []string{"a", "b"}, clusters)
	var moving []string
	for _, c := range clusters {
		if want[c] == "b" {
			moving = append(moving, c)
		}
	}
	if len(moving) < 2 {
		t.Fatalf("the ring moves %v to b; the test needs two", moving)
	}
	short, long := moving[0], moving[1]

	finishes := startWork(t, in["a"], ns, short, tr)
	outlasts := startWork(t, in["a"], ns, long, tr)
	in["b"] = startInstance(t, ns, "b", clusters, trackingHandler{"b", tr})

	// The hand-over began: a no longer owns short for new work, but still
	// holds its Lease and lets the running callback write.
	eventuallyTrue(t, func() bool { return !in["a"].c.Owns(short) }, "a handing "+short+" over")
	if err := in["a"].c.WithOwnership(short, func() error { return nil }); !errors.Is(err, shard.ErrNotOwner) {
		t.Fatalf("a new callback during the drain: %v, want ErrNotOwner", err)
	}
	// 25 more fence checks (at 20 ms each) while the drain lasts.
	before := finishes.writes.Load() + finishes.refusals.Load()
	eventuallyTrue(t, func() bool { return finishes.writes.Load()+finishes.refusals.Load() >= before+25 }, "the work under way going on during the drain")
	if finishes.refusals.Load() > 0 {
		t.Fatalf("the work under way was fenced during the drain: %d writes, %d refused", finishes.writes.Load(), finishes.refusals.Load())
	}
	if h := holders(t, ns)[short]; h != "a" {
		t.Fatalf("%s's Lease names %q during the drain", short, h)
	}
	close(finishes.release)
	<-finishes.done
	if finishes.err != nil {
		t.Fatalf("the drained callback: %v", finishes.err)
	}

	// long outlasts the stop timeout (2 s): fenced then, its Lease abandoned.
	eventuallyTrue(t, func() bool { return outlasts.refusals.Load() > 0 }, "the work on "+long+" fenced once the drain was cut")
	fencedAt := time.Now()
	// 25 more fence checks after the first refusal: none may be allowed.
	refused := outlasts.refusals.Load()
	eventuallyTrue(t, func() bool { return outlasts.refusals.Load() >= refused+25 }, "the fenced work asking the fence again")
	if last := time.Unix(0, outlasts.lastAllowed.Load()); last.After(fencedAt) {
		t.Fatalf("a write of %s was allowed at %v, after the fence closed at %v", long, last, fencedAt)
	}
	close(outlasts.release)
	<-outlasts.done

	settled(t, tr, ns, want, in, 2*leaseDuration+10*time.Second)
	for _, w := range []*work{finishes, outlasts} {
		if v, _ := w.violation.Load().(string); v != "" {
			t.Fatal(v)
		}
	}
	if v := tr.check(); len(v) > 0 {
		t.Fatalf("overlaps: %v", v)
	}
}

// A membership lapse while a cluster is drained turns the hand-over into a
// loss: the work under way is fenced at the renew deadline (no write allowed
// once the Lease may be taken), the Lease is never released under it, and
// the new owner takes the cluster only after it expired. The overlap
// tracker and the callback's own check are on throughout.
func TestLapseDuringDrain(t *testing.T) {
	ns := namespace(t, "drain-lapse")
	clusters := names(8)
	tr := newTracker()
	in := map[string]*instance{"a": startInstance(t, ns, "a", clusters, trackingHandler{"a", tr})}
	settled(t, tr, ns, expected(t, []string{"a"}, clusters), in, 30*time.Second)
	want := expected(t, []string{"a", "b"}, clusters)
	var moving string
	for _, c := range clusters {
		if want[c] == "b" {
			moving = c
			break
		}
	}
	w := startWork(t, in["a"], ns, moving, tr)
	in["b"] = startInstance(t, ns, "b", clusters, trackingHandler{"b", tr})
	eventuallyTrue(t, func() bool { return !in["a"].c.Owns(moving) }, "a draining "+moving)
	resume := in["a"].c.Pause()
	paused := time.Now()
	eventuallyTrue(t, func() bool { return w.refusals.Load() > 0 }, "the drained work fenced by the lapse")
	if last := time.Unix(0, w.lastAllowed.Load()); last.Sub(paused) > renewDeadline {
		t.Fatalf("a write was allowed %v after the last renewal could have been sent, past the renew deadline %v", last.Sub(paused), renewDeadline)
	}
	close(w.release)
	<-w.done
	resume()
	settled(t, tr, ns, want, in, 2*leaseDuration+10*time.Second)
	if v, _ := w.violation.Load().(string); v != "" {
		t.Fatal(v)
	}
	if v := tr.check(); len(v) > 0 {
		t.Fatalf("overlaps: %v", v)
	}
}
