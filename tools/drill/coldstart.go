package drill

import (
	"time"

	"github.com/clustershard/clustershard/shard"
)

// ColdStartMoves counts, from the journals of one start-up, the clusters
// that changed hands before it ended: moved were given up (handed over or
// lost) by a replica that had acquired them; running those of them whose
// remote manager had already started there, so work (an install, copies)
// may have begun and been cut.
type ColdStartMoves struct {
	Moved, Running int
}

// coldStartMoves reads the moves of the start-up that ended at end.
func coldStartMoves(js map[*replica][]shard.JournalEntry, end time.Time) ColdStartMoves {
	moved, running := map[string]bool{}, map[string]bool{}
	for _, entries := range js {
		ran := map[string]bool{}
		for _, e := range entries {
			if e.Time.After(end) {
				continue
			}
			switch e.Event {
			case shard.JournalRunning:
				ran[e.Cluster] = true
			case shard.JournalReleasing, shard.JournalLost:
				moved[e.Cluster] = true
				if ran[e.Cluster] {
					running[e.Cluster] = true
				}
			}
		}
	}
	return ColdStartMoves{Moved: len(moved), Running: len(running)}
}
