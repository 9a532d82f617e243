package shard

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
)

// shutdown applies rule 5: leave the ring, hand every cluster over, then
// return so membership is released. The coordinator's passes go on meanwhile
// (this replica out of its own ring), so the hand-overs are paced by each
// successor's window (window.go) and the clusters not yet let go keep
// running here; once only the worst case of a hand-over is left of ctx's
// time (liftAt), or when the passes cannot read the Leases for a retry
// period, what is left is handed over at once.
func (c *Coordinator) shutdown(ctx context.Context) error {
	if c.crashed.Load() {
		return nil
	}
	c.mu.Lock()
	c.leaving = true
	owned := 0
	for _, st := range c.clusters {
		if st.phase == phaseOwned {
			owned++
		}
	}
	c.mu.Unlock()
	// A renewal answered late may yet make membership valid again: wait
	// for it within the grace, or the others would keep this replica in
	// their rings while it hands over.
	for !c.member.writable() && c.member.heldFor() > 0 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	if _, _, member := c.member.valid(); !member {
		c.log.Info("Not a member: nothing to mark leaving")
	} else if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cctx, cancel := c.call(ctx)
		defer cancel()
		return c.markLeaving(cctx)
	}); err != nil {
		c.log.Error(err, "Cannot mark membership as leaving")
	}
	c.log.Info("Shutting down: handing every cluster over", "clusters", owned, "successor", c.successor(), "window", c.o.HandoverWindow)
	lift := c.liftAt(ctx)
	tick := time.NewTicker(min(c.o.RetryPeriod/4, 250*time.Millisecond))
	defer tick.Stop()
	lastRead := time.Now()
	for {
		switch {
		case c.windowLifted.Load():
		case !time.Now().Before(lift):
			c.windowLifted.Store(true)
			c.log.Info("Handing over every cluster left at once: the rest of the shutdown timeout is what their drain, stop and release may take", "left", time.Until(lift).Round(time.Millisecond))
		case time.Since(lastRead) > c.o.RetryPeriod:
			c.windowLifted.Store(true)
			c.log.Info("Handing over every cluster left at once: the passes cannot read the Leases", "since", lastRead)
		}
		if c.step(ctx) {
			lastRead = time.Now()
		}
		if c.windowLifted.Load() {
			c.handOverAll(ctx)
		}
		// An acquisition started before the shutdown may still end with
		// the cluster ours: it is handed over like the others.
		c.mu.Lock()
		n := len(c.clusters) + len(c.acquiring)
		c.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("hand-over did not finish: %w", ctx.Err())
		case <-c.kick:
		case <-tick.C:
		}
	}
}

// liftAt is when a shutdown stops pacing: the worst case of one hand-over
// (drain and stop, each within StopTimeout, then the release within a renew
// deadline) before ctx's deadline, so even clusters let go last are
// released in time. A shutdown timeout shorter than that is not paced.
func (c *Coordinator) liftAt(ctx context.Context) time.Time {
	deadline, ok := ctx.Deadline()
	if !ok {
		return time.Now().Add(time.Duration(1<<62 - 1))
	}
	return deadline.Add(-(2*c.o.StopTimeout + c.o.RenewDeadline))
}

// handOverAll starts the hand-over of every cluster still owned (a
// shutdown's last resort: the passes could not, or time runs out).
func (c *Coordinator) handOverAll(ctx context.Context) {
	var owned []string
	c.mu.Lock()
	for n, st := range c.clusters {
		if st.phase == phaseOwned {
			owned = append(owned, n)
		}
	}
	c.mu.Unlock()
	successor := c.successor()
	for _, n := range owned {
		c.handOver(ctx, n, false, v1alpha1.TransferShutdown, "", successor)
	}
}

// rejoin clears the leaving mark a previous incarnation with this identity
// (the same StatefulSet pod name) left on the membership Lease: the elector
// keeps a Lease's annotations when it acquires it, and others would keep this
// replica out of their rings for good.
func (c *Coordinator) rejoin(ctx context.Context, members []coordinationv1.Lease) {
	for i := range members {
		l := &members[i]
		if l.Name != MemberLeaseName(c.o.Identity) || holderOf(l) != c.o.self || l.Annotations[v1alpha1.LeavingAnnotation] != "true" {
			continue
		}
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+v1alpha1.LeavingAnnotation+`":null}}}`))
		cctx, cancel := c.call(ctx)
		err := c.o.Client.Patch(cctx, &coordinationv1.Lease{ObjectMeta: leaseMeta(c.o.Namespace, l.Name)}, patch)
		cancel()
		c.countWrite("patch", "membership")
		if err != nil {
			c.log.Error(err, "Cannot clear the leaving mark of a previous incarnation")
			return
		}
		c.log.Info("Cleared the leaving mark of a previous incarnation from the membership Lease")
	}
}

// markLeaving annotates the membership Lease: others take this replica out of
// their rings but still respect its Leases until it releases them.
// Only the process holding it marks it: another incarnation with this
// identity that never joined leaves the live one in the rings.
func (c *Coordinator) markLeaving(ctx context.Context) error {
	var l coordinationv1.Lease
	if err := c.o.Client.Get(ctx, types.NamespacedName{Namespace: c.o.Namespace, Name: MemberLeaseName(c.o.Identity)}, &l); err != nil {
		return err
	}
	if holderOf(&l) != c.o.self {
		return fmt.Errorf("membership Lease %s is held by %q, not this process (%s)", l.Name, holderOf(&l), c.o.self)
	}
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[v1alpha1.LeavingAnnotation] = "true"
	err := c.o.Client.Update(ctx, &l) // on the version read: never a Lease another process took since
	c.countWrite("update", "membership")
	return err
}
