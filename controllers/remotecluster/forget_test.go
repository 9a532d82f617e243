package remotecluster

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/metrics"
	"github.com/clustershard/clustershard/internal/remotefence"
)

// A lost cluster's ownership period is forgotten whole (the Notifier calls
// Forget for every lost cluster): its epoch, so that a later period raises a
// new one before it writes; the kubeconfig of its manager; and its install,
// so that a later period ensures spec.install again. The clusters counted
// as running without the remote fence are counted down with it. Another
// cluster's period is left alone.
func TestForgetDropsTheOwnershipPeriod(t *testing.T) {
	r := &Reconciler{}
	rc := &v1alpha1.RemoteCluster{ObjectMeta: metav1.ObjectMeta{Name: "lost"}}
	other := &v1alpha1.RemoteCluster{ObjectMeta: metav1.ObjectMeta{Name: "kept"}}
	before := testutil.ToFloat64(metrics.RemoteUnfenced)
	for _, c := range []*v1alpha1.RemoteCluster{rc, other} {
		r.setEpoch(c.Name, remotefence.Epoch{Reason: remotefence.ReasonPolicyUnavailable})
		r.setRunningHash(c.Name, "hash")
		r.setInstalled(c, installKey(c, "hash"))
	}
	if got := testutil.ToFloat64(metrics.RemoteUnfenced) - before; got != 2 {
		t.Fatalf("clusters without the remote fence: +%v, want +2", got)
	}

	r.Forget(rc.Name)

	if got := testutil.ToFloat64(metrics.RemoteUnfenced) - before; got != 1 {
		t.Errorf("after Forget: +%v clusters without the remote fence, want +1", got)
	}
	r.mu.Lock()
	_, epoch := r.epochs[rc.Name]
	_, otherEpoch := r.epochs[other.Name]
	r.mu.Unlock()
	if epoch || !otherEpoch {
		t.Errorf("epochs after Forget: lost kept %v, other kept %v; want false, true", epoch, otherEpoch)
	}
	if _, ok := r.runningHash(rc.Name); ok {
		t.Error("the lost cluster's manager kubeconfig is still remembered")
	}
	if changed, _ := r.installDue(rc, installKey(rc, "hash")); !changed {
		t.Error("the lost cluster's install is still remembered: a later period would not ensure spec.install")
	}
	if changed, _ := r.installDue(other, installKey(other, "hash")); changed {
		t.Error("the other cluster's install was forgotten too")
	}
	r.Forget(rc.Name) // twice: nothing left to count down
	if got := testutil.ToFloat64(metrics.RemoteUnfenced) - before; got != 1 {
		t.Errorf("after a second Forget: +%v, want +1", got)
	}
}
