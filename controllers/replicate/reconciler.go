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
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/metrics"
	"github.com/clustershard/clustershard/internal/remotecopy"
	"github.com/clustershard/clustershard/registry"
)

// ControllerName is the base name of the per-kind controllers.
const ControllerName = "replicate"

// Ownership is what the controller needs from the shard coordinator.
type Ownership interface {
	// Owns reports whether this replica owns the cluster now.
	Owns(cluster string) bool
	// WithOwnership runs f while this replica owns the cluster.
	WithOwnership(cluster string, f func() error) error
	// Holds reports whether this replica still holds the cluster while it
	// may not write for it (a membership renewal answered late, within
	// its grace): the controller looks again after HeldRetry and writes
	// nothing meanwhile.
	Holds(cluster string) bool
	HeldRetry() time.Duration
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

// Registry is what the controller needs from the registry of remote
// managers (*registry.Registry).
type Registry interface {
	// Get returns the state of the cluster's remote manager.
	Get(cluster string) (registry.Info, bool)
	// WithClient runs f with the cluster's remote client while its manager
	// runs; every write of f passes the registry's gate and fence.
	WithClient(cluster string, f func(client.Client) error) error
}

// Reconciler replicates the sources of one kind.
type Reconciler struct {
	// Client is the management cluster's client.
	Client client.Client
	// Registry runs the remote managers.
	Registry Registry
	// Ownership is the shard coordinator.
	Ownership Ownership
	// Identity is this replica's name, written on remote copies.
	Identity string
	// Kind is the replicated kind.
	Kind remotecopy.Kind
	// UnownedGrace is how long a source's cluster may have no running
	// owner (a crash take-over) before the source says so (default
	// DefaultUnownedGrace; the replica passes twice the lease duration).
	UnownedGrace time.Duration
	// Recheck is how often a source whose RemoteCluster does not exist, or
	// has no running owner, is looked at again; events (a RemoteCluster
	// created, a manager running) wake it sooner (default DefaultRecheck).
	Recheck time.Duration
	// Workers is how many sources of the kind reconcile at once (default
	// DefaultWorkers); one source never reconciles twice at once.
	Workers int
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
	previous := src.GetAnnotations()[v1alpha1.ReplicatedToAnnotation]
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
	if !r.Ownership.Owns(target) && r.Ownership.Holds(target) {
		return ctrl.Result{RequeueAfter: r.Ownership.HeldRetry()}, nil // writes fenced for a moment
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
		r.failed(src, metrics.StateClusterNotReady, v1alpha1.ReasonClusterNotReady)
		// Not this source's failure: no backoff retries, which would spend
		// the workers and the management API server on every source of an
		// unhealthy cluster. The manager's next state change (running
		// again) re-checks every source of the cluster; the recheck
		// interval is the fallback.
		msg := fmt.Sprintf("remote cluster %q is %s here; retrying when it runs", cluster, state)
		if err := r.record(ctx, src, cluster, false, v1alpha1.ReasonClusterNotReady, msg); err != nil {
			return ctrl.Result{}, err
		}
		// Jittered and at low priority: the fallback re-checks of many
		// sources of one cluster do not come back at once, ahead of users'
		// changes.
		return ctrl.Result{RequeueAfter: wait.Jitter(r.recheck(), 0.2), Priority: ptr.To(handler.LowPriority)}, nil
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
	if errors.Is(err, registry.ErrFenced) && r.Ownership.Holds(cluster) {
		// Cut when validity ended, still held: not this source's failure.
		return ctrl.Result{RequeueAfter: r.Ownership.HeldRetry()}, nil
	}
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
			wrote, err := remotecopy.SetRemoteSynced(ctx, r.Client, r.Kind, src, false, v1alpha1.ReasonRecreating, msg)
			if wrote {
				r.event(src, corev1.EventTypeNormal, v1alpha1.ReasonRecreating, msg)
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
	} else if o, ok := remotecopy.ReadOutcome(src); ok && o.Reason == v1alpha1.ReasonSynced && o.SpecHash == remotecopy.SpecHash(src) && strings.HasPrefix(o.Message, recreatedPrefix+cluster+" ") {
		msg = o.Message // keep saying why this copy was re-created
	}
	if shape := r.Kind.Shape(); !shape.Status {
		msg += "; remote status not mirrored: " + shape.String()
	}
	if err := r.Ownership.WithOwnership(cluster, func() error { return r.showRemoteFinalizers(ctx, src, nil) }); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return ctrl.Result{}, r.report(ctx, src, cluster, true, v1alpha1.ReasonSynced, msg)
}

// ensureNamespace creates the copy's namespace if needed. It only creates:
// reading would make the remote manager's cache watch every namespace (memory,
// and list/watch rights the remote RBAC does not need to grant).
func ensureNamespace(ctx context.Context, c client.Client, ns string) error {
	if ns == "" {
		return nil
	}
	err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{v1alpha1.InstalledByLabel: v1alpha1.ControlledByValue}}})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// name returns the controller name of a kind.
func name(k remotecopy.Kind) string {
	return ControllerName + "-" + strings.ToLower(k.GVK.Kind) + "." + k.GVK.Group
}
