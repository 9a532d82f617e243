package shard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/metrics"
)

// stopped records whether the stop of a cluster's manager ended in time.
func (c *Coordinator) stopped(name string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.notStopped[name] = true
	} else {
		delete(c.notStopped, name)
	}
}

// unstopped tells whether a cluster's manager did not stop in time when it
// was last lost.
func (c *Coordinator) unstopped(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.notStopped[name]
}

// ManagerRunning is told by the registry that the remote manager of name
// runs here; the first time after an acquisition it observes the hand-over
// duration and the time the cluster went without a manager.
func (c *Coordinator) ManagerRunning(name string) {
	c.o.journal(c.o.Clock.Now(), JournalRunning, name)
	c.mu.Lock()
	st := c.clusters[name]
	var assigned, unmanaged time.Time
	var tr *Transfer
	written := ""
	if st != nil && st.phase == phaseOwned {
		assigned, unmanaged, tr, written = st.assigned, st.unmanagedSince, st.transfer, st.written
		st.assigned, st.unmanagedSince, st.transfer = time.Time{}, time.Time{}, nil
	}
	c.mu.Unlock()
	if tr != nil {
		if tr.From != "" && slices.Contains(releaseReasons, tr.Reason) {
			// The previous owner let go of it and paces its next
			// hand-overs by this mark (window.go).
			go c.markRunning(name, written)
		}
		if !unmanaged.IsZero() {
			tr.WithoutManager = max(c.o.Clock.Since(unmanaged), 0)
		}
		metrics.Transfers.WithLabelValues(tr.Reason).Inc()
		if c.o.Transferred != nil {
			c.o.Transferred(*tr)
		}
	}
	if assigned.IsZero() && unmanaged.IsZero() {
		return
	}
	c.log.Info("Remote manager running", "cluster", name, "sinceAssigned", c.o.Clock.Since(assigned), "withoutManager", c.o.Clock.Since(unmanaged))
	if !assigned.IsZero() {
		metrics.HandoverDuration.Observe(c.o.Clock.Since(assigned).Seconds())
	}
	if !unmanaged.IsZero() {
		metrics.UnmanagedDuration.Observe(max(c.o.Clock.Since(unmanaged), 0).Seconds())
	}
}

// lose stops a cluster whose Lease is not ours to write any more.
func (c *Coordinator) lose(ctx context.Context, name, reason string) {
	st := c.setPhase(name, phaseOwned, phaseLosing)
	if st == nil {
		// A cluster being drained for a hand-over is lost as well: its
		// drain ends at its next check and leaves the stop to this.
		if st = c.setPhase(name, phaseDraining, phaseLosing); st == nil {
			return
		}
	}
	c.o.journal(c.o.Clock.Now(), JournalLost, name) // no new write starts after this
	c.log.Info("Cluster lost", "cluster", name, "reason", reason)
	metrics.LeaseTransitions.WithLabelValues(metrics.LeaseLost).Inc()
	go func() {
		sctx, cancel := c.stopBudget(ctx)
		err := c.stop(sctx, name, st)
		c.stopped(name, err)
		if err != nil {
			c.log.Error(err, "Remote manager did not stop in time", "cluster", name)
		}
		cancel()
		c.o.journal(c.o.Clock.Now(), JournalStopped, name)
		c.done(name, st)
	}()
}

// stop stops the cluster's manager (Handler.Lost) and waits for its
// WithOwnership callbacks, both within ctx (StopTimeout): the callbacks'
// new writes are fenced already, and stopping the manager makes their
// remote calls fail, so they end sooner. An error (a callback or the
// manager still running) makes the caller abandon the Lease rather than
// release it.
func (c *Coordinator) stop(ctx context.Context, name string, st *cluster) error {
	drained := make(chan error, 1)
	go func() { drained <- st.users.wait(ctx) }()
	var lost error
	if lost = st.handler.lock(ctx); lost == nil {
		lost = c.o.Handler.Lost(ctx, name)
		st.handler.unlock()
	}
	return errors.Join(lost, <-drained)
}

// handOver applies rule 3: drain, stop (bounded), then release the Lease,
// or leave it abandoned to expire when the stop timed out. to is the
// successor the ring names ("" for none or unknown), whose hand-over window
// (window.go) the cluster counts against until it runs there; successor
// says whether any replica will take the cluster.
func (c *Coordinator) handOver(ctx context.Context, name string, deleted bool, reason, to string, successor bool) <-chan struct{} {
	finished := make(chan struct{})
	if brokenHandOver && c.Owns(name) {
		c.releaseLease(ctx, name, false, deleted, reason) // release before stop: wrong on purpose
		time.Sleep(time.Second)
	}
	st := c.setPhase(name, phaseOwned, phaseDraining)
	if st == nil {
		close(finished)
		return finished
	}
	c.lettingGo(name, to)
	c.log.Info("Handing cluster over", "cluster", name, "reason", reason, "successor", to)
	go func() {
		defer close(finished)
		c.drain(ctx, name, st)
		if !c.advance(name, st, phaseDraining, phaseReleasing) {
			return // lost while draining: lose stops it and never releases
		}
		c.o.journal(c.o.Clock.Now(), JournalReleasing, name) // no new write starts after this
		sctx, cancel := c.stopBudget(ctx)
		err := c.stop(sctx, name, st)
		c.stopped(name, err)
		if err == nil {
			// A write still on its way (a spawn's epoch raise or install
			// runs outside the manager) is answered or cut within its
			// fence deadline: wait for it, within the stop budget, rather
			// than abandon the Lease at once and make the next owner wait a
			// lease duration.
			err = c.awaitWrites(sctx, name)
		} else {
			err = fmt.Errorf("remote manager did not stop in time: %w", err)
		}
		cancel()
		c.o.journal(c.o.Clock.Now(), JournalStopped, name)
		wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), c.o.RenewDeadline)
		defer wcancel()
		if err != nil {
			c.log.Error(err, "Leaving the Lease to expire instead of releasing it", "cluster", name)
			c.releaseLease(wctx, name, true, false, reason)
			metrics.LeaseTransitions.WithLabelValues(metrics.LeaseAbandoned).Inc()
		} else {
			if !successor && !deleted {
				c.orphaned(wctx, name, reason)
			}
			c.releaseLease(wctx, name, false, deleted, reason)
			metrics.LeaseTransitions.WithLabelValues(metrics.LeaseReleased).Inc()
		}
		c.done(name, st)
	}()
	return finished
}

// drain lets the WithOwnership callbacks of a cluster being handed over
// finish, within the stop budget, while their writes still pass the fence:
// an install, upgrade or uninstall on its way ends as it would have (a
// release deployed, not a revision the hand-over failed), and the successor
// finds nothing to repair. No new callback starts (Owns is false). The
// Lease stays held and membership valid meanwhile, so no other replica can
// take the cluster: the work is still this replica's alone. A callback
// still running when the budget ends is cut by the fence that closes next;
// the successor recovers what it left (helmrelease.Ensure).
func (c *Coordinator) drain(ctx context.Context, name string, st *cluster) {
	n := st.users.count()
	if n == 0 {
		return
	}
	began := c.o.Clock.Now()
	c.log.Info("Letting the work under way finish before handing the cluster over", "cluster", name, "callbacks", n)
	sctx, cancel := c.stopBudget(ctx)
	defer cancel()
	if err := st.users.wait(sctx); err != nil {
		c.log.Info("Work under way did not finish within the stop timeout: its writes are fenced from now on", "cluster", name, "reason", err.Error())
		metrics.HandoverDrains.WithLabelValues(metrics.DrainCut).Inc()
		return
	}
	c.log.Info("Work under way finished", "cluster", name, "after", c.o.Clock.Since(began).Round(time.Millisecond))
	metrics.HandoverDrains.WithLabelValues(metrics.DrainFinished).Inc()
}

// orphaned tells Options.Orphaned that cluster is handed over with no
// successor, while this replica still holds its Lease and its membership is
// valid (so no other replica can own it yet).
func (c *Coordinator) orphaned(ctx context.Context, name, reason string) {
	if c.o.Orphaned == nil {
		return
	}
	if _, _, ok := c.member.valid(); !ok {
		return
	}
	why := "its last owner " + c.o.self + " handed it over with no other replica on the ring (" + reason + ")"
	if err := c.o.Orphaned(ctx, name, why); err != nil {
		c.log.Error(err, "Cannot mark the cluster as owned by no one", "cluster", name)
	}
}

// successor reports whether the last pass saw another replica on the ring,
// which would take this replica's clusters.
func (c *Coordinator) successor() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for m, inRing := range c.view.Members {
		if inRing && m != c.o.Identity {
			return true
		}
	}
	return false
}

// releaseLease writes the Lease free (holder cleared), abandoned, or deletes
// it for a deleted cluster; only if it is still ours. reason (a
// TransferReason) tells the next holder why.
func (c *Coordinator) releaseLease(ctx context.Context, name string, abandon, remove bool, reason string) {
	key := types.NamespacedName{Namespace: c.o.Namespace, Name: ClusterLeaseName(name)}
	if !abandon && !remove {
		// The cached Lease first: one round trip less on the hand-over's
		// critical path. The write is conditional on the version read, so a
		// stale cache only makes it fail (then the fresh read below decides).
		var cached coordinationv1.Lease
		if err := c.o.Reader.Get(ctx, key, &cached); err == nil && holderOf(&cached) == c.o.self {
			err := c.writeRelease(ctx, name, &cached, reason)
			if !apierrors.IsConflict(err) {
				if err != nil {
					c.log.Error(err, "Cannot release cluster Lease", "cluster", name) // the sweep releases it later
				}
				return
			}
		}
	}
	var l coordinationv1.Lease
	if err := c.o.Client.Get(ctx, key, &l); err != nil {
		return
	}
	if holderOf(&l) != c.o.self {
		return
	}
	if !abandon && !remove {
		if err := c.writeRelease(ctx, name, &l, reason); err != nil {
			c.log.Error(err, "Cannot release cluster Lease", "cluster", name)
		}
		return
	}
	var err error
	replaced := l.ResourceVersion
	switch {
	case remove:
		err = c.o.Client.Delete(ctx, &l, client.Preconditions{ResourceVersion: ptr.To(l.ResourceVersion)})
		c.countWrite("delete", "cluster")
	case abandon:
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[v1alpha1.AbandonedAnnotation] = "true"
		l.Annotations[v1alpha1.HandoverReasonAnnotation] = reason
		err = c.o.Client.Update(ctx, &l)
		c.countWrite("update", "cluster")
	}
	if err != nil {
		c.log.Error(err, "Cannot release cluster Lease", "cluster", name)
		return
	}
	c.wroteOver(l.Name, replaced)
	detail := ""
	if abandon {
		detail = JournalAbandoned
	}
	c.o.journalDetail(c.o.Clock.Now(), JournalReleased, name, detail)
}

// writeRelease writes Lease l, held by this process, free (holder cleared),
// on the version read, telling the next holder who released it and why.
func (c *Coordinator) writeRelease(ctx context.Context, name string, l *coordinationv1.Lease, reason string) error {
	l = l.DeepCopy()
	l.Spec.HolderIdentity = ptr.To("")
	l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(c.o.Clock.Now()))
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	delete(l.Annotations, v1alpha1.IncarnationAnnotation)
	l.Annotations[v1alpha1.ReleasedByAnnotation] = c.o.self
	l.Annotations[v1alpha1.HandoverReasonAnnotation] = reason
	replaced := l.ResourceVersion
	err := c.o.Client.Update(ctx, l)
	c.countWrite("update", "cluster")
	if err != nil {
		return err
	}
	c.wroteOver(l.Name, replaced)
	c.o.journal(c.o.Clock.Now(), JournalReleased, name)
	c.releasedLease(name)
	return nil
}

func (c *Coordinator) setPhase(name string, from, to phase) *cluster {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.clusters[name]
	if st == nil || st.phase != from {
		return nil
	}
	st.phase = to
	return st
}

// advance moves st, if it is still the cluster's state, from one phase to
// another, and reports whether it did.
func (c *Coordinator) advance(name string, st *cluster, from, to phase) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.clusters[name] != st || st.phase != from {
		return false
	}
	st.phase = to
	return true
}

func (c *Coordinator) done(name string, st *cluster) {
	c.mu.Lock()
	if c.clusters[name] == st && st.phase != phaseOwned {
		delete(c.clusters, name)
	}
	c.mu.Unlock()
	c.Kick()
}
