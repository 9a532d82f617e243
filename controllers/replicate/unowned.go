package replicate

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/metrics"
	"github.com/clustershard/clustershard/internal/remotecopy"
)

// unowned handles a source whose cluster this replica does not own: the
// owner handles it; the Reporter reports a cluster nobody runs, and only
// the ring's choice an unknown cluster.
func (r *Reconciler) unowned(ctx context.Context, src *unstructured.Unstructured, cluster string) (ctrl.Result, error) {
	var rc v1alpha1.RemoteCluster
	err := r.Client.Get(ctx, client.ObjectKey{Name: cluster}, &rc)
	if err == nil {
		return r.nobodyRuns(ctx, src, cluster) // it exists: its owner syncs once it holds it
	}
	if !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	if !r.Ownership.Assigned(cluster) {
		return ctrl.Result{}, nil
	}
	if !src.GetDeletionTimestamp().IsZero() && controllerutil.ContainsFinalizer(src, v1alpha1.SourceFinalizer) &&
		src.GetAnnotations()[v1alpha1.ReleaseAnnotation] == "true" {
		return ctrl.Result{}, r.dropFinalizer(ctx, src)
	}
	if now := r.Kind.Cluster(src); src.GetDeletionTimestamp().IsZero() && src.GetAnnotations()[v1alpha1.ReplicatedToAnnotation] == cluster && now != cluster {
		// Moved away from a cluster that is no longer managed: its copy
		// cannot be removed, so the source is let go to its new cluster
		// (or made local), saying what was left behind.
		msg := fmt.Sprintf("RemoteCluster %q no longer exists: a copy left in it cannot be removed", cluster)
		r.event(src, corev1.EventTypeWarning, v1alpha1.ReasonCopyLeftBehind, msg)
		log.FromContext(ctx).Info("Source moved away from a cluster that no longer exists", "previous", cluster, "now", now)
		if now == "" {
			return ctrl.Result{}, r.dropFinalizer(ctx, src)
		}
		before := src.DeepCopy()
		ann := src.GetAnnotations()
		delete(ann, v1alpha1.ReplicatedToAnnotation)
		src.SetAnnotations(ann)
		return ctrl.Result{}, client.IgnoreNotFound(r.Client.Patch(ctx, src, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})))
	}
	r.failed(src, metrics.StateClusterNotFound, v1alpha1.ReasonClusterNotFound)
	msg := fmt.Sprintf("RemoteCluster %q does not exist; create it, fix spec, or set annotation %s=true to release a deleted source", cluster, v1alpha1.ReleaseAnnotation)
	changed, err := remotecopy.SetRemoteSynced(ctx, r.Client, r.Kind, src, false, v1alpha1.ReasonClusterNotFound, msg)
	if err != nil {
		return ctrl.Result{}, err
	}
	if changed {
		r.event(src, corev1.EventTypeWarning, v1alpha1.ReasonClusterNotFound, msg)
	}
	return ctrl.Result{RequeueAfter: r.recheck()}, nil
}

// nobodyRuns reports, from the one reporting replica, a source whose
// existing cluster no replica has run for longer than UnownedGrace, and
// looks again until one does (then its owner's sync replaces the outcome).
// A cluster the Reporter has not judged unowned yet needs no look: its
// sources are woken when the report is due (shard.Options.Unowned).
func (r *Reconciler) nobodyRuns(ctx context.Context, src *unstructured.Unstructured, cluster string) (ctrl.Result, error) {
	grace := r.UnownedGrace
	if grace <= 0 {
		grace = DefaultUnownedGrace
	}
	since, why, unowned := r.Ownership.UnownedCluster(cluster)
	if !unowned || !r.Ownership.Reporter() {
		return ctrl.Result{}, nil
	}
	if wait := grace - time.Since(since); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	r.failed(src, metrics.StateClusterNotReady, v1alpha1.ReasonClusterNotReady)
	msg := fmt.Sprintf("no replica runs RemoteCluster %q: %s; see clustershard status", cluster, why)
	changed, err := remotecopy.SetRemoteSynced(ctx, r.Client, r.Kind, src, false, v1alpha1.ReasonClusterUnowned, msg)
	if err != nil {
		return ctrl.Result{}, err
	}
	if changed {
		r.event(src, corev1.EventTypeWarning, v1alpha1.ReasonClusterUnowned, msg)
		log.FromContext(ctx).Info("Source's cluster has no running owner", "cluster", cluster, "since", since, "why", why)
	}
	return ctrl.Result{RequeueAfter: r.recheck()}, nil
}

// ensureTracked puts the finalizer and the replicated-to annotation on the source.
func (r *Reconciler) ensureTracked(ctx context.Context, src *unstructured.Unstructured, cluster string) error {
	if controllerutil.ContainsFinalizer(src, v1alpha1.SourceFinalizer) && src.GetAnnotations()[v1alpha1.ReplicatedToAnnotation] == cluster {
		return nil
	}
	before := src.DeepCopy()
	controllerutil.AddFinalizer(src, v1alpha1.SourceFinalizer)
	ann := src.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[v1alpha1.ReplicatedToAnnotation] = cluster
	src.SetAnnotations(ann)
	return r.Ownership.WithOwnership(cluster, func() error {
		return r.Client.Patch(ctx, src, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	})
}
