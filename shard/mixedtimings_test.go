package shard_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

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

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	sampled := sampleOwnership(ctx, in, clusters, writes)
	resume := in["a"].c.Pause()
	defer resume()
	paused := time.Now()
	if err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return ownsAll(in["b"], clusters), nil
	}); err != nil {
		t.Fatal("b did not take over the paused replica's clusters")
	}
	t.Logf("b owns every cluster %v after a paused (a: lease 6s, renew 5s; b: lease %v)", time.Since(paused).Round(time.Millisecond), leaseDuration)
	cancel()
	<-sampled
	if v := writes.check(); len(v) > 0 {
		t.Fatalf("write permissions overlapped: %v", v[:min(len(v), 6)])
	}
}
