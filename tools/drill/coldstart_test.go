package drill

import (
	"testing"
	"time"

	"github.com/clustershard/clustershard/shard"
)

func TestColdStartMoves(t *testing.T) {
	t0 := time.Now()
	at := func(d int) time.Time { return t0.Add(time.Duration(d) * time.Millisecond) }
	a, b := &replica{id: "a"}, &replica{id: "b"}
	js := map[*replica][]shard.JournalEntry{
		a: {
			{Time: at(1), Event: shard.JournalOwned, Cluster: "x"}, {Time: at(2), Event: shard.JournalRunning, Cluster: "x"},
			{Time: at(3), Event: shard.JournalReleasing, Cluster: "x"},                                                    // moved after its manager ran
			{Time: at(1), Event: shard.JournalOwned, Cluster: "y"}, {Time: at(4), Event: shard.JournalLost, Cluster: "y"}, // moved before
			{Time: at(1), Event: shard.JournalOwned, Cluster: "z"}, {Time: at(2), Event: shard.JournalRunning, Cluster: "z"},
			{Time: at(50), Event: shard.JournalReleasing, Cluster: "z"}, // after the start-up ended
		},
		b: {{Time: at(5), Event: shard.JournalOwned, Cluster: "x"}, {Time: at(6), Event: shard.JournalRunning, Cluster: "x"}},
	}
	if got := coldStartMoves(js, at(10)); got != (ColdStartMoves{Moved: 2, Running: 1}) {
		t.Fatalf("coldStartMoves: %+v, want 2 moved, 1 running", got)
	}
}
