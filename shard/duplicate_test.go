package shard_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/shard"
)

// Two live processes started with one identity (a force-deleted pod whose
// node heals, a --replica-id typed twice) never both run or write for a
// cluster: the second is another incarnation, a foreign holder, and joins
// only once the first is gone; then it takes every cluster within a lease
// duration and a few seconds.
func TestSameIdentityTwoProcesses(t *testing.T) {
	ns := namespace(t, "same-identity")
	clusters := names(6)
	tr, writes := newTracker(), newTracker()
	in := map[string]*instance{}
	in["a#1"] = startInstance(t, ns, "a", clusters, trackingHandler{"a#1", tr})
	waitOwnsAll(t, in["a#1"], clusters, 20*time.Second, "the first process")
	in["a#2"] = startInstance(t, ns, "a", clusters, trackingHandler{"a#2", tr})
	stop := sampleOwnership(t, in, clusters, writes)

	// For longer than a lease duration the second process owns nothing,
	// and nothing overlaps.
	consistently(t, leaseDuration+2*time.Second, func() string {
		if v := append(tr.check(), writes.check()...); len(v) > 0 {
			return fmt.Sprintf("two processes of one identity ran or wrote for a cluster at once: %v", v[:min(len(v), 6)])
		}
		for _, c := range clusters {
			if in["a#2"].c.Owns(c) {
				return fmt.Sprintf("the second process owns %s while the first still holds it", c)
			}
		}
		return ""
	})

	in["a#1"].cleanup = in["a#1"].c.Crash()
	crashed := time.Now()
	tr.stopAll("a#1")
	waitOwnsAll(t, in["a#2"], clusters, leaseDuration+10*time.Second, "the second process, after the first crashed,")
	t.Logf("second incarnation owns every cluster %v after the first crashed (lease duration %v)", time.Since(crashed).Round(time.Millisecond), leaseDuration)
	stop()
	if v := append(tr.check(), writes.check()...); len(v) > 0 {
		t.Fatalf("overlaps: %v", v[:min(len(v), 6)])
	}
}

// A second process of one identity takes the membership Lease of a frozen
// first process once client-go's elector has seen it unchanged for the
// lease duration in the Lease's spec, which is whole seconds: 5 s for the
// first's 5.99 s, less than its 5.9 s renew deadline. The first's clusters
// are taken only once its published lease duration has passed since it was
// last seen renewing.
func TestSameIdentityShorterTimings(t *testing.T) {
	ns := namespace(t, "same-identity-timings")
	clusters := names(6)
	tr, writes := newTracker(), newTracker()
	in := map[string]*instance{}
	in["a#1"] = startInstanceWith(t, ns, "a", clusters, trackingHandler{"a#1", tr}, nil, func(o *shard.Options) {
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 5990*time.Millisecond, 5900*time.Millisecond, 80*time.Millisecond
	})
	waitOwnsAll(t, in["a#1"], clusters, 20*time.Second, "the first process")
	in["a#2"] = startInstance(t, ns, "a", clusters, trackingHandler{"a#2", tr})
	stop := sampleOwnership(t, in, clusters, writes)
	// a#2 has seen a#1 renew: its view names a live member "a".
	eventuallyTrue(t, func() bool { return in["a#2"].c.Observed().Members["a"] }, "the second process to see the first renew")
	resume := in["a#1"].c.Pause()
	defer resume()
	paused := time.Now()
	waitOwnsAll(t, in["a#2"], clusters, 20*time.Second, "the second process, after the first froze,")
	t.Logf("second process owns every cluster %v after the first froze (first: lease 5.99s, renew 5.9s; second: lease %v)", time.Since(paused).Round(time.Millisecond), leaseDuration)
	stop()
	if v := writes.check(); len(v) > 0 {
		t.Fatalf("write permissions overlapped: %v", v[:min(len(v), 6)])
	}
}

// Cluster Leases keep the bare replica name as spec.holderIdentity and the
// incarnation in an annotation: a replica of a version without
// incarnations, during a rolling upgrade, reads the holder as the live
// replica of that name (its membership Lease keeps changing) and never
// takes the cluster from it. (Checked against the previous version's
// coordinator running beside this one: no overlap.)
func TestClusterLeasesKeepTheBareName(t *testing.T) {
	ns := namespace(t, "bare-name")
	clusters := names(4)
	tr := newTracker()
	in := map[string]*instance{"a": startInstance(t, ns, "a", clusters, trackingHandler{"a", tr})}
	settled(t, tr, ns, expected(t, []string{"a"}, clusters), in, 30*time.Second)
	var list coordinationv1.LeaseList
	if err := env.Client.List(t.Context(), &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LeaseRoleLabel: "cluster"}); err != nil {
		t.Fatal(err)
	}
	for _, l := range list.Items {
		if h := *l.Spec.HolderIdentity; h != "a" || l.Annotations[v1alpha1.IncarnationAnnotation] == "" {
			t.Fatalf("Lease %s: holder %q, incarnation %q; want the bare name and an incarnation annotation", l.Name, h, l.Annotations[v1alpha1.IncarnationAnnotation])
		}
		if shard.HolderName(shard.LeaseHolder(&l)) != "a" || !strings.Contains(shard.LeaseHolder(&l), "@") {
			t.Fatalf("Lease %s: LeaseHolder %q", l.Name, shard.LeaseHolder(&l))
		}
	}
}
