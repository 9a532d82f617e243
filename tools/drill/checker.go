package drill

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/clustershard/clustershard/shard"
)

// Interval is a span of write authority of one replica over one cluster.
type Interval struct {
	Replica, Cluster string
	Start, End       time.Time
}

// Overlap is a violation of I1: two replicas with authority over one cluster
// at once.
type Overlap struct {
	A, B Interval
	// For is how long both held authority.
	For time.Duration
}

// String describes the overlap for a report.
func (o Overlap) String() string {
	return fmt.Sprintf("%s: %s [%s, %s) and %s [%s, %s) overlap for %v", o.A.Cluster,
		o.A.Replica, o.A.Start.Format(time.StampMicro), o.A.End.Format(time.StampMicro),
		o.B.Replica, o.B.Start.Format(time.StampMicro), o.B.End.Format(time.StampMicro), o.For)
}

// ReadJournal reads one replica's ownership journal (JSON lines).
func ReadJournal(path string) ([]shard.JournalEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var out []shard.JournalEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e shard.JournalEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// Intervals derives the authority intervals of one replica from its journal.
// Authority over a cluster starts at "owned" and ends at the first of:
// "stopped" of that cluster (its manager stopped and its writes in flight
// finished, after "releasing" or "lost"), the lapse of membership (the end
// of the last renewal's validity, renewDeadline after it was sent, when no
// renewal followed in time), "void", or death (the time the runner killed
// the process; zero if it was not killed), or now for a replica still
// holding it. A renewal answered late within the grace ("resumed") leaves a
// hole: from the end of the validity before it to its answer the replica
// may write nothing, and its authority goes on after; one whose answer came
// later than the grace, or that no answer followed, ends it.
func Intervals(entries []shard.JournalEntry, renewDeadline, grace time.Duration, death, now time.Time) []Interval {
	return intervals(entries, renewDeadline, grace, death, now, false)
}

// HeldIntervals are the spans in which one replica held a cluster (its
// manager may run), for I1's check that no two replicas hold one cluster at
// once: Intervals without the holes, and a lapse or void ends them only a
// grace later, when the replica stops what it held. Writes are judged by
// Intervals.
func HeldIntervals(entries []shard.JournalEntry, renewDeadline, grace time.Duration, death, now time.Time) []Interval {
	return intervals(entries, renewDeadline, grace, death, now, true)
}

func intervals(entries []shard.JournalEntry, renewDeadline, grace time.Duration, death, now time.Time, held bool) []Interval {
	entries = slices.Clone(entries)
	slices.SortStableFunc(entries, func(a, b shard.JournalEntry) int { return a.Time.Compare(b.Time) })
	m := membershipAuthority(entries, renewDeadline, grace)
	end := now
	if !death.IsZero() {
		end = death
	}
	replica := entriesReplica(entries)
	var out []Interval
	open := map[string]time.Time{}
	closeAt := func(cluster string, at time.Time) {
		start := open[cluster]
		delete(open, cluster)
		iv := Interval{Replica: replica, Cluster: cluster, Start: start}
		if held {
			lapse, void := m.lapse(start), firstAfter(m.voids, start)
			if m.renewed { // a replica that never renewed held nothing
				lapse = lapse.Add(grace)
			}
			if !void.IsZero() {
				void = void.Add(grace)
			}
			iv.End = minTime(at, lapse, void, end)
			out = append(out, iv)
			return
		}
		iv.End = minTime(at, m.lapse(start), firstAfter(m.voids, start), end)
		out = append(out, m.pieces(iv)...)
	}
	for _, e := range entries {
		switch e.Event {
		case shard.JournalOwned:
			if _, ok := open[e.Cluster]; ok {
				closeAt(e.Cluster, e.Time)
			}
			open[e.Cluster] = e.Time
		case shard.JournalStopped:
			if _, ok := open[e.Cluster]; ok {
				closeAt(e.Cluster, e.Time)
			}
		}
	}
	for c := range open {
		closeAt(c, end)
	}
	return out
}

// entriesReplica names the process of a journal: its holder identity
// (name@incarnation), as the User-Agent of its remote writes carries it, so
// two processes started with one name are two writers.
func entriesReplica(entries []shard.JournalEntry) string {
	for _, e := range entries {
		if e.Incarnation != "" {
			return shard.HolderIdentity(e.Replica, e.Incarnation)
		}
	}
	if len(entries) == 0 {
		return ""
	}
	return entries[0].Replica
}

// membership is what a replica's journal says of its membership: when its
// validity ended for good (ends, voids) and when it was fenced for a while
// but kept its ownership (holes).
type membership struct {
	renewed bool
	ends    []time.Time // sorted
	voids   []time.Time // sorted
	holes   []Interval  // sorted, only Start and End set
}

// membershipAuthority reads the membership events of sorted entries.
func membershipAuthority(entries []shard.JournalEntry, renewDeadline, grace time.Duration) membership {
	var m membership
	var covered, before time.Time // end of validity so far; and before the last renewal
	var pending time.Time         // end of validity a renewal sent after it has not yet answered
	for _, e := range entries {
		switch e.Event {
		case shard.JournalRenewed:
			s := e.Time
			if !pending.IsZero() { // the renewal before it was never answered in time
				m.ends = append(m.ends, pending)
				pending = time.Time{}
			}
			if m.renewed && s.After(covered) {
				if s.After(covered.Add(grace)) {
					m.ends = append(m.ends, covered) // a gap: validity ended at covered
				} else {
					pending = covered // sent within the grace: its answer decides
				}
			}
			m.renewed = true
			before = covered
			if v := s.Add(renewDeadline); v.After(covered) {
				covered = v
			}
		case shard.JournalResumed:
			pending = time.Time{}
			switch {
			case !e.Time.After(before):
			case e.Time.After(before.Add(grace)):
				m.ends = append(m.ends, before) // resumed past the grace: not allowed
			default:
				m.holes = append(m.holes, Interval{Start: before, End: e.Time})
			}
		case shard.JournalVoid:
			pending = time.Time{}
			m.voids = append(m.voids, e.Time)
		}
	}
	if !pending.IsZero() {
		m.ends = append(m.ends, pending)
	}
	if m.renewed {
		m.ends = append(m.ends, covered)
	}
	return m
}

// lapse returns when membership validity first ends for good after start;
// start itself when the replica never renewed (no authority).
func (m membership) lapse(start time.Time) time.Time {
	if !m.renewed {
		return start
	}
	for _, t := range m.ends {
		if t.After(start) {
			return t
		}
	}
	return m.ends[len(m.ends)-1]
}

// pieces cuts the holes out of iv.
func (m membership) pieces(iv Interval) []Interval {
	var out []Interval
	for _, h := range m.holes {
		if !h.End.After(iv.Start) || !h.Start.Before(iv.End) {
			continue
		}
		if h.Start.After(iv.Start) {
			out = append(out, Interval{Replica: iv.Replica, Cluster: iv.Cluster, Start: iv.Start, End: h.Start})
		}
		iv.Start = h.End
	}
	if iv.End.After(iv.Start) || len(out) == 0 {
		out = append(out, iv)
	}
	return out
}

func firstAfter(ts []time.Time, start time.Time) time.Time {
	for _, t := range ts {
		if !t.Before(start) {
			return t
		}
	}
	return time.Time{}
}

// minTime returns the earliest non-zero time.
func minTime(ts ...time.Time) time.Time {
	var m time.Time
	for _, t := range ts {
		if !t.IsZero() && (m.IsZero() || t.Before(m)) {
			m = t
		}
	}
	return m
}

// Overlaps returns every pair of intervals of different replicas over the
// same cluster that overlap in time (I1).
func Overlaps(intervals []Interval) []Overlap {
	by := map[string][]Interval{}
	for _, iv := range intervals {
		if iv.End.After(iv.Start) {
			by[iv.Cluster] = append(by[iv.Cluster], iv)
		}
	}
	var out []Overlap
	for _, ivs := range by {
		slices.SortFunc(ivs, func(a, b Interval) int { return a.Start.Compare(b.Start) })
		for i, a := range ivs {
			for _, b := range ivs[i+1:] {
				if !b.Start.Before(a.End) {
					break
				}
				if a.Replica != b.Replica {
					out = append(out, Overlap{A: a, B: b, For: minTime(a.End, b.End).Sub(b.Start)})
				}
			}
		}
	}
	return out
}
