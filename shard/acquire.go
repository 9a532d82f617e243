package shard

import (
	"context"
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/metrics"
)

// startAcquisitions starts the acquisition of each free cluster (each is
// its own Lease, written with optimistic concurrency on the version judged
// free), at most acquireParallelism in flight at once, and returns once
// every one has started: a replica taking over many clusters does not write
// their Leases one after another, and the pass does not wait for their
// answers, so the next pass can take a Lease released meanwhile at once
// instead of after this pass's slowest write; with every slot taken, the
// rest wait for the pass that the end of an acquisition kicks. What each
// acquisition needs of the observer is read here, on the pass's goroutine;
// a cluster whose acquisition is on its way is busy for the passes
// (acquireAssigned) and tracked for the sweep, which never frees its Lease.
// Their outcomes are collected by the next pass (collectAcquisitions).
func (c *Coordinator) startAcquisitions(ctx context.Context, names []string, leases map[string]*coordinationv1.Lease, epoch uint64, live map[string]bool) {
	for _, n := range names {
		select {
		case c.acquireSlots <- struct{}{}:
		default:
			// Every slot is taken: the rest wait for a later pass, which
			// the end of each acquisition kicks, so this pass goes on to
			// its hand-overs and releases instead of waiting for a write.
			return
		}
		l := leases[ClusterLeaseName(n)]
		prep := c.prepareAcquire(n, l, c.wanted[n], live)
		c.mu.Lock()
		if c.crashed.Load() || c.acquireClosed {
			c.mu.Unlock()
			<-c.acquireSlots
			return
		}
		c.acquiring[n] = true
		c.mu.Unlock()
		go func() {
			err := c.acquire(ctx, n, l, epoch, prep)
			c.mu.Lock()
			delete(c.acquiring, n)
			c.acquired = append(c.acquired, acquisition{name: n, err: err})
			c.mu.Unlock()
			<-c.acquireSlots
			c.Kick()
		}()
	}
}

// acquisition is the outcome of one acquisition, for the next pass.
type acquisition struct {
	name string
	err  error
}

// collectAcquisitions records the outcomes of the acquisitions that ended
// since the last pass (step goroutine only: it owns acquireErr and wanted).
func (c *Coordinator) collectAcquisitions() {
	c.mu.Lock()
	done := c.acquired
	c.acquired = nil
	c.mu.Unlock()
	for _, a := range done {
		if a.err != nil {
			c.log.V(1).Info("Cluster Lease not acquired", "cluster", a.name, "reason", a.err.Error())
			c.acquireErr[a.name] = a.err
			continue
		}
		delete(c.acquireErr, a.name)
		delete(c.wanted, a.name)
	}
}

// cacheBehind reports whether the cached Lease of a cluster we hold is only
// the version our acquisition replaced (the cache has not caught up with our
// write yet), and either our write is recent or a fresh read shows us still
// holding it: the next pass decides. A Lease really changed by someone else
// is lost at once: the cache shows a version other than the one replaced,
// or the fresh read shows it gone or held by another.
//
// Keeping the cluster without a read is safe only for a while: a Lease
// changed under a live holder after our write is taken by nobody until it
// has been unchanged for a lease duration since (rule 1), so nobody else
// can hold it within a lease duration of our write's sending. The window
// keeps a renew deadline of that as margin; past it, the fresh read decides,
// and a read that fails loses the cluster. (Lost on a failed read at once, a
// pass cut short by shutdown left the Lease neither released nor handed
// over, and the next owner waited a lease duration and more. Read within the
// window too, a pass that had just acquired clusters read each of them
// again, one after the other, while every acquisition after it waited: up
// to 1.7 s a pass in the drill's rolling restart.)
func (c *Coordinator) cacheBehind(ctx context.Context, name string, cached *coordinationv1.Lease) bool {
	c.mu.Lock()
	st := c.clusters[name]
	replaced, sent := "", time.Time{}
	if st != nil {
		replaced, sent = st.replaced, st.sent
	}
	c.mu.Unlock()
	if st == nil || (cached == nil) != (replaced == "") || (cached != nil && cached.ResourceVersion != replaced) {
		return false
	}
	if c.o.Clock.Since(sent) < c.o.LeaseDuration-c.o.RenewDeadline {
		// Within the window nobody else can hold it (below): a fresh read
		// would prove nothing more, and, one per cluster just acquired, it
		// would hold this pass, and every acquisition after it, behind a
		// round trip each.
		return true
	}
	var fresh coordinationv1.Lease
	cctx, cancel := c.call(ctx)
	defer cancel()
	if err := c.o.Client.Get(cctx, types.NamespacedName{Namespace: c.o.Namespace, Name: ClusterLeaseName(name)}, &fresh); err != nil {
		return false // gone, or a read that fails past the window
	}
	return holderOf(&fresh) == c.o.self
}

// holderOf is the holder identity of a Lease: a membership Lease's holder
// as the elector wrote it, a cluster Lease's bare replica name joined with
// its v1alpha1.IncarnationAnnotation (the bare name alone for a Lease written by a
// version without incarnations).
func holderOf(l *coordinationv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	h := *l.Spec.HolderIdentity
	if inc := l.Annotations[v1alpha1.IncarnationAnnotation]; h != "" && inc != "" && !strings.Contains(h, incarnationSeparator) {
		return HolderIdentity(h, inc)
	}
	return h
}

// LeaseHolder is the holder identity of a membership or cluster Lease (see
// HolderIdentity), "" when it is free.
func LeaseHolder(l *coordinationv1.Lease) string { return holderOf(l) }

// free applies rule 1: the Lease is free when absent, released, ours from an
// earlier life, abandoned and unchanged for a lease duration, or held by a
// replica whose membership has not changed for a lease duration (confirmed
// by a fresh read, so a stale cache never makes a live holder look dead).
func (c *Coordinator) free(ctx context.Context, name string, l *coordinationv1.Lease, live map[string]bool, now time.Time) bool {
	holder := holderOf(l)
	if last := c.obs.lastHolder(name); last != "" && last != holder && last != c.o.self && live[last] &&
		(l == nil || l.Annotations[v1alpha1.ReleasedByAnnotation] != last) {
		// Deleted, cleared or overwritten by someone other than the live
		// replica that held it: that replica may still run the cluster
		// until it notices. Free only once unchanged for a lease duration.
		if !c.obs.unchangedFor(name, now) {
			return false
		}
		if holder == "" {
			return true
		}
	}
	switch {
	case l == nil, holder == "", holder == c.o.self:
		return true
	case l.Annotations[v1alpha1.AbandonedAnnotation] == "true":
		return c.obs.unchangedFor(l.Name, now)
	case live[holder]:
		return false
	}
	memberLease := MemberLeaseName(HolderName(holder))
	if last := c.obs.lastHolder(memberLease); last != "" && last != holder {
		// Replaced by another process of its name: no read needed until
		// the holder's lease duration has passed since its last renewal.
		if !c.obs.replacedFor(memberLease, holder, now) {
			return false
		}
	} else if !c.obs.unchangedFor(memberLease, now) {
		return false
	}
	var fresh coordinationv1.Lease
	cctx, cancel := c.call(ctx)
	err := c.o.Client.Get(cctx, types.NamespacedName{Namespace: c.o.Namespace, Name: memberLease}, &fresh)
	cancel()
	switch {
	case apierrors.IsNotFound(err):
		return true
	case err != nil:
		return false
	}
	// The fresh read is stamped when it returned (see step).
	read := c.o.Clock.Now()
	changed := c.obs.observe(&fresh, read)
	if h := holderOf(&fresh); h != "" && h != holder {
		// Another process of that replica holds its membership Lease (a
		// restart, or this one). Its elector waited the lease duration of
		// the Lease's spec, whole seconds (5 s for 5.99 s), which may be
		// shorter than the holder's renew deadline: judge by when the
		// holder was last seen renewing, against the timings it published.
		return c.obs.replacedFor(memberLease, holder, read)
	}
	return read.Sub(changed) > c.obs.leaseFor(memberLease)
}

// preparedAcquisition is what an acquisition needs of the pass that judged
// the Lease free: read from the observer on the pass's goroutine.
type preparedAcquisition struct {
	assigned, unmanagedSince time.Time
	expired                  bool
	transfer                 *Transfer
}

// prepareAcquire reads what the acquisition of cluster name, whose Lease l
// was judged free, reports once its manager runs.
func (c *Coordinator) prepareAcquire(name string, l *coordinationv1.Lease, assigned time.Time, live map[string]bool) preparedAcquisition {
	since, expired := c.unmanagedSince(l, assigned, live)
	return preparedAcquisition{assigned: assigned, unmanagedSince: since, expired: expired, transfer: c.transferFrom(name, l)}
}

// acquire takes the cluster Lease (create, or update on the version read) and
// then spawns (rule 2: spawn after acquire). startAcquisitions runs it for
// several clusters at once, off the pass's goroutine: it reads nothing of
// the observer.
func (c *Coordinator) acquire(ctx context.Context, name string, l *coordinationv1.Lease, epoch uint64, prep preparedAcquisition) error {
	assigned, unmanagedSince, expired, tr := prep.assigned, prep.unmanagedSince, prep.expired, prep.transfer
	// A pass may have waited for a slot: write nothing once membership
	// left the epoch the Lease was judged free in.
	if _, e, ok := c.member.valid(); !ok || e != epoch {
		return fmt.Errorf("membership lapsed before acquiring")
	}
	replaced := ""
	if l != nil {
		replaced = l.ResourceVersion
	}
	now := metav1.NewMicroTime(c.o.Clock.Now())
	// The write is not cut by the end of ctx (a SIGTERM): a write cut on
	// its way may still land, leaving a Lease that names us while we track
	// nothing, and a shutdown that returned meanwhile left its successor
	// to wait a lease duration. Bounded by the call's timeout, it ends
	// with an answer, and a cluster acquired is handed over like the rest.
	wctx := context.WithoutCancel(ctx)
	var err error
	if l == nil {
		l = &coordinationv1.Lease{ObjectMeta: leaseMeta(c.o.Namespace, ClusterLeaseName(name))}
		l.Labels = map[string]string{v1alpha1.LeaseRoleLabel: "cluster"}
		l.Annotations = map[string]string{v1alpha1.ClusterAnnotation: name, v1alpha1.IncarnationAnnotation: c.o.Incarnation}
		l.Spec = coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To(c.o.Identity), AcquireTime: &now, RenewTime: &now,
			LeaseDurationSeconds: ptr.To(int32(c.o.LeaseDuration / time.Second)), LeaseTransitions: ptr.To(int32(0)),
		}
		cctx, cancel := c.call(wctx)
		err = c.o.Client.Create(cctx, l)
		cancel()
		c.countWrite("create", "cluster")
	} else {
		l = l.DeepCopy()
		if holderOf(l) != c.o.self {
			l.Spec.LeaseTransitions = ptr.To(ptr.Deref(l.Spec.LeaseTransitions, 0) + 1)
		}
		delete(l.Annotations, v1alpha1.AbandonedAnnotation)
		delete(l.Annotations, v1alpha1.ReleasedByAnnotation)
		delete(l.Annotations, v1alpha1.HandoverReasonAnnotation)
		delete(l.Annotations, v1alpha1.ManagerRunningAnnotation) // a mark of an earlier tenure, maybe ours
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[v1alpha1.ClusterAnnotation] = name // a Lease edited by hand names its cluster again
		if l.Labels == nil {
			l.Labels = map[string]string{}
		}
		l.Labels[v1alpha1.LeaseRoleLabel] = "cluster"
		l.Annotations[v1alpha1.IncarnationAnnotation] = c.o.Incarnation
		l.Spec.HolderIdentity = ptr.To(c.o.Identity) // bare: see v1alpha1.IncarnationAnnotation
		l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
		l.Spec.LeaseDurationSeconds = ptr.To(int32(c.o.LeaseDuration / time.Second))
		cctx, cancel := c.call(wctx)
		err = c.o.Client.Update(cctx, l) // optimistic concurrency on the version we judged
		cancel()
		c.countWrite("update", "cluster")
	}
	if err != nil {
		fresh, lerr := c.landed(wctx, name, err)
		if fresh == nil {
			return lerr
		}
		l = fresh
	}
	// The write may have taken long: own the cluster only if membership is
	// still valid in the epoch we judged it in (and, in tests, the process
	// was not "killed" meanwhile).
	if _, e, ok := c.member.valid(); !ok || e != epoch {
		return fmt.Errorf("membership lapsed while acquiring")
	}
	if c.crashed.Load() {
		return fmt.Errorf("crashed while acquiring")
	}
	c.mu.Lock()
	closed := c.acquireClosed
	c.mu.Unlock()
	if closed {
		return fmt.Errorf("shut down while acquiring")
	}
	c.o.journal(c.o.Clock.Now(), JournalOwned, name) // before authority begins
	st := &cluster{phase: phaseOwned, epoch: epoch, since: c.o.Clock.Now(), handler: newHandlerLock()}
	c.mu.Lock()
	delete(c.notStopped, name) // the registry waits for a manager still stopping before it spawns
	if old := c.clusters[name]; old != nil {
		st = old
		st.phase, st.epoch, st.since = phaseOwned, epoch, c.o.Clock.Now()
	}
	st.assigned, st.unmanagedSince, st.replaced, st.sent, st.transfer, st.written = assigned, unmanagedSince, replaced, now.Time, tr, l.ResourceVersion
	c.clusters[name] = st
	c.mu.Unlock()
	c.log.Info("Cluster acquired", "cluster", name, "fromExpiredHolder", expired)
	metrics.LeaseTransitions.WithLabelValues(metrics.LeaseAcquired).Inc()
	if expired {
		metrics.LeaseTransitions.WithLabelValues(metrics.LeaseExpired).Inc()
	}
	go func() {
		_ = st.handler.lock(context.Background()) // a stop before it is bounded itself
		defer st.handler.unlock()
		if c.awaitWritable(name) && !c.crashed.Load() {
			c.o.Handler.Acquired(ctx, name)
		}
	}()
	return nil
}

// awaitWritable reports whether cluster is owned and writable, waiting
// while it is held but its writes are fenced (a renewal answered late,
// within the grace): the spawn writes at once, and skipping it would leave
// a cluster held with no manager.
func (c *Coordinator) awaitWritable(name string) bool {
	for c.Holds(name) && !c.Owns(name) {
		time.Sleep(min(c.member.heldFor(), 10*time.Millisecond) + time.Millisecond)
	}
	return c.Owns(name)
}

// landed settles a write whose answer was not a decision (a timeout, a
// broken connection, a 5xx): it may have landed. A fresh read that shows
// the Lease held by us is our write (nobody else writes our identity, with
// our incarnation), and the cluster is ours; anything else is the error.
// Without it, a Lease naming us was left for the sweep to find, and a
// shutdown meanwhile returned before it was released.
func (c *Coordinator) landed(ctx context.Context, name string, err error) (*coordinationv1.Lease, error) {
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsInvalid(err) ||
		apierrors.IsForbidden(err) || apierrors.IsNotFound(err) || apierrors.IsBadRequest(err) {
		return nil, err // a decision: nothing landed
	}
	var fresh coordinationv1.Lease
	cctx, cancel := c.call(ctx)
	defer cancel()
	if gerr := c.o.Client.Get(cctx, types.NamespacedName{Namespace: c.o.Namespace, Name: ClusterLeaseName(name)}, &fresh); gerr != nil {
		return nil, fmt.Errorf("%w (and reading the Lease again to see whether it landed: %w)", err, gerr)
	}
	if holderOf(&fresh) != c.o.self {
		return nil, err
	}
	c.log.Info("Cluster Lease write ended without an answer but landed", "cluster", name, "error", err.Error())
	return &fresh, nil
}

// unmanagedSince estimates, on the local clock, since when the cluster of
// Lease l has had no running manager, and whether its holder expired: from
// the release (or abandonment) of the Lease as this replica saw it, from the
// last seen renewal of a dead holder's membership (an upper bound: it may
// have died later), or from the first sight of a cluster without a Lease.
func (c *Coordinator) unmanagedSince(l *coordinationv1.Lease, assigned time.Time, live map[string]bool) (time.Time, bool) {
	holder := holderOf(l)
	switch {
	case l == nil:
		if assigned.IsZero() {
			return c.o.Clock.Now(), false
		}
		return assigned, false
	case holder == "" || holder == c.o.self || l.Annotations[v1alpha1.AbandonedAnnotation] == "true":
		return c.obs.changedAt(l.Name), false
	case !live[holder]:
		return c.obs.changedAt(MemberLeaseName(HolderName(holder))), true
	}
	return c.o.Clock.Now(), false
}

func leaseMeta(namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name}
}

// closeAcquisitions stops acquisitions from starting or recording a
// cluster, and waits until those on their way have ended (each is bounded
// by its call's timeout).
func (c *Coordinator) closeAcquisitions() {
	c.mu.Lock()
	c.acquireClosed = true
	c.mu.Unlock()
	for {
		c.mu.Lock()
		n := len(c.acquiring)
		c.mu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
