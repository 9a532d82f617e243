package drill

import (
	"testing"
	"time"

	"github.com/clustershard/clustershard/shard"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func renewals(replica string, from, to, every int) []shard.JournalEntry {
	var out []shard.JournalEntry
	for ms := from; ms <= to; ms += every {
		out = append(out, shard.JournalEntry{Time: at(ms), Replica: replica, Event: shard.JournalRenewed})
	}
	return out
}

func ev(replica, event, cluster string, ms int) shard.JournalEntry {
	return shard.JournalEntry{Time: at(ms), Replica: replica, Event: event, Cluster: cluster}
}

// A graceful hand-over (stop, then the other acquires) is no overlap; a stop
// that finishes after the other already acquired is, even when the hand-over
// began ("releasing") before: writes in flight end only at "stopped".
func TestOverlapsCatchDoubleOwnership(t *testing.T) {
	owned := func(stopAt int) []shard.JournalEntry {
		return append(renewals("a", 0, 10000, 500), ev("a", shard.JournalOwned, "x", 100),
			ev("a", shard.JournalReleasing, "x", 4900), ev("a", shard.JournalStopped, "x", stopAt))
	}
	b := append(renewals("b", 0, 10000, 500), ev("b", shard.JournalOwned, "x", 5100))
	now := at(10000)
	ivs := append(Intervals(owned(5000), 2*time.Second, 500*time.Millisecond, time.Time{}, now), Intervals(b, 2*time.Second, 500*time.Millisecond, time.Time{}, now)...)
	if o := Overlaps(ivs); len(o) != 0 {
		t.Fatalf("graceful hand-over reported as overlap: %v", o)
	}
	ivs = append(Intervals(owned(6000), 2*time.Second, 500*time.Millisecond, time.Time{}, now), Intervals(b, 2*time.Second, 500*time.Millisecond, time.Time{}, now)...)
	o := Overlaps(ivs)
	if len(o) != 1 || o[0].For != 900*time.Millisecond {
		t.Fatalf("overlaps = %v, want one of 900ms", o)
	}
	// A hand-over that began but never finished stopping lasts until now.
	unfinished := append(renewals("a", 0, 10000, 500), ev("a", shard.JournalOwned, "x", 100), ev("a", shard.JournalReleasing, "x", 4900))
	if o := Overlaps(append(Intervals(unfinished, 2*time.Second, 500*time.Millisecond, time.Time{}, now), Intervals(b, 2*time.Second, 500*time.Millisecond, time.Time{}, now)...)); len(o) != 1 {
		t.Fatalf("unfinished stop: overlaps = %v, want one", o)
	}
}

// Authority ends when membership lapses (a paused replica that stopped
// renewing), or at death, whichever comes first, even with no journal entry.
func TestIntervalsEndAtLapseOrDeath(t *testing.T) {
	paused := append(renewals("a", 0, 3000, 500), ev("a", shard.JournalOwned, "x", 100), ev("a", shard.JournalLost, "x", 9000), ev("a", shard.JournalStopped, "x", 9100))
	iv := Intervals(paused, 2*time.Second, 500*time.Millisecond, time.Time{}, at(10000))
	if len(iv) != 1 || !iv[0].End.Equal(at(5000)) {
		t.Fatalf("paused replica's interval = %+v, want end at the last renewal + 2s", iv)
	}
	killed := append(renewals("a", 0, 3000, 500), ev("a", shard.JournalOwned, "x", 100))
	iv = Intervals(killed, 2*time.Second, 500*time.Millisecond, at(3200), at(10000))
	if len(iv) != 1 || !iv[0].End.Equal(at(3200)) {
		t.Fatalf("killed replica's interval = %+v, want end at death", iv)
	}
	taker := append(renewals("b", 0, 10000, 500), ev("b", shard.JournalOwned, "x", 5200))
	all := append(Intervals(paused, 2*time.Second, 500*time.Millisecond, time.Time{}, at(10000)), Intervals(taker, 2*time.Second, 500*time.Millisecond, time.Time{}, at(10000))...)
	if o := Overlaps(all); len(o) != 0 {
		t.Fatalf("take-over after the paused replica's lapse reported: %v", o)
	}
}

// The remote side: a write during another replica's authority, or outside
// the writer's own, is reported; writes inside the writer's authority are not.
func TestStrayWritesCatchWritesOutOfAuthority(t *testing.T) {
	ivs := []Interval{
		{Replica: "a", Cluster: "x", Start: at(0), End: at(5000)},
		{Replica: "b", Cluster: "x", Start: at(5100), End: at(9000)},
	}
	w := func(replica string, from, to int) Write {
		return Write{Replica: replica, Cluster: "x", Verb: "update", Received: at(from), Completed: at(to)}
	}
	if s := StrayWrites([]Write{w("a", 100, 120), w("a", 4900, 4990), w("b", 5200, 5300)}, ivs); len(s) != 0 {
		t.Fatalf("writes within authority reported: %v", s)
	}
	// a's write completes after b took over: overlap.
	if s := StrayWrites([]Write{w("a", 4990, 5150)}, ivs); len(s) != 1 {
		t.Fatalf("write overlapping the next owner: %v", s)
	}
	// a writes after its authority ended (and during b's): two findings.
	if s := StrayWrites([]Write{w("a", 6000, 6010)}, ivs); len(s) != 2 {
		t.Fatalf("write after authority: %v", s)
	}
	// b writes between the two authorities.
	if s := StrayWrites([]Write{w("b", 5010, 5020)}, ivs); len(s) != 1 {
		t.Fatalf("write with no authority: %v", s)
	}
}

// Writes that carry an epoch are judged by the remote's order of epochs: a
// late write of epoch 1 received after a's authority ended but before b
// raised epoch 2 stored nothing b had written yet, and passes; one still
// running when b raised the epoch is reported; refused writes and dry runs
// stored nothing.
func TestStrayWritesJudgeEpochsByTheRemoteOrder(t *testing.T) {
	ivs := []Interval{
		{Replica: "a", Cluster: "x", Start: at(0), End: at(5000)},
		{Replica: "b", Cluster: "x", Start: at(5100), End: at(9000)},
	}
	w := func(replica string, epoch int64, from, to int) Write {
		return Write{Replica: replica, Cluster: "x", Verb: "patch", Object: "examples ns/o", Epoch: epoch, Received: at(from), Completed: at(to), Code: 200}
	}
	raise := Write{Replica: "b", Cluster: "x", Verb: "update", Object: "configmaps clustershard-system/clustershard-fence", Epoch: 2, Received: at(5300), Completed: at(5310), Code: 200}
	late := w("a", 1, 5200, 5210)
	if s := StrayWrites([]Write{w("a", 1, 100, 120), late, raise, w("b", 2, 5400, 5410)}, ivs); len(s) != 0 {
		t.Fatalf("a late write admitted before the next epoch began was reported: %v", s)
	}
	if s := StrayWrites([]Write{raise, w("a", 1, 5305, 5320)}, ivs); len(s) != 1 {
		t.Fatalf("a write of epoch 1 still being written after epoch 2 began: %v", s)
	}
	refused := w("a", 1, 6000, 6001)
	refused.Fenced = true
	dry := w("a", 1, 6000, 6001)
	dry.DryRun = true
	if s := StrayWrites([]Write{raise, refused, dry}, ivs); len(s) != 0 {
		t.Fatalf("writes that stored nothing were reported: %v", s)
	}
	// Once the server refused a dry run of epoch 1 (b's check), a write of
	// epoch 1 that did not succeed was refused by admission; one that
	// succeeded is reported, and so is a failed one received before the check.
	check := Write{Replica: "b", Cluster: "x", Verb: "update", Object: raise.Object, Epoch: 1, DryRun: true, Fenced: true, Received: at(5311), Completed: at(5312), Code: 403}
	cancelled := w("a", 1, 5400, 5401)
	cancelled.Code = 504
	if s := StrayWrites([]Write{raise, check, cancelled}, ivs); len(s) != 0 {
		t.Fatalf("a write refused by admission after the check was reported: %v", s)
	}
	if s := StrayWrites([]Write{raise, check, w("a", 1, 5400, 5401)}, ivs); len(s) != 1 {
		t.Fatalf("a write of epoch 1 admitted after the check: %v", s)
	}
	// Refused by admission under epoch 2, it stays refused when a later
	// raise (a's own, taking the cluster back) comes while its answer is
	// still on its way.
	back := Write{Replica: "a", Cluster: "x", Verb: "patch", Object: raise.Object, Epoch: 3, Received: at(5390), Completed: at(5395), Code: 200}
	if s := StrayWrites([]Write{raise, check, back, cancelled}, ivs); len(s) != 0 {
		t.Fatalf("a write refused by admission under epoch 2 was reported against epoch 3: %v", s)
	}
	early := w("a", 1, 5305, 5306)
	early.Code = 504
	if s := StrayWrites([]Write{raise, check, early}, ivs); len(s) != 1 {
		t.Fatalf("a write in doubt before the check: %v", s)
	}
	// Without an epoch the Leases judge, as before.
	if s := StrayWrites([]Write{w("a", 0, 5200, 5210)}, ivs); len(s) != 2 {
		t.Fatalf("an unfenced late write: %v", s)
	}
}

// A renewal answered late within the grace ("resumed") keeps authority but
// cuts a hole from the end of the validity before it to its answer: a write
// there is out of authority, one after it is in. A renewal sent past the
// grace, or answered past it, ends authority as a lapse does.
func TestIntervalsModelTheRenewalGrace(t *testing.T) {
	const rd, grace = 2 * time.Second, 500 * time.Millisecond
	// Renewals every 500 ms to 3000, then one sent at 4800 (validity ended
	// at 5000) answered at 5300 (within the grace), then every 500 ms.
	late := append(renewals("a", 0, 3000, 500), ev("a", shard.JournalRenewed, "", 4800), ev("a", shard.JournalResumed, "", 5300))
	late = append(late, renewals("a", 5500, 10000, 500)...)
	late = append(late, ev("a", shard.JournalOwned, "x", 100))
	iv := Intervals(late, rd, grace, time.Time{}, at(10000))
	if len(iv) != 2 || !iv[0].End.Equal(at(5000)) || !iv[1].Start.Equal(at(5300)) || !iv[1].End.Equal(at(10000)) {
		t.Fatalf("intervals across a late renewal within the grace = %+v, want [100,5000) and [5300,10000)", iv)
	}
	w := func(ms int) Write {
		return Write{Replica: "a", Cluster: "x", Verb: "update", Received: at(ms), Completed: at(ms + 10), Code: 200}
	}
	if s := StrayWrites([]Write{w(4000), w(5200), w(6000)}, iv); len(s) != 1 {
		t.Fatalf("stray writes = %v, want the one at 5200 (fenced: before the answer)", s)
	}
	// Sent within the grace, no answer journalled before the next renewal:
	// authority ended at 5000 and does not come back.
	unanswered := append(renewals("a", 0, 3000, 500), ev("a", shard.JournalRenewed, "", 5200), ev("a", shard.JournalOwned, "x", 100))
	unanswered = append(unanswered, renewals("a", 5600, 10000, 500)...)
	if iv := Intervals(unanswered, rd, grace, time.Time{}, at(10000)); len(iv) != 1 || !iv[0].End.Equal(at(5000)) {
		t.Fatalf("interval with a renewal never answered = %+v, want end at 5000", iv)
	}
	// Resumed past the grace (a product bug): authority ended at 5000.
	tooLate := append(renewals("a", 0, 3000, 500), ev("a", shard.JournalRenewed, "", 4800), ev("a", shard.JournalResumed, "", 5600), ev("a", shard.JournalOwned, "x", 100))
	tooLate = append(tooLate, renewals("a", 6000, 10000, 500)...)
	if iv := Intervals(tooLate, rd, grace, time.Time{}, at(10000)); len(iv) != 1 || !iv[0].End.Equal(at(5000)) {
		t.Fatalf("interval with a renewal resumed past the grace = %+v, want end at 5000", iv)
	}
	// Answered past the grace (at 5700): the replica voids, journalled at
	// the end of validity before.
	voided := append(renewals("a", 0, 3000, 500), ev("a", shard.JournalRenewed, "", 4800), ev("a", shard.JournalVoid, "", 5000), ev("a", shard.JournalOwned, "x", 100))
	voided = append(voided, renewals("a", 6000, 10000, 500)...)
	if iv := Intervals(voided, rd, grace, time.Time{}, at(10000)); len(iv) != 1 || !iv[0].End.Equal(at(5000)) {
		t.Fatalf("interval with a renewal answered past the grace = %+v, want end at 5000", iv)
	}
	// Sent past the grace: a lapse, whatever came after.
	gap := append(renewals("a", 0, 3000, 500), ev("a", shard.JournalRenewed, "", 5600), ev("a", shard.JournalResumed, "", 5650), ev("a", shard.JournalOwned, "x", 100))
	if iv := Intervals(gap, rd, grace, time.Time{}, at(10000)); len(iv) != 1 || !iv[0].End.Equal(at(5000)) {
		t.Fatalf("interval with a renewal sent past the grace = %+v, want end at 5000", iv)
	}
	// Held, the late replica has no hole: a taker inside the hole, even
	// one gone before the answer, is caught.
	if h := HeldIntervals(late, rd, grace, time.Time{}, at(10000)); len(h) != 1 || !h[0].Start.Equal(at(100)) || !h[0].End.Equal(at(10000)) {
		t.Fatalf("held across a late renewal within the grace = %+v, want [100,10000)", h)
	}
	inHole := append(renewals("b", 0, 10000, 500), ev("b", shard.JournalOwned, "x", 5100), ev("b", shard.JournalStopped, "x", 5250))
	if o := Overlaps(append(HeldIntervals(late, rd, grace, time.Time{}, at(10000)), HeldIntervals(inHole, rd, grace, time.Time{}, at(10000))...)); len(o) != 1 {
		t.Fatalf("overlaps = %v, want the taker's inside the hole", o)
	}
	// Past a lapse the replica holds for the grace more (its managers stop
	// then): a taker within it is caught, one after it is not.
	if h := HeldIntervals(gap, rd, grace, time.Time{}, at(10000)); len(h) != 1 || !h[0].End.Equal(at(5500)) {
		t.Fatalf("held past a lapse = %+v, want the end at 5000 + the grace", h)
	}
	for _, c := range []struct {
		at   int
		want int
	}{{5400, 1}, {5600, 0}} {
		taker := append(renewals("b", 0, 10000, 500), ev("b", shard.JournalOwned, "x", c.at))
		if o := Overlaps(append(HeldIntervals(gap, rd, grace, time.Time{}, at(10000)), HeldIntervals(taker, rd, grace, time.Time{}, at(10000))...)); len(o) != c.want {
			t.Fatalf("a taker at %d ms: overlaps %v, want %d", c.at, o, c.want)
		}
	}
	// A replica that never renewed held nothing.
	if h := HeldIntervals([]shard.JournalEntry{ev("a", shard.JournalOwned, "x", 100)}, rd, grace, time.Time{}, at(10000)); len(h) != 1 || h[0].End.After(h[0].Start) {
		t.Fatalf("held without a renewal = %+v, want empty", h)
	}
}

// A planned hand-over's gap counts from the old owner's last release of the
// cluster between the fault and the new owner's manager running: releases
// before the fault or after the new manager ran, other clusters' and other
// events do not count; a Lease left to expire (abandoned) after that
// release is told apart.
func TestLastReleases(t *testing.T) {
	fault := time.Date(2026, 12, 8, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return fault.Add(d) }
	running := map[string]time.Duration{"a": 5 * time.Second, "b": 3 * time.Second, "c": time.Second, "d": 8 * time.Second}
	old := []shard.JournalEntry{
		{Time: at(-time.Second), Event: shard.JournalReleasing, Cluster: "a"},    // before the fault
		{Time: at(4 * time.Second), Event: shard.JournalReleasing, Cluster: "a"}, // the paced release
		{Time: at(4100 * time.Millisecond), Event: shard.JournalStopped, Cluster: "a"},
		{Time: at(4200 * time.Millisecond), Event: shard.JournalReleased, Cluster: "a"},
		{Time: at(6 * time.Second), Event: shard.JournalReleasing, Cluster: "a"}, // after it ran again
		{Time: at(500 * time.Millisecond), Event: shard.JournalReleasing, Cluster: "b"},
		{Time: at(600 * time.Millisecond), Event: shard.JournalReleased, Cluster: "b", Detail: shard.JournalAbandoned},
		{Time: at(500 * time.Millisecond), Event: shard.JournalReleasing, Cluster: "z"}, // not moved
		{Time: at(time.Second), Event: shard.JournalReleasing, Cluster: "d"},
		{Time: at(1500 * time.Millisecond), Event: shard.JournalReleased, Cluster: "d", Detail: shard.JournalAbandoned},
	}
	other := []shard.JournalEntry{
		{Time: at(2 * time.Second), Event: shard.JournalReleasing, Cluster: "b"}, // moved on once more, released
		{Time: at(200 * time.Millisecond), Event: shard.JournalLost, Cluster: "c"},
	}
	out := map[string]release{}
	lastReleases(out, old, running, fault)
	lastReleases(out, other, running, fault)
	want := map[string]release{"a": {at: at(4 * time.Second)}, "b": {at: at(2 * time.Second)}, "d": {at: at(time.Second), abandoned: true}}
	if len(out) != len(want) {
		t.Fatalf("releases %v, want %v", out, want)
	}
	for c, w := range want {
		if got := out[c]; !got.at.Equal(w.at) || got.abandoned != w.abandoned {
			t.Errorf("%s: released at %v (abandoned %v), want %v (abandoned %v)", c, got.at.Sub(fault), got.abandoned, w.at.Sub(fault), w.abandoned)
		}
	}
}
