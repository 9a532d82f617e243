package shard_test

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/shard"
)

// A replica restarted under the same identity (a StatefulSet pod after a
// rollout) gets its share back: its previous incarnation's leaving mark on
// the membership Lease is cleared, so the others hand its clusters over. It
// reports ready only once it holds that share, which is what paces a
// rollout; the hand-overs never overlap.
func TestRestartedReplicaRejoinsAndIsReadyWithItsShare(t *testing.T) {
	ns := namespace(t, "rejoin")
	clusters := names(12)
	tr := newTracker()
	in := map[string]*instance{}
	for _, n := range []string{"a", "b"} {
		in[n] = startInstance(t, ns, n, clusters, trackingHandler{n, tr})
	}
	both := expected(t, []string{"a", "b"}, clusters)
	settled(t, tr, ns, both, in, 30*time.Second)

	in["a"].stop(t)
	settled(t, tr, ns, expected(t, []string{"b"}, clusters), in, 10*time.Second)
	var member coordinationv1.Lease
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: shard.MemberLeaseName("a")}, &member); err != nil {
		t.Fatal(err)
	}
	if member.Annotations[v1alpha1.LeavingAnnotation] != "true" {
		t.Fatalf("the stopped replica did not mark its membership as leaving: %v", member.Annotations)
	}

	in["a"] = startInstance(t, ns, "a", clusters, trackingHandler{"a", tr})
	// The first time it reports ready, it owns every cluster assigned to it.
	err := wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return in["a"].c.Ready(), nil
	})
	if err != nil {
		t.Fatal("restarted replica never became ready")
	}
	for c, o := range both {
		if o == "a" && !in["a"].c.Owns(c) {
			t.Fatalf("ready before owning its share: %s not owned", c)
		}
	}
	settled(t, tr, ns, both, in, 10*time.Second)
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: shard.MemberLeaseName("a")}, &member); err != nil {
		t.Fatal(err)
	}
	if _, ok := member.Annotations[v1alpha1.LeavingAnnotation]; ok {
		t.Fatalf("leaving mark still on the restarted replica's membership: %v", member.Annotations)
	}
}

// A replica whose share stays held by a live member that never hands it over
// still reports ready once the catch-up timeout (2 × lease) has passed, so a
// rollout is paced, never blocked.
func TestReadyAfterCatchUpTimeoutWhenShareIsHeld(t *testing.T) {
	ns := namespace(t, "catchup")
	clusters := names(6)
	// A squatter: a live member (its membership Lease keeps changing) that
	// holds every cluster Lease and never releases one.
	member := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: shard.MemberLeaseName("squatter"), Labels: map[string]string{v1alpha1.LeaseRoleLabel: "member"}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("squatter"), LeaseDurationSeconds: ptr.To[int32](3)},
	}
	if err := env.Client.Create(t.Context(), member); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { // a live member: renews every retry period
		tick := time.NewTicker(retryPeriod)
		defer tick.Stop()
		for {
			member.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			_ = env.Client.Update(ctx, member)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	for _, c := range clusters {
		l := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: shard.ClusterLeaseName(c),
				Labels: map[string]string{v1alpha1.LeaseRoleLabel: "cluster"}, Annotations: map[string]string{v1alpha1.ClusterAnnotation: c}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("squatter")},
		}
		if err := env.Client.Create(t.Context(), l); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	a := startInstance(t, ns, "a", clusters, trackingHandler{"a", newTracker()})
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 4*leaseDuration, true, func(context.Context) (bool, error) {
		return a.c.Ready(), nil
	})
	if err != nil {
		t.Fatal("never ready although the catch-up timeout passed")
	}
	if took := time.Since(start); took < 2*leaseDuration {
		t.Fatalf("ready after %v, before the catch-up timeout %v, owning %v", took, 2*leaseDuration, a.c.Owned())
	}
	if owned := a.c.Owned(); len(owned) != 0 {
		t.Fatalf("took clusters from a live holder: %v", owned)
	}
}
