package shard

import (
	"fmt"
	"testing"
)

// The releasers of one successor split its window so that the successor
// has the window spawning at once (or one per releaser when there are
// more releasers than the window), whatever the window and the count.
func TestWindowShareAddsUpToTheWindow(t *testing.T) {
	for window := 1; window <= 9; window++ {
		for n := 1; n <= 5; n++ {
			var releasers []string
			for i := range n {
				releasers = append(releasers, fmt.Sprintf("replica-%d", (i*7)%n)) // not in name order
			}
			sum := 0
			for _, self := range releasers {
				s := windowShare(window, releasers, self)
				if s < 1 {
					t.Errorf("window %d over %v: %s's share is %d, want at least 1", window, releasers, self, s)
				}
				sum += s
			}
			if want := max(window, n); sum != want {
				t.Errorf("window %d over %d releasers: shares add up to %d, want %d", window, n, sum, want)
			}
		}
	}
	if got := windowShare(4, []string{"b", "a", "c"}, "a"); got != 2 {
		t.Errorf("window 4 over a, b, c: a's share %d, want 2 (the remainder goes first in name order)", got)
	}
	if got := windowShare(4, []string{"b", "a", "c"}, "c"); got != 1 {
		t.Errorf("window 4 over a, b, c: c's share %d, want 1", got)
	}
	if got := windowShare(3, nil, "a"); got != 3 {
		t.Errorf("no releasers known: share %d, want the whole window 3", got)
	}
}
