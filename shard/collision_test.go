package shard_test

import (
	"strings"
	"testing"
	"time"

	"github.com/clustershard/clustershard/shard"
)

// collidingPair returns two cluster names whose Leases shared one name
// under the cut-and-hash scheme: a name too long for a Lease, and a short
// one spelled as the cut form of the long one.
func collidingPair() (long, short string) {
	long = strings.Repeat("l", 240)
	cut := strings.TrimPrefix(shard.ClusterLeaseName(long), shard.ClusterLeasePrefix)
	if len(shard.ClusterLeasePrefix+cut) > 253 {
		panic("cut form too long")
	}
	return long, cut
}

// A name that fits and a name that was cut never share a Lease, and two
// cut names never do either.
func TestClusterLeaseNamesDoNotCollide(t *testing.T) {
	long := strings.Repeat("l", 240)
	spelled := strings.TrimPrefix(shard.ClusterLeaseName(long), shard.ClusterLeasePrefix)
	if shard.ClusterLeaseName(spelled) == shard.ClusterLeaseName(long) {
		t.Fatalf("cluster %q (fits) and a %d-character cluster share Lease %q", spelled, len(long), shard.ClusterLeaseName(long))
	}
	seen := map[string]string{}
	for _, c := range []string{long, long + "a", long + "b", strings.Repeat("l", 252-len(shard.ClusterLeasePrefix)), strings.Repeat("l", 253-len(shard.ClusterLeasePrefix))} {
		n := shard.ClusterLeaseName(c)
		if prev, dup := seen[n]; dup {
			t.Fatalf("clusters of %d and %d characters share Lease %q", len(prev), len(c), n)
		}
		seen[n] = c
	}
}

// Two clusters whose names once mapped to one Lease are owned apart: each
// by the replica the ring names, never both by two replicas at once.
func TestCollidingNamesAreOwnedApart(t *testing.T) {
	ns := namespace(t, "collide")
	long, short := collidingPair()
	clusters := append(names(6), long, short)
	tr := newTracker()
	in := map[string]*instance{}
	for _, n := range []string{"a", "b"} {
		in[n] = startInstance(t, ns, n, clusters, trackingHandler{n, tr})
	}
	want := expected(t, []string{"a", "b"}, clusters)
	settled(t, tr, ns, want, in, 30*time.Second)
}
