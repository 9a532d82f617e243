package shard

import (
	"testing"
	"time"

	"github.com/go-logr/logr"
	clocktesting "k8s.io/utils/clock/testing"
)

// A renewal sent while membership was valid but answered after it had
// lapsed must start a new epoch: between the lapse and the answer others may
// already have judged the replica expired and taken its clusters, so
// ownership from before must stay void (rule 4).
func TestLateRenewalStartsANewEpoch(t *testing.T) {
	lapses := 0
	t0 := time.Unix(1_000_000, 0)
	clk := clocktesting.NewFakePassiveClock(t0)
	m := &membership{o: &Options{RenewDeadline: 100 * time.Millisecond, Logger: logr.Discard(), Clock: clk}, onLapse: func() { lapses++ }}
	m.renewed(t0)
	_, first, ok := m.valid()
	if !ok {
		t.Fatal("not valid after a renewal")
	}
	sent := t0.Add(50 * time.Millisecond) // a renewal sent while still valid ...
	clk.SetTime(t0.Add(150 * time.Millisecond))
	if _, _, ok := m.valid(); ok {
		t.Fatal("still valid past the renew deadline")
	}
	m.renewed(sent) // ... answered after validity ended
	_, second, ok := m.valid()
	if second == first {
		t.Fatalf("epoch %d kept across a lapse (valid again: %v)", second, ok)
	}
	if lapses != 1 {
		t.Fatalf("onLapse called %d times, want 1", lapses)
	}
}
