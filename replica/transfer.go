package replica

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/shard"
)

// placements maps each RemoteCluster with a spec.placement to the ring's
// constraint.
func placements(rcs []v1alpha1.RemoteCluster) map[string]shard.Placement {
	out := map[string]shard.Placement{}
	for _, rc := range rcs {
		if p := rc.Spec.Placement; p != nil && (p.Replica != "" || len(p.AvoidReplicas) > 0) {
			out[rc.Name] = shard.Placement{Pin: p.Replica, Avoid: p.AvoidReplicas}
		}
	}
	return out
}

// recordTransfer records a Normal OwnerChanged event on the RemoteCluster a
// transfer moved here: from whom, why, and how long no manager ran for it.
func recordTransfer(c client.Reader, rec events.EventRecorder, t shard.Transfer) {
	var rc v1alpha1.RemoteCluster
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Get(ctx, client.ObjectKey{Name: t.Cluster}, &rc); err != nil {
		return // deleted meanwhile: nothing to record on
	}
	from := t.From
	if from == "" {
		from = "no previous owner"
	}
	gap := "not measured"
	if t.WithoutManager > 0 {
		gap = t.WithoutManager.Round(time.Millisecond).String()
	}
	rec.Eventf(&rc, nil, corev1.EventTypeNormal, v1alpha1.ReasonOwnerChanged, "TakeOver",
		"Owner changed from %s to %s (%s); no manager ran for %s", from, t.To, t.Reason, gap)
}
