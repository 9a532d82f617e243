package shard

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/metrics"
)

// untracked tells whether this replica runs nothing for a cluster: no entry,
// or one that is free, and no acquisition on its way (whose write the cache
// may show before the acquisition has recorded it). An entry being released
// or lost is still in hand.
func (c *Coordinator) untracked(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.clusters[name]
	return (st == nil || st.phase == phaseFree) && !c.acquiring[name]
}

// sweep frees the cluster Leases that name this replica although it runs
// nothing for them: a release write that failed, an acquisition that
// committed but was not recorded, a loss by lapsed membership followed by a
// ring change, a previous life under the same name. Other replicas see a
// live holder there and would wait for ever. Clusters the ring assigns here
// are left to the acquisition; the others are released (deleted, for a
// cluster that no longer exists), or marked abandoned when the manager's
// stop timed out (others then take them after a lease duration unchanged). Each write is conditional on the version listed, so a
// Lease someone took meanwhile is never touched.
func (c *Coordinator) sweep(ctx context.Context, leases map[string]*coordinationv1.Lease, assign map[string]string, exists map[string]bool, selfValid bool) {
	c.forgetOwnWrites(leases)
	byLease := make(map[string]string, len(exists))
	for n := range exists {
		byLease[ClusterLeaseName(n)] = n
	}
	for _, l := range leases {
		// A known cluster's Lease is its by name, whatever its annotation
		// says (names do not collide); others by their annotation.
		name := byLease[l.Name]
		if name == "" {
			name = LeaseCluster(l)
		}
		if name == "" || holderOf(l) != c.o.self || l.Annotations[v1alpha1.AbandonedAnnotation] == "true" || !c.untracked(name) {
			continue
		}
		if c.supersededByUs(l) {
			continue // our own release, which the cache has not shown yet
		}
		if selfValid && exists[name] && assign[name] == c.o.Identity {
			continue // acquired again by this pass's rule 1
		}
		wctx, cancel := context.WithTimeout(ctx, c.o.RenewDeadline)
		l = l.DeepCopy()
		rv := l.ResourceVersion
		abandon, remove := c.unstopped(name) || c.inDoubt(name) != nil, !exists[name]
		var err error
		switch {
		case remove && !abandon:
			// The cluster is gone: so goes its Lease (a failed delete of a hand-over).
			err = c.o.Client.Delete(wctx, l, client.Preconditions{ResourceVersion: ptr.To(l.ResourceVersion)})
			c.countWrite("delete", "cluster")
		case abandon:
			if l.Annotations == nil {
				l.Annotations = map[string]string{}
			}
			l.Annotations[v1alpha1.AbandonedAnnotation] = "true"
			err = c.o.Client.Update(wctx, l) // on the listed version: never a Lease taken since
			c.countWrite("update", "cluster")
		default:
			if l.Annotations == nil {
				l.Annotations = map[string]string{}
			}
			l.Annotations[v1alpha1.ReleasedByAnnotation] = c.o.self
			l.Annotations[v1alpha1.HandoverReasonAnnotation] = v1alpha1.TransferRebalance
			delete(l.Annotations, v1alpha1.IncarnationAnnotation)
			l.Spec.HolderIdentity = ptr.To("")
			l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(c.o.Clock.Now()))
			err = c.o.Client.Update(wctx, l)
			c.countWrite("update", "cluster")
		}
		cancel()
		if err == nil {
			c.wroteOver(l.Name, rv)
		}
		switch {
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
			// Changed since the list. Judged again next pass.
			c.log.V(1).Info("Cluster Lease changed since listed; not freed", "cluster", name)
			continue
		case err != nil:
			c.log.Error(err, "Cannot free a cluster Lease that names this replica but that it does not run; retrying next pass", "cluster", name)
			continue
		}
		c.log.Info("Freed a cluster Lease that named this replica but that it did not run", "cluster", name, "abandoned", abandon, "deleted", remove && !abandon)
		c.o.journal(c.o.Clock.Now(), JournalReleased, name)
		if abandon {
			metrics.LeaseTransitions.WithLabelValues(metrics.LeaseAbandoned).Inc()
		} else {
			metrics.LeaseTransitions.WithLabelValues(metrics.LeaseReleased).Inc()
		}
	}
}
