package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// Object states add up per kind and replica, the lag of a generation is
// observed once, and forgotten objects leave the gauge.
func TestObjectsTracker(t *testing.T) {
	InitKind("Widget")
	Tracker.Set("r1", "Widget", "ns/a", 1, StatePending)
	Tracker.Set("r1", "Widget", "ns/b", 1, StateClusterNotReady)
	Tracker.Set("r2", "Widget", "ns/c", 1, StateSynced)
	if c := Tracker.Counts()["Widget"]; c[StatePending] != 1 || c[StateClusterNotReady] != 1 || c[StateSynced] != 1 {
		t.Fatalf("counts = %v", c)
	}
	before := sampleCount(t, "Widget")
	Tracker.Set("r1", "Widget", "ns/a", 1, StateSynced)
	Tracker.Set("r1", "Widget", "ns/a", 1, StateSynced) // same generation: no second observation
	if d := sampleCount(t, "Widget") - before; d != 1 {
		t.Fatalf("lag observations for one generation: %d, want 1", d)
	}
	Tracker.Set("r1", "Widget", "ns/a", 2, StateSynced) // a new generation is observed again
	if d := sampleCount(t, "Widget") - before; d != 2 {
		t.Fatalf("lag observations after a new generation: %d, want 2", d)
	}
	Tracker.Forget("r1", "Widget", "ns/b")
	Tracker.ForgetReplica("r2")
	want := `
# HELP clustershard_replicated_objects Source objects naming a remote cluster this replica owns, by kind and replication state (Pending, Synced, ClusterNotReady, ClusterNotFound, Failed, Deleting).
# TYPE clustershard_replicated_objects gauge
clustershard_replicated_objects{kind="Widget",state="ClusterNotFound"} 0
clustershard_replicated_objects{kind="Widget",state="ClusterNotReady"} 0
clustershard_replicated_objects{kind="Widget",state="Deleting"} 0
clustershard_replicated_objects{kind="Widget",state="Failed"} 0
clustershard_replicated_objects{kind="Widget",state="Pending"} 0
clustershard_replicated_objects{kind="Widget",state="Synced"} 1
`
	if err := testutil.CollectAndCompare(ReplicatedObjects, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}

func sampleCount(t *testing.T, kind string) uint64 {
	t.Helper()
	var m dto.Metric
	if err := ReplicationLag.WithLabelValues(kind).(prometheus.Histogram).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}
