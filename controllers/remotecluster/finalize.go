package remotecluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/remotecopy"
	"github.com/clustershard/clustershard/registry"
)

// stop stops the cluster's remote manager if it runs here.
func (r *Reconciler) stop(ctx context.Context, cluster string) error {
	r.Forget(cluster)
	sctx, cancel := ctx, context.CancelFunc(func() {})
	if r.StopTimeout > 0 {
		sctx, cancel = context.WithTimeout(ctx, r.StopTimeout)
	}
	defer cancel()
	if err := r.Registry.Stop(sctx, cluster); err != nil && !errors.Is(err, registry.ErrNotExist) {
		return err
	}
	return nil
}

// finalize stops the manager, uninstalls when asked, and removes only this
// controller's finalizer.
//
// A remote cleanup that fails (the kubeconfig Secret was deleted first, the
// cluster is gone or refuses) is retried every few seconds until
// CleanupTimeout after the deletion; then the RemoteCluster is let go
// without it, with a Warning event naming what was left in the remote
// cluster, rather than staying Terminating for ever.
func (r *Reconciler) finalize(ctx context.Context, rc *v1alpha1.RemoteCluster) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(rc, v1alpha1.RemoteClusterFinalizer) {
		return ctrl.Result{}, nil
	}
	if err := r.stop(ctx, rc.Name); err != nil {
		return ctrl.Result{}, fmt.Errorf("stop the remote manager: %w", err)
	}
	if rc.Spec.Install != nil && rc.Spec.Install.CleanupPolicy == v1alpha1.CleanupDelete {
		if err := r.uninstall(ctx, rc); err != nil {
			left := time.Until(rc.DeletionTimestamp.Add(r.cleanupTimeout()))
			if left > 0 {
				msg := fmt.Sprintf("uninstall (retried until %v after the deletion, then abandoned): %v", r.cleanupTimeout(), err)
				r.setCondition(rc, v1alpha1.ConditionInstalled, false, installFailure(err), msg)
				r.setCondition(rc, v1alpha1.ConditionReady, false, installFailure(err), msg)
				log.FromContext(ctx).Info("Remote cleanup failed; retrying", "error", err.Error(), "abandonedIn", left.Round(time.Second).String())
				return ctrl.Result{RequeueAfter: min(left, cleanupRetry)}, nil
			}
			msg := fmt.Sprintf("Remote cleanup abandoned %v after the deletion: %v; left in the remote cluster: %s", r.cleanupTimeout(), err, leftBehind(rc, r.Kinds))
			r.event(rc, corev1.EventTypeWarning, v1alpha1.ReasonCleanupAbandoned, "%s", msg)
			log.FromContext(ctx).Error(err, "Remote cleanup abandoned; letting the RemoteCluster go", "leftBehind", leftBehind(rc, r.Kinds))
		}
	}
	before := rc.DeepCopy()
	controllerutil.RemoveFinalizer(rc, v1alpha1.RemoteClusterFinalizer)
	return ctrl.Result{}, r.owned(rc.Name, func() error {
		return r.Client.Patch(ctx, rc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	})
}

// cleanupRetry is the period of the retries of a failed remote cleanup.
const cleanupRetry = 5 * time.Second

func (r *Reconciler) cleanupTimeout() time.Duration {
	if r.CleanupTimeout == 0 {
		return DefaultCleanupTimeout
	}
	return r.CleanupTimeout
}

// leftBehind names what spec.install put in the remote cluster.
func leftBehind(rc *v1alpha1.RemoteCluster, kinds []remotecopy.Kind) string {
	var out []string
	if h := rc.Status.Helm; h != nil {
		out = append(out, fmt.Sprintf("Helm release %s/%s", h.Namespace, h.ReleaseName))
	} else if h := rc.Spec.Install.Helm; h != nil {
		out = append(out, fmt.Sprintf("Helm release %s/%s", h.Namespace, h.ReleaseName))
	}
	if installCRDs(rc) {
		for _, k := range kinds {
			out = append(out, "CRD "+k.CRD)
		}
	}
	if ns := rc.Spec.Install.Namespace; ns != "" {
		out = append(out, "namespace "+ns)
	}
	if len(out) == 0 {
		return "nothing"
	}
	return strings.Join(out, ", ")
}
