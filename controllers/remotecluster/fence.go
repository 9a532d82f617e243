package remotecluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/metrics"
	"github.com/clustershard/clustershard/internal/remotefence"
	"github.com/clustershard/clustershard/registry"
)

// raiseEpoch starts this replica's ownership epoch in the remote cluster,
// before its first write there (install, Helm, the remote manager), and
// records the outcome in RemoteFenced. The epoch's own writes pass this
// replica's fence like every other remote write. key (the kubeconfig's
// hash; "" for none) lets a raise skip what an earlier one with the same
// credentials learnt (remotefence.Memo).
func (r *Reconciler) raiseEpoch(ctx context.Context, rc *v1alpha1.RemoteCluster, cfg *rest.Config, key string) (remotefence.Epoch, error) {
	e, err := remotefence.Raise(ctx, registry.FencedConfig(cfg, rc.Name, r.Ownership), remotefence.Options{
		Cluster: rc.Name, EnforceWait: r.installTimeout(), Memo: &r.fenceMemo, Key: key,
	})
	if err != nil {
		r.forgetEpoch(rc.Name)
		return e, r.fail(rc, v1alpha1.ConditionRemoteFenced, v1alpha1.ReasonFenceFailed, fmt.Errorf("raise the ownership epoch in the remote cluster: %w", err))
	}
	r.setEpoch(rc.Name, e)
	r.setCondition(rc, v1alpha1.ConditionRemoteFenced, e.Enforced, e.Reason, e.Message)
	if e.Enforced {
		log.FromContext(ctx).V(1).Info("Ownership epoch raised in the remote cluster", "epoch", e.Value)
	} else {
		log.FromContext(ctx).Info("The remote API server does not enforce the ownership epoch; this replica fences its writes alone", "reason", e.Reason, "message", e.Message)
		r.event(rc, corev1.EventTypeWarning, e.Reason, "%s", e.Message)
	}
	return e, nil
}

// epochConfig returns cfg carrying the cluster's current epoch, if one was raised.
func (r *Reconciler) epochConfig(cluster string, cfg *rest.Config) *rest.Config {
	r.mu.Lock()
	e, ok := r.epochs[cluster]
	r.mu.Unlock()
	if !ok {
		return cfg
	}
	return e.Config(cfg)
}

// setEpoch remembers the epoch of cluster and keeps RemoteUnfenced counting
// the clusters of this replica without one.
func (r *Reconciler) setEpoch(cluster string, e remotefence.Epoch) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.epochs == nil {
		r.epochs = map[string]remotefence.Epoch{}
	}
	if old, ok := r.epochs[cluster]; ok && !old.Enforced {
		metrics.RemoteUnfenced.Dec()
	}
	if !e.Enforced {
		metrics.RemoteUnfenced.Inc()
	}
	r.epochs[cluster] = e
}

// epoch returns the ownership epoch raised for cluster, 0 when none is
// (not raised yet, or not enforced by the remote API server).
func (r *Reconciler) epoch(cluster string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.epochs[cluster].Value
}

// forgetEpoch drops the epoch of a cluster no longer worked on here.
func (r *Reconciler) forgetEpoch(cluster string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.epochs[cluster]; ok && !old.Enforced {
		metrics.RemoteUnfenced.Dec()
	}
	delete(r.epochs, cluster)
}

// restoreFenced writes RemoteFenced from the epoch remembered for the
// running manager (a status write that failed does not lose it).
func (r *Reconciler) restoreFenced(rc *v1alpha1.RemoteCluster) {
	r.mu.Lock()
	e, ok := r.epochs[rc.Name]
	r.mu.Unlock()
	if ok {
		r.setCondition(rc, v1alpha1.ConditionRemoteFenced, e.Enforced, e.Reason, e.Message)
	}
}

// Forget drops what the reconciler kept of a cluster's ownership period
// (its epoch, its install, the kubeconfig of its manager): the Notifier
// calls it for every lost cluster, so a later period starts from scratch.
func (r *Reconciler) Forget(cluster string) {
	r.mu.Lock()
	delete(r.spawned, cluster)
	delete(r.installed, cluster)
	delete(r.rotations, cluster)
	r.mu.Unlock()
	r.forgetEpoch(cluster)
}

// superseded reports whether the remote API server holds a later epoch of
// the cluster than the running manager's (raised by hand, by another
// management cluster using the same name, or by an owner this replica did
// not know of): every write of the manager is refused then, so it is
// restarted under a new epoch, with a Warning event, instead of failing
// silently. A read that fails says nothing.
func (r *Reconciler) superseded(ctx context.Context, rc *v1alpha1.RemoteCluster, cfg *rest.Config) bool {
	r.mu.Lock()
	e, ok := r.epochs[rc.Name]
	r.mu.Unlock()
	if !ok || !e.Enforced {
		return false
	}
	// A small read: bounded like a probe, so a remote that stopped
	// answering does not hold the reconcile for the request timeout.
	pctx, cancel := context.WithTimeout(ctx, r.probeTimeout())
	defer cancel()
	cur, ok, err := remotefence.Current(pctx, cfg, rc.Name)
	if err != nil || !ok || cur <= e.Value {
		return false
	}
	log.FromContext(ctx).Info("Ownership epoch superseded in the remote cluster; restarting the remote manager", "epoch", e.Value, "remoteEpoch", cur)
	r.event(rc, corev1.EventTypeWarning, v1alpha1.ReasonEpochSuperseded, "The remote cluster holds ownership epoch %d, above this manager's %d: restarting it under a new epoch", cur, e.Value)
	return true
}
