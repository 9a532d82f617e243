package replicate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/metrics"
	"github.com/clustershard/clustershard/internal/remotecopy"
	"github.com/clustershard/clustershard/registry"
)

// removeStaleCopy deletes the copy this replica applied for a source that no
// longer exists, if it still owns the copy's cluster (a new owner's monitor
// removes orphans when its remote manager starts).
func (r *Reconciler) removeStaleCopy(ctx context.Context, req ctrl.Request) error {
	v, ok := r.applied.Load(req.String())
	if !ok {
		return nil
	}
	cluster := v.(string)
	if !r.Ownership.Owns(cluster) {
		r.applied.Delete(req.String())
		return nil
	}
	err := r.Registry.WithClient(cluster, func(c client.Client) error {
		cp := r.Kind.New()
		if err := c.Get(ctx, req.NamespacedName, cp, registry.Live); err != nil {
			return client.IgnoreNotFound(err)
		}
		if cp.GetLabels()[v1alpha1.CopyClusterLabel] != cluster || !cp.GetDeletionTimestamp().IsZero() {
			return nil
		}
		log.FromContext(ctx).Info("Removing the copy of a deleted source", "cluster", cluster)
		return client.IgnoreNotFound(c.Delete(ctx, cp))
	})
	if err != nil && !errors.Is(err, registry.ErrNotExist) {
		return fmt.Errorf("remove the copy of deleted source %s in %q: %w", req, cluster, err)
	}
	r.applied.Delete(req.String())
	return nil
}

// removeCopy deletes the copy in target and waits for it to be gone, then
// releases the source (finalizer, annotation).
func (r *Reconciler) removeCopy(ctx context.Context, src *unstructured.Unstructured, target, now string) (ctrl.Result, error) {
	gone := false
	var remoteFinalizers []string
	err := r.Registry.WithClient(target, func(c client.Client) error {
		cp := r.Kind.New()
		// Live: a cache that has not seen the copy yet would release the
		// source with its copy still in the remote cluster.
		err := c.Get(ctx, client.ObjectKeyFromObject(src), cp, registry.Live)
		if apierrors.IsNotFound(err) {
			gone = true
			return nil
		}
		if err != nil {
			return err
		}
		if cp.GetLabels()[v1alpha1.CopyClusterLabel] != target {
			gone = true // not our copy
			return nil
		}
		remoteFinalizers = cp.GetFinalizers()
		if cp.GetDeletionTimestamp().IsZero() {
			return client.IgnoreNotFound(c.Delete(ctx, cp))
		}
		return nil
	})
	if err != nil {
		if src.GetAnnotations()[v1alpha1.ReleaseAnnotation] == "true" {
			return ctrl.Result{}, r.dropFinalizer(ctx, src)
		}
		r.failed(src, metrics.StateDeleting, v1alpha1.ReasonClusterNotReady)
		return ctrl.Result{}, r.report(ctx, src, target, false, v1alpha1.ReasonClusterNotReady, fmt.Sprintf("cannot delete the copy in %q: %v", target, err))
	}
	if !gone {
		// Remote finalizers run first; show them and check again shortly.
		msg := fmt.Sprintf("deleting the copy in %q", target)
		if len(remoteFinalizers) > 0 {
			msg += "; waiting for its remote finalizers " + strings.Join(remoteFinalizers, ", ")
		}
		err := r.Ownership.WithOwnership(target, func() error {
			if err := r.showRemoteFinalizers(ctx, src, remoteFinalizers); err != nil {
				return err
			}
			_, err := remotecopy.SetRemoteSynced(ctx, r.Client, r.Kind, src, false, v1alpha1.ReasonDeleting, msg)
			return err
		})
		return ctrl.Result{RequeueAfter: 500 * time.Millisecond}, client.IgnoreNotFound(err)
	}
	if now != "" && src.GetDeletionTimestamp().IsZero() {
		// Moved to another cluster: forget the old one; the new owner copies it.
		before := src.DeepCopy()
		ann := src.GetAnnotations()
		delete(ann, v1alpha1.ReplicatedToAnnotation)
		src.SetAnnotations(ann)
		return ctrl.Result{}, r.Ownership.WithOwnership(target, func() error {
			return r.Client.Patch(ctx, src, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
		})
	}
	return ctrl.Result{}, r.dropFinalizer(ctx, src)
}

// showRemoteFinalizers keeps RemoteFinalizersAnnotation on the source equal
// to the finalizers its remote copy still carries.
func (r *Reconciler) showRemoteFinalizers(ctx context.Context, src *unstructured.Unstructured, finalizers []string) error {
	want := strings.Join(finalizers, ",")
	have, ok := src.GetAnnotations()[v1alpha1.RemoteFinalizersAnnotation]
	if have == want && (ok || want == "") {
		return nil
	}
	before := src.DeepCopy()
	ann := src.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	if want == "" {
		delete(ann, v1alpha1.RemoteFinalizersAnnotation)
	} else {
		ann[v1alpha1.RemoteFinalizersAnnotation] = want
	}
	src.SetAnnotations(ann)
	return r.Client.Patch(ctx, src, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}

// dropFinalizer removes only this controller's finalizer (and the annotation).
func (r *Reconciler) dropFinalizer(ctx context.Context, src *unstructured.Unstructured) error {
	r.forget(client.ObjectKeyFromObject(src).String())
	r.applied.Delete(client.ObjectKeyFromObject(src).String())
	before := src.DeepCopy()
	controllerutil.RemoveFinalizer(src, v1alpha1.SourceFinalizer)
	ann := src.GetAnnotations()
	delete(ann, v1alpha1.ReplicatedToAnnotation)
	delete(ann, v1alpha1.RemoteFinalizersAnnotation)
	src.SetAnnotations(ann)
	return client.IgnoreNotFound(r.Client.Patch(ctx, src, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})))
}
