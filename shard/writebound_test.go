package shard_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// TestWriteBoundFollowsRenewals: the server-side bound of a remote write is
// half the margin between lease duration and renew deadline past the write
// deadline, both move forward with each renewal, and neither is given once
// renewals stop and membership lapses.
func TestWriteBoundFollowsRenewals(t *testing.T) {
	ns := namespace(t, "bound")
	tr := newTracker()
	in := startInstance(t, ns, "replica-0", []string{"cluster-00"}, trackingHandler{"replica-0", tr})
	settled(t, tr, ns, map[string]string{"cluster-00": "replica-0"}, map[string]*instance{"replica-0": in}, 30*time.Second)
	d1, err := in.c.WriteDeadline("cluster-00")
	if err != nil {
		t.Fatal(err)
	}
	b1, err := in.c.WriteBound("cluster-00")
	if err != nil {
		t.Fatal(err)
	}
	if gap := b1.Sub(d1); gap != (leaseDuration-renewDeadline)/2 {
		t.Fatalf("bound - deadline = %v, want %v", gap, (leaseDuration-renewDeadline)/2)
	}
	var d2, b2 time.Time
	if err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 2*renewDeadline, true, func(context.Context) (bool, error) {
		d2, _ = in.c.WriteDeadline("cluster-00")
		b2, _ = in.c.WriteBound("cluster-00")
		return d2.After(d1) && b2.After(b1), nil
	}); err != nil {
		t.Fatalf("no renewal moved them: deadline %v -> %v, bound %v -> %v", d1, d2, b1, b2)
	}
	resume := in.c.Pause()
	defer resume()
	paused := time.Now()
	if err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, renewDeadline+time.Second, true, func(context.Context) (bool, error) {
		_, err := in.c.WriteBound("cluster-00")
		return err != nil, nil
	}); err != nil {
		t.Fatal("a bound was still given a renew deadline after renewals stopped")
	}
	t.Logf("no bound %v after renewals stopped", time.Since(paused).Round(10*time.Millisecond))
}
