package drill

import (
	"testing"
	"time"
)

// Every scenario the runner lists has a fault, and the options accept it.
func TestEveryScenarioHasAFault(t *testing.T) {
	for _, s := range Scenarios {
		if faults[s] == nil {
			t.Errorf("scenario %q has no fault", s)
		}
	}
	if len(faults) != len(Scenarios) {
		t.Errorf("%d faults for %d scenarios", len(faults), len(Scenarios))
	}
	o := Options{Replicas: 3, Remotes: 1, ClustersPerRemote: 1, LeaseDuration: 4 * time.Second, Scenarios: Scenarios}
	if err := o.validate(); err != nil {
		t.Error(err)
	}
}

// The production timings are accepted; timings client-go's elector would
// refuse are not.
func TestDrillTimings(t *testing.T) {
	for _, tc := range []struct {
		lease, renew, retry time.Duration
		ok                  bool
	}{
		{4 * time.Second, 0, 0, true},
		{15 * time.Second, 10 * time.Second, 2 * time.Second, true},
		{4 * time.Second, 4 * time.Second, 0, false},                // no margin over the renew deadline
		{15 * time.Second, 2 * time.Second, 2 * time.Second, false}, // renew deadline <= 1.2 x retry
	} {
		o := Options{Replicas: 3, Remotes: 1, ClustersPerRemote: 1, LeaseDuration: tc.lease, RenewDeadline: tc.renew, RetryPeriod: tc.retry, Scenarios: []string{"kill"}}
		if err := o.validate(); (err == nil) != tc.ok {
			t.Errorf("lease %v renew %v retry %v: got %v, want ok=%v", tc.lease, tc.renew, tc.retry, err, tc.ok)
		}
	}
}
