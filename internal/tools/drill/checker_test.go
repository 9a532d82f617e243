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
	ivs := append(Intervals(owned(5000), 2*time.Second, time.Time{}, now), Intervals(b, 2*time.Second, time.Time{}, now)...)
	if o := Overlaps(ivs); len(o) != 0 {
		t.Fatalf("graceful hand-over reported as overlap: %v", o)
	}
	ivs = append(Intervals(owned(6000), 2*time.Second, time.Time{}, now), Intervals(b, 2*time.Second, time.Time{}, now)...)
	o := Overlaps(ivs)
	if len(o) != 1 || o[0].For != 900*time.Millisecond {
		t.Fatalf("overlaps = %v, want one of 900ms", o)
	}
	// A hand-over that began but never finished stopping lasts until now.
	unfinished := append(renewals("a", 0, 10000, 500), ev("a", shard.JournalOwned, "x", 100), ev("a", shard.JournalReleasing, "x", 4900))
	if o := Overlaps(append(Intervals(unfinished, 2*time.Second, time.Time{}, now), Intervals(b, 2*time.Second, time.Time{}, now)...)); len(o) != 1 {
		t.Fatalf("unfinished stop: overlaps = %v, want one", o)
	}
}

// Authority ends when membership lapses (a paused replica that stopped
// renewing), or at death, whichever comes first, even with no journal entry.
func TestIntervalsEndAtLapseOrDeath(t *testing.T) {
	paused := append(renewals("a", 0, 3000, 500), ev("a", shard.JournalOwned, "x", 100), ev("a", shard.JournalLost, "x", 9000), ev("a", shard.JournalStopped, "x", 9100))
	iv := Intervals(paused, 2*time.Second, time.Time{}, at(10000))
	if len(iv) != 1 || !iv[0].End.Equal(at(5000)) {
		t.Fatalf("paused replica's interval = %+v, want end at the last renewal + 2s", iv)
	}
	killed := append(renewals("a", 0, 3000, 500), ev("a", shard.JournalOwned, "x", 100))
	iv = Intervals(killed, 2*time.Second, at(3200), at(10000))
	if len(iv) != 1 || !iv[0].End.Equal(at(3200)) {
		t.Fatalf("killed replica's interval = %+v, want end at death", iv)
	}
	taker := append(renewals("b", 0, 10000, 500), ev("b", shard.JournalOwned, "x", 5200))
	all := append(Intervals(paused, 2*time.Second, time.Time{}, at(10000)), Intervals(taker, 2*time.Second, time.Time{}, at(10000))...)
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
