package shard_test

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/clustershard/clustershard/api/v1alpha1"
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

// A Lease at a cluster's name whose annotation names another cluster (made
// or edited by hand) does not make its holder the cluster's holder, and
// does not block the cluster for good: the ring's owner takes it once it
// has stayed unchanged for a lease duration.
func TestLeaseNamingAnotherClusterIsNotAHolding(t *testing.T) {
	ns := namespace(t, "stray")
	clusters := names(6)
	want := expected(t, []string{"a", "b"}, clusters)
	var target string
	for _, c := range clusters {
		if want[c] == "a" {
			target = c
			break
		}
	}
	stray := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: shard.ClusterLeaseName(target),
			Labels:      map[string]string{v1alpha1.LeaseRoleLabel: "cluster"},
			Annotations: map[string]string{v1alpha1.ClusterAnnotation: "cluster-99"},
		},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("b"), LeaseDurationSeconds: ptr.To[int32](3)},
	}
	if err := env.Client.Create(t.Context(), stray); err != nil {
		t.Fatal(err)
	}
	tr := newTracker()
	in := map[string]*instance{}
	for _, n := range []string{"a", "b"} {
		in[n] = startInstance(t, ns, n, clusters, trackingHandler{n, tr})
	}
	if err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return len(in["a"].c.Observed().Members) == 2, nil
	}); err != nil {
		t.Fatal("a never saw b")
	}
	for _, i := range in {
		if h, ok := i.c.Observed().Holders["cluster-99"]; ok {
			t.Fatalf("%s judges cluster-99 held by %s from a Lease that is not its own", i.name, h.Holder)
		}
	}
	settled(t, tr, ns, want, in, leaseDuration+20*time.Second)
}
