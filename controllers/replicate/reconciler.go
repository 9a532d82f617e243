package replicate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/metrics"
	"github.com/clustershard/clustershard/internal/remotecopy"
	"github.com/clustershard/clustershard/registry"
)

// ControllerName is the base name of the per-kind controllers.
const ControllerName = "replicate"

// Condition reasons on sources.
const (
	ReasonSynced          = "Synced"
	ReasonClusterNotFound = "ClusterNotFound"
	ReasonClusterNotReady = "ClusterNotReady"
	// ReasonClusterUnowned: no replica runs the source's cluster (its Lease
	// is free and not acquired, or names a replica that does not renew)
	// for longer than UnownedGrace; written by one replica, retried.
	ReasonClusterUnowned = "ClusterUnowned"
	ReasonSyncFailed     = "SyncFailed"
	ReasonDeleting       = "DeletingRemoteCopy"
	// ReasonWebhookRefused: an admission webhook of the remote cluster
	// refused the copy.
	ReasonWebhookRefused = "WebhookRefused"
	// ReasonWebhookUnavailable: a webhook of the remote cluster with
	// failurePolicy Fail cannot be called (say chaos-controller-manager is
	// down), so every write of the copy is refused until it is back.
	ReasonWebhookUnavailable = "WebhookUnavailable"
	// ReasonCopyLeftBehind: a source moved away from a cluster whose
	// RemoteCluster no longer exists; its copy there could not be removed.
	ReasonCopyLeftBehind = "CopyLeftBehind"
	// ReasonRecreating: the old copy is deleted so that one with the new
	// spec can be created (update strategy Recreate, or Auto after the
	// remote refused the change).
	ReasonRecreating = "RecreatingCopy"
	// ReasonNamespaceMissing: the copy's namespace is missing remotely.
	ReasonNamespaceMissing = "NamespaceMissing"
	// ReasonForbidden: the remote kubeconfig may not write the copy.
	ReasonForbidden = "Forbidden"
)

// syncFailureReason names the cause of a failed write of a copy, so the
// condition and the event point at it rather than at a generic failure.
func syncFailureReason(err error) string {
	msg := remoteMessage(err)
	switch {
	case webhookUnavailable(err):
		return ReasonWebhookUnavailable
	case strings.Contains(msg, "admission webhook"):
		return ReasonWebhookRefused
	case apierrors.IsNotFound(err) && strings.Contains(msg, "namespaces"):
		return ReasonNamespaceMissing
	case apierrors.IsForbidden(err):
		return ReasonForbidden
	default:
		return ReasonSyncFailed
	}
}

// Ownership is what the controller needs from the shard coordinator.
type Ownership interface {
	// Owns reports whether this replica owns the cluster now.
	Owns(cluster string) bool
	// WithOwnership runs f while this replica owns the cluster.
	WithOwnership(cluster string, f func() error) error
	// Assigned reports whether the ring assigns the name to this replica;
	// used to pick the one replica that reports an unknown cluster.
	Assigned(cluster string) bool
	// UnownedCluster reports whether no replica may run the cluster now,
	// since when and why.
	UnownedCluster(cluster string) (since time.Time, why string, unowned bool)
	// Reporter reports whether this replica is the one that reports on
	// clusters nobody runs.
	Reporter() bool
}

// Reconciler replicates the sources of one kind.
type Reconciler struct {
	// Client is the management cluster's client.
	Client client.Client
	// Registry runs the remote managers.
	Registry *registry.Registry
	// Ownership is the shard coordinator.
	Ownership Ownership
	// Identity is this replica's name, written on remote copies.
	Identity string
	// Kind is the replicated kind.
	Kind remotecopy.Kind
	// UnownedGrace is how long a source's cluster may have no running
	// owner (a crash take-over) before the source says so (default 1m).
	UnownedGrace time.Duration
	// Recorder emits Events on sources.
	Recorder events.EventRecorder

	// namespaces remembers "cluster/namespace" pairs known to exist
	// remotely, so a sync does not cost a namespace write every time.
	namespaces sync.Map
	// applied remembers, per source key, the cluster this replica last
	// applied its copy to. A source deleted while this replica's cache still
	// showed it alive (its previous owner removed the copy and released it
	// during a hand-over) may have had its copy applied again from the stale
	// view; when the deletion reaches the cache, that copy is removed.
	applied sync.Map
	// recreating remembers, per source key, why its copy is being re-created,
	// until the new copy is written.
	recreating sync.Map
}

// Reconcile syncs one source with its remote copy.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	src := r.Kind.New()
	if err := r.Client.Get(ctx, req.NamespacedName, src); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		r.forget(req.String())
		return ctrl.Result{}, r.removeStaleCopy(ctx, req)
	}
	cluster := r.Kind.Cluster(src)
	previous := src.GetAnnotations()[remotecopy.ReplicatedToAnnotation]
	moved := previous != "" && previous != cluster
	target := cluster
	if moved {
		// The field was cleared or names another cluster: the copy lives in
		// the previous one, whose owner removes it before the new cluster's
		// owner makes a copy (it waits for the annotation to go).
		target = previous
	}
	if target == "" {
		r.forget(req.String())
		return ctrl.Result{}, nil // a local object
	}
	if !r.Ownership.Owns(target) {
		r.forget(req.String()) // its owner reports it
		return r.unowned(ctx, src, target)
	}
	if !src.GetDeletionTimestamp().IsZero() || moved {
		// The copy must go: the source is deleted, or now names another cluster.
		r.track(src, metrics.StateDeleting)
		return r.removeCopy(ctx, src, target, cluster)
	}
	r.track(src, metrics.StatePending)
	if err := r.ensureTracked(ctx, src, cluster); err != nil {
		r.failed(src, metrics.StatePending, reasonAPIError)
		return ctrl.Result{}, err
	}
	info, ok := r.Registry.Get(cluster)
	if !ok || info.State != registry.StateRunning {
		state := "not spawned"
		if ok {
			state = string(info.State)
		}
		r.failed(src, metrics.StateClusterNotReady, ReasonClusterNotReady)
		return ctrl.Result{}, r.report(ctx, src, cluster, false, ReasonClusterNotReady, fmt.Sprintf("remote cluster %q is %s here; retrying", cluster, state))
	}
	desired := r.Kind.Copy(src, cluster, r.Identity)
	nsKey := cluster + "/" + desired.GetNamespace()
	var w write
	err := r.Registry.WithClient(cluster, func(c client.Client) error {
		if _, known := r.namespaces.Load(nsKey); !known {
			if err := ensureNamespace(ctx, c, desired.GetNamespace()); err != nil {
				return err
			}
			r.namespaces.Store(nsKey, struct{}{})
		}
		var err error
		w, err = r.writeCopy(ctx, c, req.String(), desired, cluster)
		if apierrors.IsNotFound(err) {
			r.namespaces.Delete(nsKey) // deleted by hand: create it again next time
		}
		return err
	})
	if err != nil {
		reason := syncFailureReason(err)
		r.failed(src, metrics.StateFailed, reason)
		return ctrl.Result{}, r.report(ctx, src, cluster, false, reason, fmt.Sprintf("write the copy in %q: %v", cluster, err))
	}
	if w.recreating != "" {
		// The old copy goes first; its remote finalizers show on the source.
		r.track(src, metrics.StatePending)
		msg := fmt.Sprintf("re-creating the copy in %q (%s); waiting for the old copy to be deleted", cluster, w.recreating)
		if len(w.finalizers) > 0 {
			msg += ", its remote finalizers: " + strings.Join(w.finalizers, ", ")
		}
		err := r.Ownership.WithOwnership(cluster, func() error {
			if err := r.showRemoteFinalizers(ctx, src, w.finalizers); err != nil {
				return err
			}
			wrote, err := remotecopy.SetRemoteSynced(ctx, r.Client, r.Kind, src, false, ReasonRecreating, msg)
			if wrote {
				r.event(src, corev1.EventTypeNormal, ReasonRecreating, msg)
			}
			return err
		})
		return ctrl.Result{RequeueAfter: 500 * time.Millisecond}, client.IgnoreNotFound(err)
	}
	r.applied.Store(req.String(), cluster)
	r.track(src, metrics.StateSynced)
	msg := "copy applied in " + cluster + " by " + r.Identity
	if why, ok := r.recreating.LoadAndDelete(req.String()); ok {
		msg = recreatedPrefix + cluster + " by " + r.Identity + " (" + why.(string) + ")"
	} else if o, ok := remotecopy.ReadOutcome(src); ok && o.Reason == ReasonSynced && o.SpecHash == remotecopy.SpecHash(src) && strings.HasPrefix(o.Message, recreatedPrefix+cluster+" ") {
		msg = o.Message // keep saying why this copy was re-created
	}
	if shape := r.Kind.Shape(); !shape.Status {
		msg += "; remote status not mirrored: " + shape.String()
	}
	if err := r.Ownership.WithOwnership(cluster, func() error { return r.showRemoteFinalizers(ctx, src, nil) }); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return ctrl.Result{}, r.report(ctx, src, cluster, true, ReasonSynced, msg)
}

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
		if err := c.Get(ctx, req.NamespacedName, cp); err != nil {
			return client.IgnoreNotFound(err)
		}
		if cp.GetLabels()[remotecopy.ClusterLabel] != cluster || !cp.GetDeletionTimestamp().IsZero() {
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

// unowned handles a source whose cluster this replica does not own: the
// owner handles it; only the ring's choice reports an unknown cluster.
func (r *Reconciler) unowned(ctx context.Context, src *unstructured.Unstructured, cluster string) (ctrl.Result, error) {
	if !r.Ownership.Assigned(cluster) {
		return ctrl.Result{}, nil
	}
	var rc v1alpha1.RemoteCluster
	err := r.Client.Get(ctx, client.ObjectKey{Name: cluster}, &rc)
	if err == nil {
		return r.nobodyRuns(ctx, src, cluster) // it exists: its owner syncs once it holds it
	}
	if !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	if !src.GetDeletionTimestamp().IsZero() && controllerutil.ContainsFinalizer(src, remotecopy.Finalizer) &&
		src.GetAnnotations()[remotecopy.ReleaseAnnotation] == "true" {
		return ctrl.Result{}, r.dropFinalizer(ctx, src)
	}
	if now := r.Kind.Cluster(src); src.GetDeletionTimestamp().IsZero() && src.GetAnnotations()[remotecopy.ReplicatedToAnnotation] == cluster && now != cluster {
		// Moved away from a cluster that is no longer managed: its copy
		// cannot be removed, so the source is let go to its new cluster
		// (or made local), saying what was left behind.
		msg := fmt.Sprintf("RemoteCluster %q no longer exists: a copy left in it cannot be removed", cluster)
		r.event(src, corev1.EventTypeWarning, ReasonCopyLeftBehind, msg)
		log.FromContext(ctx).Info("Source moved away from a cluster that no longer exists", "previous", cluster, "now", now)
		if now == "" {
			return ctrl.Result{}, r.dropFinalizer(ctx, src)
		}
		before := src.DeepCopy()
		ann := src.GetAnnotations()
		delete(ann, remotecopy.ReplicatedToAnnotation)
		src.SetAnnotations(ann)
		return ctrl.Result{}, client.IgnoreNotFound(r.Client.Patch(ctx, src, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})))
	}
	r.failed(src, metrics.StateClusterNotFound, ReasonClusterNotFound)
	msg := fmt.Sprintf("RemoteCluster %q does not exist; create it, fix spec, or set annotation %s=true to release a deleted source", cluster, remotecopy.ReleaseAnnotation)
	if _, err := remotecopy.SetRemoteSynced(ctx, r.Client, r.Kind, src, false, ReasonClusterNotFound, msg); err != nil {
		return ctrl.Result{}, err
	}
	r.event(src, corev1.EventTypeWarning, ReasonClusterNotFound, msg)
	return ctrl.Result{RequeueAfter: 30 * time.Second}, nil
}

// nobodyRuns reports, from the one reporting replica, a source whose
// existing cluster no replica has run for longer than UnownedGrace, and
// looks again until one does (then its owner's sync replaces the outcome).
func (r *Reconciler) nobodyRuns(ctx context.Context, src *unstructured.Unstructured, cluster string) (ctrl.Result, error) {
	grace := r.UnownedGrace
	if grace <= 0 {
		grace = time.Minute
	}
	since, why, unowned := r.Ownership.UnownedCluster(cluster)
	if !unowned || !r.Ownership.Reporter() {
		return ctrl.Result{}, nil
	}
	if wait := grace - time.Since(since); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	r.failed(src, metrics.StateClusterNotReady, ReasonClusterNotReady)
	msg := fmt.Sprintf("no replica runs RemoteCluster %q: %s; see clustershard status", cluster, why)
	changed, err := remotecopy.SetRemoteSynced(ctx, r.Client, r.Kind, src, false, ReasonClusterUnowned, msg)
	if err != nil {
		return ctrl.Result{}, err
	}
	if changed {
		r.event(src, corev1.EventTypeWarning, ReasonClusterUnowned, msg)
		log.FromContext(ctx).Info("Source's cluster has no running owner", "cluster", cluster, "since", since, "why", why)
	}
	return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
}

// ensureTracked puts the finalizer and the replicated-to annotation on the source.
func (r *Reconciler) ensureTracked(ctx context.Context, src *unstructured.Unstructured, cluster string) error {
	if controllerutil.ContainsFinalizer(src, remotecopy.Finalizer) && src.GetAnnotations()[remotecopy.ReplicatedToAnnotation] == cluster {
		return nil
	}
	before := src.DeepCopy()
	controllerutil.AddFinalizer(src, remotecopy.Finalizer)
	ann := src.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[remotecopy.ReplicatedToAnnotation] = cluster
	src.SetAnnotations(ann)
	return r.Ownership.WithOwnership(cluster, func() error {
		return r.Client.Patch(ctx, src, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	})
}

// removeCopy deletes the copy in target and waits for it to be gone, then
// releases the source (finalizer, annotation).
func (r *Reconciler) removeCopy(ctx context.Context, src *unstructured.Unstructured, target, now string) (ctrl.Result, error) {
	gone := false
	var remoteFinalizers []string
	err := r.Registry.WithClient(target, func(c client.Client) error {
		cp := r.Kind.New()
		err := c.Get(ctx, client.ObjectKeyFromObject(src), cp)
		if apierrors.IsNotFound(err) {
			gone = true
			return nil
		}
		if err != nil {
			return err
		}
		if cp.GetLabels()[remotecopy.ClusterLabel] != target {
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
		if src.GetAnnotations()[remotecopy.ReleaseAnnotation] == "true" {
			return ctrl.Result{}, r.dropFinalizer(ctx, src)
		}
		r.failed(src, metrics.StateDeleting, ReasonClusterNotReady)
		return ctrl.Result{}, r.report(ctx, src, target, false, ReasonClusterNotReady, fmt.Sprintf("cannot delete the copy in %q: %v", target, err))
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
			_, err := remotecopy.SetRemoteSynced(ctx, r.Client, r.Kind, src, false, ReasonDeleting, msg)
			return err
		})
		return ctrl.Result{RequeueAfter: 500 * time.Millisecond}, client.IgnoreNotFound(err)
	}
	if now != "" && src.GetDeletionTimestamp().IsZero() {
		// Moved to another cluster: forget the old one; the new owner copies it.
		before := src.DeepCopy()
		ann := src.GetAnnotations()
		delete(ann, remotecopy.ReplicatedToAnnotation)
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
	have, ok := src.GetAnnotations()[remotecopy.RemoteFinalizersAnnotation]
	if have == want && (ok || want == "") {
		return nil
	}
	before := src.DeepCopy()
	ann := src.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	if want == "" {
		delete(ann, remotecopy.RemoteFinalizersAnnotation)
	} else {
		ann[remotecopy.RemoteFinalizersAnnotation] = want
	}
	src.SetAnnotations(ann)
	return r.Client.Patch(ctx, src, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}

// dropFinalizer removes only this controller's finalizer (and the annotation).
func (r *Reconciler) dropFinalizer(ctx context.Context, src *unstructured.Unstructured) error {
	r.forget(client.ObjectKeyFromObject(src).String())
	r.applied.Delete(client.ObjectKeyFromObject(src).String())
	before := src.DeepCopy()
	controllerutil.RemoveFinalizer(src, remotecopy.Finalizer)
	ann := src.GetAnnotations()
	delete(ann, remotecopy.ReplicatedToAnnotation)
	delete(ann, remotecopy.RemoteFinalizersAnnotation)
	src.SetAnnotations(ann)
	return client.IgnoreNotFound(r.Client.Patch(ctx, src, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})))
}

// report sets RemoteSynced (under ownership) and, on failure, emits a
// Warning event and returns an error so the workqueue backs off.
func (r *Reconciler) report(ctx context.Context, src *unstructured.Unstructured, cluster string, ok bool, reason, msg string) error {
	var wrote bool
	err := r.Ownership.WithOwnership(cluster, func() error {
		var err error
		wrote, err = remotecopy.SetRemoteSynced(ctx, r.Client, r.Kind, src, ok, reason, msg)
		return err
	})
	if ok {
		return err
	}
	if wrote {
		r.event(src, corev1.EventTypeWarning, reason, msg)
	}
	return errors.Join(errors.New(msg), err)
}

func (r *Reconciler) event(obj *unstructured.Unstructured, typ, reason, msg string) {
	if r.Recorder != nil {
		r.Recorder.Eventf(obj, nil, typ, reason, "Replicate", "%s", msg)
	}
}

// ensureNamespace creates the copy's namespace if needed. It only creates:
// reading would make the remote manager's cache watch every namespace (memory,
// and list/watch rights the remote RBAC does not need to grant).
func ensureNamespace(ctx context.Context, c client.Client, ns string) error {
	if ns == "" {
		return nil
	}
	err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{remotecopy.InstalledByLabel: remotecopy.ControlledByValue}}})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// recreatedPrefix starts the Synced message of a re-created copy.
const recreatedPrefix = "copy re-created in "

// reasonAPIError counts failed writes to the management API server.
const reasonAPIError = "APIError"

// track records the replication state of src for the metrics.
func (r *Reconciler) track(src *unstructured.Unstructured, state string) {
	metrics.Tracker.Set(r.Identity, r.Kind.GVK.Kind, client.ObjectKeyFromObject(src).String(), src.GetGeneration(), state)
}

// failed records a failed attempt: the state and the error reason.
func (r *Reconciler) failed(src *unstructured.Unstructured, state, reason string) {
	r.track(src, state)
	metrics.ReplicationErrors.WithLabelValues(r.Kind.GVK.Kind, reason).Inc()
}

func (r *Reconciler) forget(key string) {
	r.recreating.Delete(key)
	metrics.Tracker.Forget(r.Identity, r.Kind.GVK.Kind, key)
}

// name returns the controller name of a kind.
func name(k remotecopy.Kind) string {
	return ControllerName + "-" + strings.ToLower(k.GVK.Kind) + "." + k.GVK.Group
}
