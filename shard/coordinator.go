package shard

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/internal/metrics"
)

type phase int

const (
	phaseFree      phase = iota // not owned here
	phaseOwned                  // Lease held, manager spawned or spawning
	phaseReleasing              // handing over: stopping, then releasing the Lease
	phaseLosing                 // lost: stopping, the Lease is not ours to write
)

// cluster is this replica's view of one cluster it owns or is giving up.
type cluster struct {
	phase phase
	epoch uint64
	since time.Time
	// handler serialises the Handler calls of the cluster; users counts
	// its WithOwnership callbacks. A stop waits for both at most
	// StopTimeout.
	handler handlerLock
	users   callbacks

	// Until its manager first runs after an acquisition: when the ring
	// assigned the cluster here and since when it had no running manager.
	assigned, unmanagedSince time.Time
	// replaced is the Lease version our acquisition replaced ("" when it
	// created the Lease): a cache still showing it has not seen our write.
	replaced string
}

// Coordinator is the shard coordinator of one replica: it holds the
// replica's membership Lease, computes the ring over live members and
// acquires, hands over and releases cluster Leases by the rules of the design
// (DESIGN.md section 3). It implements registry.Fence.
type Coordinator struct {
	o      Options
	log    logr.Logger
	member *membership
	obs    *observer
	limit  *rate.Limiter
	kick   chan struct{}
	writes atomic.Int64

	wanted map[string]time.Time // step goroutine only: when a cluster was first seen assigned here

	mu       sync.Mutex
	clusters map[string]*cluster
	leaving  bool
	view     View
	ring     *Ring
	ready    atomic.Bool // a first pass was made
	caughtUp atomic.Bool // every assigned cluster acquired once (or CatchUpTimeout passed)
	crashed  atomic.Bool // test hook: behave as a dead process
	// unownedSince is the last pass's Unowned, for the next; acquireErr
	// the last failed acquisition of each cluster (step only).
	unownedSince map[string]Unowned
	acquireErr   map[string]error
	// timings are the timings last logged per membership Lease that
	// publishes other timings than ours.
	timings map[string]string
	// notStopped are clusters whose manager's stop timed out when they were
	// lost: their Lease is marked abandoned, never released (sweep).
	notStopped map[string]bool
	// doubt are the remote writes per cluster that may still land (see
	// WriteBegan): their Lease is abandoned, never released.
	doubt map[string]*writeDoubt
}

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

// New returns a Coordinator; Run starts it.
func New(o Options) (*Coordinator, error) {
	if err := o.defaults(); err != nil {
		return nil, fmt.Errorf("shard coordinator: %w", err)
	}
	c := &Coordinator{
		o:        o,
		log:      o.Logger,
		obs:      newObserver(o.LeaseDuration, o.RenewDeadline),
		limit:    rate.NewLimiter(rate.Limit(o.MovesPerSecond), max(1, int(o.MovesPerSecond))),
		kick:     make(chan struct{}, 1),
		clusters: map[string]*cluster{}, notStopped: map[string]bool{}, timings: map[string]string{}, acquireErr: map[string]error{},
		doubt: map[string]*writeDoubt{}, wanted: map[string]time.Time{},
	}
	c.member = &membership{o: &c.o, onLapse: c.Kick, writes: func(verb string) { c.countWrite(verb, "membership") }}
	c.o.Logger = c.log
	return c, nil
}

// View is what the coordinator saw on its last pass, for status and metrics.
type View struct {
	// Members are the live replicas; true for those in the ring (not leaving).
	Members map[string]bool
	// Holders are the cluster Leases' holders, by cluster name.
	Holders map[string]Holding
	// Unowned are the clusters no replica may run a manager for.
	Unowned map[string]Unowned
}

// Holding is one cluster Lease's holder and when it acquired the Lease.
type Holding struct {
	// Holder is the replica named by the Lease.
	Holder string
	// Incarnation is the Lease's holder identity: the one process of that
	// replica that holds it (see HolderIdentity).
	Incarnation string
	// Since is the Lease's acquire time, as written by the holder.
	Since time.Time
}

// Observed returns the view of the last pass. Its maps must not be modified.
func (c *Coordinator) Observed() View {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.view
}

// Assigned reports whether the last ring maps name to this replica (by plain
// consistent hashing, without load bounds). The replicate controller uses it
// to pick the one replica that reports a source naming an unknown cluster.
func (c *Coordinator) Assigned(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ring != nil && c.ring.Owner(name) == c.o.Identity
}

// joined returns when the current membership epoch began.
func (c *Coordinator) joined() time.Time {
	c.member.mu.Lock()
	defer c.member.mu.Unlock()
	return c.member.since
}

// Kick asks for a prompt re-evaluation (on a Lease or RemoteCluster change).
func (c *Coordinator) Kick() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// OwnershipWrites returns how many API writes (attempts, successful or not)
// ownership has cost so far.
func (c *Coordinator) OwnershipWrites() int64 { return c.writes.Load() }

func (c *Coordinator) countWrite(verb, resource string) {
	c.writes.Add(1)
	metrics.OwnershipWrites.WithLabelValues(verb, resource).Inc()
}

// Ready reports whether the coordinator holds its membership, has made its
// first pass and has caught up: acquired every cluster the ring assigned to
// it, once, or waited CatchUpTimeout for that. It is the replica's readiness,
// which paces a StatefulSet rollout.
func (c *Coordinator) Ready() bool {
	_, _, ok := c.member.valid()
	return ok && c.ready.Load() && c.caughtUp.Load()
}

// catchUp latches caughtUp once every cluster in assign that maps to this
// replica is owned here, or once CatchUpTimeout has passed since joining.
func (c *Coordinator) catchUp(assign map[string]string) {
	if c.caughtUp.Load() {
		return
	}
	missing := 0
	c.mu.Lock()
	for n, m := range assign {
		if st := c.clusters[n]; m == c.o.Identity && (st == nil || st.phase != phaseOwned) {
			missing++
		}
	}
	c.mu.Unlock()
	switch {
	case missing == 0:
		c.log.Info("Caught up: every assigned cluster acquired", "after", time.Since(c.joined()).Round(time.Millisecond))
	case time.Since(c.joined()) >= c.o.CatchUpTimeout:
		c.log.Info("Not every assigned cluster acquired within the catch-up timeout; ready anyway", "missing", missing, "timeout", c.o.CatchUpTimeout)
	default:
		return
	}
	c.caughtUp.Store(true)
}

// Owns reports whether this replica owns cluster now (Lease held in the
// current membership epoch, membership valid, not handing it over).
func (c *Coordinator) Owns(name string) bool {
	_, err := c.WriteDeadline(name)
	return err == nil
}

// Owned returns the clusters this replica owns now.
func (c *Coordinator) Owned() []string {
	c.mu.Lock()
	names := make([]string, 0, len(c.clusters))
	for n := range c.clusters {
		names = append(names, n)
	}
	c.mu.Unlock()
	owned := names[:0]
	for _, n := range names {
		if c.Owns(n) {
			owned = append(owned, n)
		}
	}
	return owned
}

// WriteDeadline is the fencing check of rule 4, on the local monotonic clock:
// a write for cluster may be sent until the returned instant, and not at all
// if an error is returned.
func (c *Coordinator) WriteDeadline(name string) (time.Time, error) {
	until, epoch, ok := c.member.valid()
	if !ok {
		return time.Time{}, ErrNotMember
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.clusters[name]
	if st == nil || st.phase != phaseOwned || st.epoch != epoch {
		return time.Time{}, fmt.Errorf("%w: %q", ErrNotOwner, name)
	}
	return until, nil
}

// WithOwnership runs f while this replica owns cluster; callbacks of one
// cluster may run at once. A hand-over or loss waits for f at most
// StopTimeout (f's new writes are fenced from its start, and the manager
// stops meanwhile); past that the Lease is abandoned, not released, so
// others take it only after a lease duration. It returns ErrNotOwner
// without calling f when the cluster is not owned.
func (c *Coordinator) WithOwnership(name string, f func() error) error {
	c.mu.Lock()
	st := c.clusters[name]
	c.mu.Unlock()
	if st == nil {
		return fmt.Errorf("%w: %q", ErrNotOwner, name)
	}
	// Counted before the check: a hand-over that begins after it waits for
	// f (at most StopTimeout, then it abandons the Lease).
	st.users.enter()
	defer st.users.leave()
	if !c.Owns(name) {
		return fmt.Errorf("%w: %q", ErrNotOwner, name)
	}
	return f()
}

// Run holds membership and coordinates ownership until ctx ends, then hands
// every cluster over (rule 5) within shutdownTimeout and releases membership.
func (c *Coordinator) Run(ctx context.Context, shutdownTimeout time.Duration) error {
	memberCtx, stopMember := context.WithCancel(context.WithoutCancel(ctx))
	memberDone := make(chan struct{})
	go func() {
		defer close(memberDone)
		c.member.run(memberCtx)
	}()
	ticker := time.NewTicker(c.o.RetryPeriod / 2)
	defer ticker.Stop()
	for {
		c.step(ctx)
		c.ready.Store(true)
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
			err := c.shutdown(sctx)
			cancel()
			stopMember()
			<-memberDone
			c.member.lost()
			return err
		case <-ticker.C:
		case <-c.kick:
		}
	}
}

// listLeases reads the membership and cluster Leases.
func (c *Coordinator) listLeases(ctx context.Context) (members []coordinationv1.Lease, clusters map[string]*coordinationv1.Lease, err error) {
	var list coordinationv1.LeaseList
	cctx, cancel := c.call(ctx)
	defer cancel()
	if err := c.o.Reader.List(cctx, &list, client.InNamespace(c.o.Namespace), client.HasLabels{RoleLabel}); err != nil {
		return nil, nil, err
	}
	clusters = map[string]*coordinationv1.Lease{}
	for i := range list.Items {
		l := &list.Items[i]
		switch l.Labels[RoleLabel] {
		case "member":
			members = append(members, *l)
		case "cluster":
			clusters[l.Name] = l
		}
	}
	return members, clusters, nil
}

// step makes one pass of the ownership rules.
func (c *Coordinator) step(ctx context.Context) {
	if c.crashed.Load() {
		return
	}
	// Every exit path reports what is owned now: a fenced replica owns nothing.
	defer func() { metrics.OwnedClusters.Set(float64(len(c.Owned()))) }()
	members, leases, err := c.listLeases(ctx)
	if err != nil {
		c.log.Error(err, "Cannot list Leases")
		c.fenceInvalid()
		return
	}
	// Stamped when the read returned, not when it was sent: a renewal that
	// landed during a slow List must not look older than it is, or the
	// margin between lease duration and renew deadline shrinks by the delay.
	now := time.Now()
	names, err := c.o.Clusters()
	if err != nil {
		c.log.Error(err, "Cannot list RemoteClusters")
		return
	}
	live, leaving := c.obs.members(members, now)
	c.noteTimings(members)
	view := View{Members: map[string]bool{}, Holders: map[string]Holding{}}
	for m := range live {
		view.Members[HolderName(m)] = !leaving[m]
	}
	c.obs.absent(leases, now)
	for _, l := range leases {
		c.obs.observe(l, now)
		if h, cl := holderOf(l), LeaseCluster(l); h != "" && cl != "" {
			hold := Holding{Holder: HolderName(h), Incarnation: h}
			if l.Spec.AcquireTime != nil {
				hold.Since = l.Spec.AcquireTime.Time
			}
			view.Holders[cl] = hold
		}
	}
	c.mu.Lock()
	c.view = view
	c.mu.Unlock()
	_, epoch, valid := c.member.valid()

	c.mu.Lock()
	selfLeaving := c.leaving
	c.mu.Unlock()
	if valid && !selfLeaving {
		c.rejoin(ctx, members)
	}
	ringMembers := make([]string, 0, len(live)+1)
	for m := range live {
		if !leaving[m] && HolderName(m) != c.o.Identity {
			ringMembers = append(ringMembers, HolderName(m))
		}
	}
	if valid && !selfLeaving {
		ringMembers = append(ringMembers, c.o.Identity)
	}
	metrics.RingMembers.Set(float64(len(ringMembers)))
	if valid {
		metrics.Fenced.Set(0)
	} else {
		metrics.Fenced.Set(1)
	}
	metrics.Clusters.Set(float64(len(names)))
	metrics.UnownedClusters.Set(float64(c.unowned(names, leases, live, valid, now)))
	ring, err := NewRing(ringMembers, c.o.Ring)
	if err != nil {
		c.log.Error(err, "Invalid ring options")
		return
	}
	assign := ring.Assign(names)
	c.mu.Lock()
	c.ring = ring
	c.mu.Unlock()
	exists := make(map[string]bool, len(names))
	for _, n := range names {
		exists[n] = true
	}

	c.fenceInvalid()
	// Clusters we hold: keep, lose or hand over.
	c.mu.Lock()
	var handovers, losses []string
	for n, st := range c.clusters {
		if st.phase != phaseOwned {
			continue
		}
		lease := leases[ClusterLeaseName(n)]
		switch {
		case lease == nil || holderOf(lease) != c.o.self:
			losses = append(losses, n) // deleted or taken by hand: not ours any more
		case !exists[n] || assign[n] != c.o.Identity:
			handovers = append(handovers, n)
		}
	}
	c.mu.Unlock()
	for _, n := range losses {
		if c.cacheBehind(ctx, n, leases[ClusterLeaseName(n)]) {
			continue
		}
		c.lose(ctx, n, "Lease changed by someone else")
	}
	for _, n := range handovers {
		if !exists[n] || c.limit.Allow() {
			c.handOver(ctx, n, !exists[n])
		}
	}
	c.sweep(ctx, leases, assign, exists, valid && !selfLeaving)
	if !valid || selfLeaving || time.Since(c.joined()) < c.o.RetryPeriod {
		// Take nothing in the first retry period of membership: replicas
		// starting together see each other first instead of one of them
		// grabbing every cluster and handing most of them over again.
		return
	}
	// Clusters assigned to us: acquire the free ones.
	var free []string
	for _, n := range names {
		if assign[n] != c.o.Identity {
			delete(c.wanted, n)
			continue
		}
		if _, ok := c.wanted[n]; !ok {
			c.wanted[n] = now
		}
		c.mu.Lock()
		st := c.clusters[n]
		busy := st != nil && st.phase != phaseFree
		c.mu.Unlock()
		if !busy && c.free(ctx, ClusterLeaseName(n), leases[ClusterLeaseName(n)], live, now) {
			free = append(free, n)
		}
	}
	for n, err := range c.acquireAll(ctx, free, leases, epoch, live) {
		if err != nil {
			c.log.V(1).Info("Cluster Lease not acquired", "cluster", n, "reason", err.Error())
			c.acquireErr[n] = err
			continue
		}
		delete(c.acquireErr, n)
		delete(c.wanted, n)
	}
	c.catchUp(assign)
}

// acquireParallelism bounds the Lease writes of one pass in flight at once.
const acquireParallelism = 8

// acquireAll acquires the free clusters in parallel (each is its own Lease,
// written with optimistic concurrency on the version judged free), so a
// replica taking over many clusters does not write their Leases one after
// another. It returns each cluster's error.
func (c *Coordinator) acquireAll(ctx context.Context, names []string, leases map[string]*coordinationv1.Lease, epoch uint64, live map[string]bool) map[string]error {
	errs := make([]error, len(names))
	sem := make(chan struct{}, acquireParallelism)
	var wg sync.WaitGroup
	for i, n := range names {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = c.acquire(ctx, n, leases[ClusterLeaseName(n)], epoch, c.wanted[n], live)
		})
	}
	wg.Wait()
	out := make(map[string]error, len(names))
	for i, n := range names {
		out[n] = errs[i]
	}
	return out
}

// unowned counts the clusters no replica may be running a manager for: the
// Lease is absent or released, or its holder's membership has not been seen
// renewed within the renew deadline, after which the holder has fenced
// itself by rule 4 (its validity ends a renew deadline after its last
// renewal was sent, which is before this replica saw it).
func (c *Coordinator) unowned(names []string, leases map[string]*coordinationv1.Lease, live map[string]bool, selfValid bool, now time.Time) int {
	seen := map[string]Unowned{}
	for _, name := range names {
		h := holderOf(leases[ClusterLeaseName(name)])
		why := ""
		switch {
		case h == "":
			why = "its Lease is free and no replica has acquired it"
			if err := c.acquireErr[name]; err != nil {
				why += " (the last acquisition by " + c.o.Identity + " failed: " + err.Error() + ")"
			}
		case h == c.o.self:
			if !selfValid || c.untracked(name) {
				why = "its Lease names " + c.o.self + ", which does not run it" // fenced, or forgotten
			}
		case !live[h] || !c.obs.changedWithin(MemberLeaseName(HolderName(h)), now, c.obs.renewFor(MemberLeaseName(HolderName(h)))):
			why = "its Lease names " + h + ", whose membership is not renewed"
		}
		if why == "" {
			continue
		}
		u := Unowned{Since: now, Why: why}
		if prev, ok := c.unownedSince[name]; ok {
			u.Since = prev.Since
		}
		seen[name] = u
	}
	c.unownedSince = seen
	for name := range c.acquireErr {
		if _, ok := seen[name]; !ok {
			delete(c.acquireErr, name) // owned, or no longer a cluster
		}
	}
	c.mu.Lock()
	c.view.Unowned = seen
	c.mu.Unlock()
	return len(seen)
}

// Unowned is a cluster no replica may run a manager for, as this replica
// judged it on consecutive passes.
type Unowned struct {
	// Since is the first pass of the current run of passes that judged it
	// unowned (local clock).
	Since time.Time
	// Why says what keeps it unowned, in words for a condition.
	Why string
}

// UnownedCluster reports whether the last pass judged cluster unowned (no
// replica may run its manager), since when and why.
func (c *Coordinator) UnownedCluster(name string) (Unowned, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	u, ok := c.view.Unowned[name]
	return u, ok
}

// Reporter reports whether this replica reports on clusters nobody runs:
// the valid member with the smallest name in its view, so one replica
// writes each such condition.
func (c *Coordinator) Reporter() bool {
	if _, _, ok := c.member.valid(); !ok {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for m := range c.view.Members {
		if m < c.o.Identity {
			return false
		}
	}
	return true
}

// cacheBehind reports whether the cached Lease of a cluster we hold is only
// the version our acquisition replaced (the cache has not caught up with our
// write yet) and a fresh read shows us still holding it. A Lease really
// changed by someone else is lost at once.
func (c *Coordinator) cacheBehind(ctx context.Context, name string, cached *coordinationv1.Lease) bool {
	c.mu.Lock()
	st := c.clusters[name]
	replaced := ""
	if st != nil {
		replaced = st.replaced
	}
	c.mu.Unlock()
	if st == nil || (cached == nil) != (replaced == "") || (cached != nil && cached.ResourceVersion != replaced) {
		return false
	}
	var fresh coordinationv1.Lease
	cctx, cancel := c.call(ctx)
	defer cancel()
	if err := c.o.Client.Get(cctx, types.NamespacedName{Namespace: c.o.Namespace, Name: ClusterLeaseName(name)}, &fresh); err != nil {
		return false
	}
	return holderOf(&fresh) == c.o.self
}

// holderOf is the holder identity of a Lease: a membership Lease's holder
// as the elector wrote it, a cluster Lease's bare replica name joined with
// its IncarnationAnnotation (the bare name alone for a Lease written by a
// version without incarnations).
func holderOf(l *coordinationv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	h := *l.Spec.HolderIdentity
	if inc := l.Annotations[IncarnationAnnotation]; h != "" && inc != "" && !strings.Contains(h, incarnationSeparator) {
		return HolderIdentity(h, inc)
	}
	return h
}

// LeaseHolder is the holder identity of a membership or cluster Lease (see
// HolderIdentity), "" when it is free.
func LeaseHolder(l *coordinationv1.Lease) string { return holderOf(l) }

// fenceInvalid stops every cluster owned in an older epoch or without valid
// membership (rule 4). Those Leases stay as they are: membership lapsed, so
// others may already consider them free.
func (c *Coordinator) fenceInvalid() {
	_, epoch, valid := c.member.valid()
	c.mu.Lock()
	var stale []string
	for n, st := range c.clusters {
		if st.phase == phaseOwned && (!valid || st.epoch != epoch) {
			stale = append(stale, n)
		}
	}
	c.mu.Unlock()
	for _, n := range stale {
		c.lose(context.Background(), n, "membership not valid")
	}
}

// free applies rule 1: the Lease is free when absent, released, ours from an
// earlier life, abandoned and unchanged for a lease duration, or held by a
// replica whose membership has not changed for a lease duration (confirmed
// by a fresh read, so a stale cache never makes a live holder look dead).
func (c *Coordinator) free(ctx context.Context, name string, l *coordinationv1.Lease, live map[string]bool, now time.Time) bool {
	holder := holderOf(l)
	if last := c.obs.lastHolder(name); last != "" && last != holder && last != c.o.self && live[last] &&
		(l == nil || l.Annotations[ReleasedByAnnotation] != last) {
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
	case l.Annotations[AbandonedAnnotation] == "true":
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
	read := time.Now()
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

// acquire takes the cluster Lease (create, or update on the version read) and
// then spawns (rule 2: spawn after acquire). acquireAll runs it for several
// clusters at once: it only reads the step's observer and wanted map.
func (c *Coordinator) acquire(ctx context.Context, name string, l *coordinationv1.Lease, epoch uint64, assigned time.Time, live map[string]bool) error {
	unmanagedSince, expired := c.unmanagedSince(l, assigned, live)
	replaced := ""
	if l != nil {
		replaced = l.ResourceVersion
	}
	now := metav1.NewMicroTime(time.Now())
	var err error
	if l == nil {
		l = &coordinationv1.Lease{ObjectMeta: leaseMeta(c.o.Namespace, ClusterLeaseName(name))}
		l.Labels = map[string]string{RoleLabel: "cluster"}
		l.Annotations = map[string]string{ClusterAnnotation: name, IncarnationAnnotation: c.o.Incarnation}
		l.Spec = coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To(c.o.Identity), AcquireTime: &now, RenewTime: &now,
			LeaseDurationSeconds: ptr.To(int32(c.o.LeaseDuration / time.Second)), LeaseTransitions: ptr.To(int32(0)),
		}
		cctx, cancel := c.call(ctx)
		err = c.o.Client.Create(cctx, l)
		cancel()
		c.countWrite("create", "cluster")
	} else {
		l = l.DeepCopy()
		if holderOf(l) != c.o.self {
			l.Spec.LeaseTransitions = ptr.To(ptr.Deref(l.Spec.LeaseTransitions, 0) + 1)
		}
		delete(l.Annotations, AbandonedAnnotation)
		delete(l.Annotations, ReleasedByAnnotation)
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[ClusterAnnotation] = name // a Lease edited by hand names its cluster again
		if l.Labels == nil {
			l.Labels = map[string]string{}
		}
		l.Labels[RoleLabel] = "cluster"
		l.Annotations[IncarnationAnnotation] = c.o.Incarnation
		l.Spec.HolderIdentity = ptr.To(c.o.Identity) // bare: see IncarnationAnnotation
		l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
		l.Spec.LeaseDurationSeconds = ptr.To(int32(c.o.LeaseDuration / time.Second))
		cctx, cancel := c.call(ctx)
		err = c.o.Client.Update(cctx, l) // optimistic concurrency on the version we judged
		cancel()
		c.countWrite("update", "cluster")
	}
	if err != nil {
		return err
	}
	// The write may have taken long: own the cluster only if membership is
	// still valid in the epoch we judged it in.
	if _, e, ok := c.member.valid(); !ok || e != epoch {
		return fmt.Errorf("membership lapsed while acquiring")
	}
	c.o.journal(time.Now(), JournalOwned, name) // before authority begins
	st := &cluster{phase: phaseOwned, epoch: epoch, since: time.Now(), handler: newHandlerLock()}
	c.mu.Lock()
	delete(c.notStopped, name) // the registry waits for a manager still stopping before it spawns
	if old := c.clusters[name]; old != nil {
		st = old
		st.phase, st.epoch, st.since = phaseOwned, epoch, time.Now()
	}
	st.assigned, st.unmanagedSince, st.replaced = assigned, unmanagedSince, replaced
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
		if c.Owns(name) {
			c.o.Handler.Acquired(ctx, name)
		}
	}()
	return nil
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
			return time.Now(), false
		}
		return assigned, false
	case holder == "" || holder == c.o.self || l.Annotations[AbandonedAnnotation] == "true":
		return c.obs.changedAt(l.Name), false
	case !live[holder]:
		return c.obs.changedAt(MemberLeaseName(HolderName(holder))), true
	}
	return time.Now(), false
}

// ManagerRunning is told by the registry that the remote manager of name
// runs here; the first time after an acquisition it observes the hand-over
// duration and the time the cluster went without a manager.
func (c *Coordinator) ManagerRunning(name string) {
	c.o.journal(time.Now(), JournalRunning, name)
	c.mu.Lock()
	st := c.clusters[name]
	var assigned, unmanaged time.Time
	if st != nil && st.phase == phaseOwned {
		assigned, unmanaged = st.assigned, st.unmanagedSince
		st.assigned, st.unmanagedSince = time.Time{}, time.Time{}
	}
	c.mu.Unlock()
	if assigned.IsZero() && unmanaged.IsZero() {
		return
	}
	c.log.Info("Remote manager running", "cluster", name, "sinceAssigned", time.Since(assigned), "withoutManager", time.Since(unmanaged))
	if !assigned.IsZero() {
		metrics.HandoverDuration.Observe(time.Since(assigned).Seconds())
	}
	if !unmanaged.IsZero() {
		metrics.UnmanagedDuration.Observe(max(time.Since(unmanaged), 0).Seconds())
	}
}

// lose stops a cluster whose Lease is not ours to write any more.
func (c *Coordinator) lose(ctx context.Context, name, reason string) {
	st := c.setPhase(name, phaseOwned, phaseLosing)
	if st == nil {
		return
	}
	c.o.journal(time.Now(), JournalLost, name) // no new write starts after this
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
		c.o.journal(time.Now(), JournalStopped, name)
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

// handOver applies rule 3: stop (bounded), then release the Lease, or leave
// it abandoned to expire when the stop timed out.
func (c *Coordinator) handOver(ctx context.Context, name string, deleted bool) <-chan struct{} {
	finished := make(chan struct{})
	if brokenHandOver && c.Owns(name) {
		c.releaseLease(ctx, name, false, deleted) // release before stop: wrong on purpose
		time.Sleep(time.Second)
	}
	st := c.setPhase(name, phaseOwned, phaseReleasing)
	if st == nil {
		close(finished)
		return finished
	}
	c.o.journal(time.Now(), JournalReleasing, name) // no new write starts after this
	c.log.Info("Handing cluster over", "cluster", name)
	go func() {
		defer close(finished)
		sctx, cancel := c.stopBudget(ctx)
		err := c.stop(sctx, name, st)
		c.stopped(name, err)
		cancel()
		c.o.journal(time.Now(), JournalStopped, name)
		wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), c.o.RenewDeadline)
		defer wcancel()
		if err != nil {
			err = fmt.Errorf("remote manager did not stop in time: %w", err)
		} else {
			err = c.inDoubt(name) // a write that may still land after a release
		}
		if err != nil {
			c.log.Error(err, "Leaving the Lease to expire instead of releasing it", "cluster", name)
			c.releaseLease(wctx, name, true, false)
			metrics.LeaseTransitions.WithLabelValues(metrics.LeaseAbandoned).Inc()
		} else {
			c.releaseLease(wctx, name, false, deleted)
			metrics.LeaseTransitions.WithLabelValues(metrics.LeaseReleased).Inc()
		}
		c.done(name, st)
	}()
	return finished
}

// releaseLease writes the Lease free (holder cleared), abandoned, or deletes
// it for a deleted cluster; only if it is still ours.
func (c *Coordinator) releaseLease(ctx context.Context, name string, abandon, remove bool) {
	var l coordinationv1.Lease
	if err := c.o.Client.Get(ctx, types.NamespacedName{Namespace: c.o.Namespace, Name: ClusterLeaseName(name)}, &l); err != nil {
		return
	}
	if holderOf(&l) != c.o.self {
		return
	}
	var err error
	switch {
	case remove:
		err = c.o.Client.Delete(ctx, &l, client.Preconditions{ResourceVersion: ptr.To(l.ResourceVersion)})
		c.countWrite("delete", "cluster")
	case abandon:
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[AbandonedAnnotation] = "true"
		err = c.o.Client.Update(ctx, &l)
		c.countWrite("update", "cluster")
	default:
		l.Spec.HolderIdentity = ptr.To("")
		l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		delete(l.Annotations, IncarnationAnnotation)
		l.Annotations[ReleasedByAnnotation] = c.o.self
		err = c.o.Client.Update(ctx, &l)
		c.countWrite("update", "cluster")
	}
	if err != nil {
		c.log.Error(err, "Cannot release cluster Lease", "cluster", name)
		return
	}
	c.o.journal(time.Now(), JournalReleased, name)
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

func (c *Coordinator) done(name string, st *cluster) {
	c.mu.Lock()
	if c.clusters[name] == st && st.phase != phaseOwned {
		delete(c.clusters, name)
	}
	c.mu.Unlock()
	c.Kick()
}

// shutdown applies rule 5: leave the ring, hand over every cluster at once,
// then return so membership is released.
func (c *Coordinator) shutdown(ctx context.Context) error {
	if c.crashed.Load() {
		return nil
	}
	c.mu.Lock()
	c.leaving = true
	var owned []string
	for n, st := range c.clusters {
		if st.phase == phaseOwned {
			owned = append(owned, n)
		}
	}
	c.mu.Unlock()
	if _, _, member := c.member.valid(); !member {
		c.log.Info("Not a member: nothing to mark leaving")
	} else if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cctx, cancel := c.call(ctx)
		defer cancel()
		return c.markLeaving(cctx)
	}); err != nil {
		c.log.Error(err, "Cannot mark membership as leaving")
	}
	c.log.Info("Shutting down: handing every cluster over", "clusters", len(owned))
	var waits []<-chan struct{}
	for _, n := range owned {
		waits = append(waits, c.handOver(ctx, n, false))
	}
	for _, w := range waits {
		select {
		case <-w:
		case <-ctx.Done():
			return fmt.Errorf("hand-over did not finish: %w", ctx.Err())
		}
	}
	// Wait for hand-overs started before shutdown.
	for {
		c.mu.Lock()
		n := len(c.clusters)
		c.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("hand-over did not finish: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// rejoin clears the leaving mark a previous incarnation with this identity
// (the same StatefulSet pod name) left on the membership Lease: the elector
// keeps a Lease's annotations when it acquires it, and others would keep this
// replica out of their rings for good.
func (c *Coordinator) rejoin(ctx context.Context, members []coordinationv1.Lease) {
	for i := range members {
		l := &members[i]
		if l.Name != MemberLeaseName(c.o.Identity) || holderOf(l) != c.o.self || l.Annotations[LeavingAnnotation] != "true" {
			continue
		}
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+LeavingAnnotation+`":null}}}`))
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
	l.Annotations[LeavingAnnotation] = "true"
	err := c.o.Client.Update(ctx, &l) // on the version read: never a Lease another process took since
	c.countWrite("update", "membership")
	return err
}

func leaseMeta(namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name}
}
