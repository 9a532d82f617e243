package shard

import (
	"testing"
	"time"

	"github.com/go-logr/logr"
	clocktesting "k8s.io/utils/clock/testing"
)

// A renewal sent while membership was valid but answered after validity
// and the grace had ended must start a new epoch: from the grace's end
// others may judge the replica expired and take its clusters, so ownership
// from before must stay void (rule 4). Answered within the grace, it keeps
// the epoch: writes were fenced meanwhile (valid is false) but ownership
// stood (held), and authority goes on.
func TestLateRenewalStartsANewEpochPastTheGrace(t *testing.T) {
	kicks := 0
	var journal []JournalEntry
	t0 := time.Unix(1_000_000, 0)
	clk := clocktesting.NewFakePassiveClock(t0)
	o := &Options{LeaseDuration: 500 * time.Millisecond, RenewDeadline: 100 * time.Millisecond, Logger: logr.Discard(), Clock: clk,
		Journal: func(e JournalEntry) { journal = append(journal, e) }}
	m := &membership{o: o, onLapse: func() { kicks++ }}
	if g := m.grace(); g != 100*time.Millisecond {
		t.Fatalf("grace %v, want 100ms (a quarter of the margin)", g)
	}
	m.renewed(t0)
	_, first, ok := m.valid()
	if !ok {
		t.Fatal("not valid after a renewal")
	}

	// Sent at 50 ms, answered at 140 ms: validity ended at 100 ms, the
	// grace ends at 200 ms.
	clk.SetTime(t0.Add(140 * time.Millisecond))
	if _, _, ok := m.valid(); ok {
		t.Fatal("still valid past the renew deadline")
	}
	if e, ok := m.held(); !ok || e != first {
		t.Fatalf("within the grace: held %v in epoch %d, want true in %d", ok, e, first)
	}
	m.renewed(t0.Add(50 * time.Millisecond))
	if _, e, ok := m.valid(); !ok || e != first {
		t.Fatalf("answered within the grace: valid %v in epoch %d, want true in %d", ok, e, first)
	}
	if kicks != 1 || journal[len(journal)-1].Event != JournalResumed || !journal[len(journal)-1].Time.Equal(clk.Now()) {
		t.Fatalf("kicks %d, last journal entry %+v: want one kick and resumed at the answer", kicks, journal[len(journal)-1])
	}

	// Sent at 120 ms (valid until 150 ms, grace until 250 ms), answered at
	// 260 ms.
	clk.SetTime(t0.Add(260 * time.Millisecond))
	if _, ok := m.held(); ok {
		t.Fatal("held past the grace")
	}
	m.renewed(t0.Add(120 * time.Millisecond))
	_, second, ok := m.valid()
	if second == first {
		t.Fatalf("epoch %d kept past the grace (valid again: %v)", second, ok)
	}
	last := journal[len(journal)-1]
	if kicks != 2 || last.Event != JournalVoid || !last.Time.Equal(t0.Add(150*time.Millisecond)) {
		t.Fatalf("kicks %d, last journal entry %+v: want a second kick and void at the end of validity (150ms)", kicks, last)
	}
}
