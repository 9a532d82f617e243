package remotecluster

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clustershard/clustershard/api/v1alpha1"
)

// TestHeartbeat: the stamp moves with every status change, and otherwise
// only once it is HeartbeatInterval old.
func TestHeartbeat(t *testing.T) {
	now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	stamp := func(d time.Duration) *metav1.Time { x := metav1.NewTime(now.Add(-d)); return &x }
	for _, tc := range []struct {
		name    string
		last    *metav1.Time
		changed bool
		moves   bool
	}{
		{"first write", nil, false, true},
		{"fresh, nothing changed", stamp(time.Minute), false, false},
		{"fresh, status changed", stamp(time.Minute), true, true},
		{"stale, nothing changed", stamp(HeartbeatInterval), false, true},
	} {
		before := &v1alpha1.RemoteCluster{}
		before.Status.LastHeartbeatTime = tc.last
		rc := before.DeepCopy()
		if tc.changed {
			rc.Status.Owner = "replica-1"
		}
		heartbeat(before, rc, now)
		if moved := rc.Status.LastHeartbeatTime != nil && rc.Status.LastHeartbeatTime.Time.Equal(now); moved != tc.moves {
			t.Errorf("%s: heartbeat %v, want moved %v", tc.name, rc.Status.LastHeartbeatTime, tc.moves)
		}
	}
}
