package shard_test

import (
	"testing"
	"time"

	"github.com/clustershard/clustershard/shard"
)

// Replicas started with different timing flags (a rolling change of
// --lease-duration, a hand-edited pod) stay safe: b, with a 3 s lease
// duration, must not judge a expired before a's own 5 s renew deadline has
// fenced it. Each replica publishes its timings on its membership Lease and
// an observer waits for the longer of its own and the holder's lease
// duration.
func TestMixedTimingsKeepOneWriter(t *testing.T) {
	ns := namespace(t, "mixed-timings")
	clusters := names(8)
	tr, writes := newTracker(), newTracker()
	in := map[string]*instance{}
	in["a"] = startInstanceWith(t, ns, "a", clusters, trackingHandler{"a", tr}, nil, func(o *shard.Options) {
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 6*time.Second, 5*time.Second, time.Second
	})
	in["b"] = startInstance(t, ns, "b", clusters, trackingHandler{"b", tr})
	want := expected(t, []string{"a", "b"}, clusters)
	settled(t, tr, ns, want, in, 30*time.Second)

	stop := sampleOwnership(t, in, clusters, writes)
	resume := in["a"].c.Pause()
	defer resume()
	paused := time.Now()
	waitOwnsAll(t, in["b"], clusters, 20*time.Second, "b, after a paused,")
	t.Logf("b owns every cluster %v after a paused (a: lease 6s, renew 5s; b: lease %v)", time.Since(paused).Round(time.Millisecond), leaseDuration)
	stop()
	if v := writes.check(); len(v) > 0 {
		t.Fatalf("write permissions overlapped: %v", v[:min(len(v), 6)])
	}
}
