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

// A graceful hand-over (release, then the other acquires) is no overlap; a
// release after the other already acquired is.
func TestOverlapsCatchDoubleOwnership(t *testing.T) {
	a := append(renewals("a", 0, 10000, 500), ev("a", shard.JournalOwned, "x", 100), ev("a", shard.JournalReleasing, "x", 5000))
	b := append(renewals("b", 0, 10000, 500), ev("b", shard.JournalOwned, "x", 5100))
	now := at(10000)
	ivs := append(Intervals(a, 2*time.Second, time.Time{}, now), Intervals(b, 2*time.Second, time.Time{}, now)...)
	if o := Overlaps(ivs); len(o) != 0 {
		t.Fatalf("graceful hand-over reported as overlap: %v", o)
	}
	late := append(renewals("a", 0, 10000, 500), ev("a", shard.JournalOwned, "x", 100), ev("a", shard.JournalReleasing, "x", 6000))
	ivs = append(Intervals(late, 2*time.Second, time.Time{}, now), Intervals(b, 2*time.Second, time.Time{}, now)...)
	o := Overlaps(ivs)
	if len(o) != 1 || o[0].For != 900*time.Millisecond {
		t.Fatalf("overlaps = %v, want one of 900ms", o)
	}
}

// Authority ends when membership lapses (a paused replica that stopped
// renewing), or at death, whichever comes first, even with no journal entry.
func TestIntervalsEndAtLapseOrDeath(t *testing.T) {
	paused := append(renewals("a", 0, 3000, 500), ev("a", shard.JournalOwned, "x", 100), ev("a", shard.JournalLost, "x", 9000))
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
