package remotecluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
)

// MarkNoOwner records on a RemoteCluster that no replica owns it any more:
// its owner handed it over with no successor (why says so). Status loses its
// owner, and Ready and Owned turn Unknown and False with reason NoOwner, so
// that nobody reads the last owner's Ready=True as current. The coordinator
// calls it after the manager stopped and before the Lease is released; the
// write is conditional on the version read, so a status computed earlier
// cannot land after it.
func (r *Reconciler) MarkNoOwner(ctx context.Context, cluster, why string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var rc v1alpha1.RemoteCluster
		if err := r.Client.Get(ctx, client.ObjectKey{Name: cluster}, &rc); err != nil {
			return client.IgnoreNotFound(err)
		}
		before := rc.DeepCopy()
		rc.Status.Owner, rc.Status.OwnerIncarnation, rc.Status.OwnershipEpoch = "", "", 0
		now := metav1.NewTime(time.Now().Truncate(time.Second))
		rc.Status.LastHeartbeatTime = &now // the last word: it ages from here
		msg := "No replica owns this cluster: " + why + ". Nothing reconciles it until a replica starts."
		meta.SetStatusCondition(&rc.Status.Conditions, metav1.Condition{
			Type: v1alpha1.ConditionReady, Status: metav1.ConditionUnknown, Reason: v1alpha1.ReasonNoOwner, Message: msg, ObservedGeneration: rc.Generation,
		})
		meta.SetStatusCondition(&rc.Status.Conditions, metav1.Condition{
			Type: v1alpha1.ConditionOwned, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonNoOwner, Message: msg, ObservedGeneration: rc.Generation,
		})
		if err := r.Client.Status().Patch(ctx, &rc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("mark %s as owned by no one: %w", cluster, err)
		}
		r.event(&rc, corev1.EventTypeNormal, v1alpha1.ReasonNoOwner, "%s", msg)
		return nil
	})
}
