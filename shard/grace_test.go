package shard_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/clustershard/clustershard/internal/metrics"
	"github.com/clustershard/clustershard/shard"
)

// The grace tests run with a wider margin than the package's timings (1 s
// of grace instead of 250 ms), so that a loaded machine's stalls stay well
// inside it and every run judges a renewal let go within the grace.
const (
	graceLease  = 6 * time.Second
	graceRenew  = renewDeadline
	graceMargin = graceLease - graceRenew
)

var grace = shard.RenewalGrace(graceLease, graceRenew)

func graceTimings(o *shard.Options) { o.LeaseDuration, o.RenewDeadline = graceLease, graceRenew }

// stopsSince counts the intervals of instance that ended at or after since.
func (t *tracker) stopsSince(instance string, since time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, ivs := range t.closed {
		for _, iv := range ivs {
			if iv.instance == instance && !iv.end.Before(since) {
				n++
			}
		}
	}
	return n
}

// holdRenewals holds i's next renewal (see HoldRenewals) until the returned
// function, or the end of the test, lets it go.
func holdRenewals(t *testing.T, i *instance, beforeSend bool) (release func()) {
	var once sync.Once
	r := i.c.HoldRenewals(beforeSend)
	release = func() { once.Do(r) }
	t.Cleanup(release)
	return release
}

// validityEnds waits until i's membership validity has ended with no
// renewal extending it (one already past the hold may still land first),
// and returns when it ended.
func validityEnds(t *testing.T, i *instance) time.Time {
	t.Helper()
	var ended time.Time
	err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 3*graceRenew, true, func(context.Context) (bool, error) {
		ended = i.c.ValidUntil()
		return time.Now().After(ended), nil
	})
	if err != nil {
		t.Fatalf("%s: membership validity never ended", i.name)
	}
	return ended
}

// matching returns the clusters for which has is true.
func matching(clusters []string, has func(string) bool) []string {
	var out []string
	for _, c := range clusters {
		if has(c) {
			out = append(out, c)
		}
	}
	return out
}

// ownedBy returns the clusters i owns (may write for); heldBy those it holds.
func ownedBy(i *instance, clusters []string) []string { return matching(clusters, i.c.Owns) }

func heldBy(i *instance, clusters []string) []string { return matching(clusters, i.c.Holds) }

// startPair starts replicas a and b over 8 clusters, waits until they
// settle and samples who may write and who holds what from then on.
func startPair(t *testing.T, prefix string) (in map[string]*instance, tr, writes, holds *tracker, mine []string) {
	ns := namespace(t, prefix)
	clusters := names(8)
	tr = newTracker()
	in = map[string]*instance{}
	for _, n := range []string{"a", "b"} {
		in[n] = startInstanceWith(t, ns, n, clusters, trackingHandler{n, tr}, nil, graceTimings)
	}
	settled(t, tr, ns, expected(t, []string{"a", "b"}, clusters), in, 30*time.Second)
	mine = ownedBy(in["a"], clusters)
	if len(mine) == 0 {
		t.Fatal("a owns nothing")
	}
	writes, holds = newTracker(), newTracker()
	sampleOwnership(t, in, clusters, writes)
	sampleHolds(t, in, clusters, holds)
	return in, tr, writes, holds, mine
}

// checkNoOverlap fails the test on any overlap of the trackers.
func checkNoOverlap(t *testing.T, trackers ...*tracker) {
	t.Helper()
	for _, tr := range trackers {
		if v := tr.check(); len(v) > 0 {
			t.Fatalf("overlaps: %v", v)
		}
	}
}

// lateRenewalKept holds a's next renewal (before it is sent, or after its
// answer came) past the end of its validity, lets it go within the grace,
// and checks that ownership stood: writes fenced in between, nothing
// stopped, nothing taken by b, the renewal counted as kept.
func lateRenewalKept(t *testing.T, prefix string, beforeSend bool) {
	in, tr, writes, holds, mine := startPair(t, prefix)
	kept := testutil.ToFloat64(metrics.MembershipLateRenewals.WithLabelValues(metrics.LateRenewalKept))
	voided := testutil.ToFloat64(metrics.MembershipLateRenewals.WithLabelValues(metrics.LateRenewalVoided))
	began := time.Now()

	release := holdRenewals(t, in["a"], beforeSend)
	ended := validityEnds(t, in["a"])
	// Within the grace: every cluster held, none writable.
	eventuallyTrue(t, func() bool {
		return len(heldBy(in["a"], mine)) == len(mine) && len(ownedBy(in["a"], mine)) == 0
	}, "a holding its clusters with its writes fenced")
	release()
	if since := time.Since(ended); since >= grace {
		t.Fatalf("the renewal was let go %v after validity ended, past the %v grace: the machine stalled longer than this test allows", since, grace)
	}
	eventuallyTrue(t, func() bool { return len(ownedBy(in["a"], mine)) == len(mine) }, "a writing again after the late renewal")
	consistently(t, 2*retryPeriod, func() string { // passes that could still stop something
		if n := tr.stopsSince("a", began); n != 0 {
			return fmt.Sprintf("a stopped %d managers across a renewal let go within the grace", n)
		}
		return ""
	})
	if got := heldBy(in["b"], mine); len(got) != 0 {
		t.Fatalf("b took %v of a's clusters", got)
	}
	if d := testutil.ToFloat64(metrics.MembershipLateRenewals.WithLabelValues(metrics.LateRenewalVoided)) - voided; d != 0 {
		t.Fatalf("late renewals voided rose by %v, want 0", d)
	}
	if d := testutil.ToFloat64(metrics.MembershipLateRenewals.WithLabelValues(metrics.LateRenewalKept)) - kept; d < 1 {
		t.Fatalf("late renewals kept rose by %v, want ≥ 1", d)
	}
	checkNoOverlap(t, tr, writes, holds)
}

// A renewal answered late (processed after the end of validity, though
// the API server applied it in time), within the grace: ownership stands.
func TestLateRenewalWithinGraceKeepsOwnership(t *testing.T) {
	lateRenewalKept(t, "grace", false)
}

// A renewal slow on its way, applied by the API server after the end of
// validity but within the grace, while b watches a's membership Lease: b
// takes nothing (it waits a lease duration from the renewal before, and its
// fresh read sees this one), and ownership stands.
func TestRenewalAppliedLateWithinGraceKeepsOwnership(t *testing.T) {
	lateRenewalKept(t, "gracesend", true)
}

// A renewal answered past the grace, though before anyone else could take
// the clusters (its write landed in time): the managers stop when the grace
// ends, the answer starts a new epoch, and the clusters are taken again in
// it, by the same replica; the other takes nothing.
func TestRenewalAnsweredPastGraceStartsANewEpoch(t *testing.T) {
	in, tr, writes, holds, mine := startPair(t, "pastgrace")
	voided := testutil.ToFloat64(metrics.MembershipLateRenewals.WithLabelValues(metrics.LateRenewalVoided))
	began := time.Now()

	release := holdRenewals(t, in["a"], false)
	ended := validityEnds(t, in["a"])
	eventuallyTrue(t, func() bool { return len(heldBy(in["a"], mine)) == 0 }, "a giving its clusters up past the grace")
	if d := time.Since(ended); d < grace {
		t.Fatalf("a gave its clusters up %v after its validity ended, within the %v grace", d, grace)
	}
	release() // past the grace, before anyone else may take the clusters
	if since := time.Since(ended); since >= graceMargin {
		t.Fatalf("the answer was let go %v after validity ended, past the %v margin: the machine stalled longer than this test allows", since, graceMargin)
	}
	eventuallyTrue(t, func() bool {
		return testutil.ToFloat64(metrics.MembershipLateRenewals.WithLabelValues(metrics.LateRenewalVoided)) > voided
	}, "the late renewal counted as voided")
	eventuallyTrue(t, func() bool { return len(ownedBy(in["a"], mine)) == len(mine) }, "a owning its clusters again")
	if n := tr.stopsSince("a", began); n < len(mine) {
		t.Fatalf("a stopped %d managers, want every one of its %d", n, len(mine))
	}
	if got := heldBy(in["b"], mine); len(got) != 0 {
		t.Fatalf("b took %v of a's clusters", got)
	}
	checkNoOverlap(t, tr, writes, holds)
}

// A renewal slow on its way to the API server, held until the other
// replica has taken the clusters: the managers stopped when the grace
// ended, before the other replica could take any, and once the renewal
// goes on the replica re-joins in a new epoch. Had the grace kept ownership
// regardless of the answer, or lasted into the take-over, the samplers
// would overlap.
func TestRenewalSlowOnItsWayVoidsBeforeATakeOver(t *testing.T) {
	in, tr, writes, holds, mine := startPair(t, "slowrenew")
	release := holdRenewals(t, in["a"], true)
	validityEnds(t, in["a"])
	eventuallyTrue(t, func() bool { return len(heldBy(in["a"], mine)) == 0 }, "a giving its clusters up past the grace")
	gaveUp := time.Now()
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, graceLease+5*time.Second, true, func(context.Context) (bool, error) {
		return len(ownedBy(in["b"], mine)) == len(mine), nil
	})
	if err != nil {
		t.Fatal("b did not take a's clusters")
	}
	t.Logf("b took a's clusters %v after a gave them up", time.Since(gaveUp))
	release()
	eventuallyTrue(t, func() bool { return len(heldBy(in["a"], mine)) == len(mine) }, "a re-joining and getting its share back")
	checkNoOverlap(t, tr, writes, holds)
}
