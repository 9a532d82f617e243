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
// holding it.
func Intervals(entries []shard.JournalEntry, renewDeadline time.Duration, death, now time.Time) []Interval {
	entries = slices.Clone(entries)
	slices.SortStableFunc(entries, func(a, b shard.JournalEntry) int { return a.Time.Compare(b.Time) })
	var renewals []time.Time
	var voids []time.Time
	for _, e := range entries {
		switch e.Event {
		case shard.JournalRenewed:
			renewals = append(renewals, e.Time)
		case shard.JournalVoid:
			voids = append(voids, e.Time)
		}
	}
	end := now
	if !death.IsZero() {
		end = death
	}
	var out []Interval
	open := map[string]time.Time{}
	closeAt := func(cluster string, at time.Time) {
		start := open[cluster]
		delete(open, cluster)
		at = minTime(at, lapse(renewals, start, renewDeadline), firstAfter(voids, start), end)
		out = append(out, Interval{Replica: entriesReplica(entries), Cluster: cluster, Start: start, End: at})
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

// lapse returns when membership validity first ends after start: the end of
// a renewal's validity not reached by the next renewal. Renewals are sorted.
func lapse(renewals []time.Time, start time.Time, renewDeadline time.Duration) time.Time {
	covered := time.Time{} // end of validity so far
	for _, s := range renewals {
		if !covered.IsZero() && s.After(covered) && covered.After(start) {
			return covered // a gap after start: validity ended at covered
		}
		if end := s.Add(renewDeadline); end.After(covered) {
			covered = end
		}
	}
	if covered.IsZero() {
		return start // no renewal at all: no authority
	}
	return covered
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
