package shard

import (
	"context"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/metrics"
)

// A pass of the coordinator (step) reads the world once (observe), decides
// from that reading alone (plan: the ring, which held clusters to lose or
// hand over, whether this pass may take any), then acts (apply: Lease writes
// and Handler calls, in the order the rules of doc.go require).

// reading is what one pass read.
type reading struct {
	// now is when the Lease list returned.
	now time.Time
	// members are the membership Leases; leases the cluster Leases by name.
	members []coordinationv1.Lease
	leases  map[string]*coordinationv1.Lease
	// names are the RemoteClusters; exists the same as a set.
	names  []string
	exists map[string]bool
	// live are the members not expired by locally observed time (holder
	// identities); leaving those of them that announced they leave;
	// cordoned those kept out of the ring (clustershard drain).
	live, leaving, cordoned map[string]bool
	// placements are the RemoteClusters' placement constraints.
	placements map[string]Placement
	// epoch and valid are this replica's membership epoch and whether its
	// membership holds (rule 4: valid, or within the grace after validity
	// waiting for a renewal's answer); writable whether it is valid, so its
	// writes may go; selfLeaving whether it is shutting down.
	epoch       uint64
	valid       bool
	writable    bool
	selfLeaving bool
	// selfCordoned says whether this replica's membership Lease is cordoned.
	selfCordoned bool
}

// active reports whether this replica counts as a member in this pass.
func (o *reading) active() bool { return o.valid && !o.selfLeaving }

// inRing reports whether this replica is on the ring in this pass: active
// and not cordoned.
func (o *reading) inRing() bool { return o.active() && !o.selfCordoned }

// plan is what one pass decided from its reading.
type plan struct {
	// ring and assign are the ring over the active, uncordoned members and
	// its assignment of every RemoteCluster; notes explain placements.
	ring          *Ring
	assign, notes map[string]string
	// losses are held clusters whose Lease is gone or changed by someone
	// else; handovers held clusters the ring moved away (or deleted), and
	// why (a TransferReason).
	losses, handovers []string
	why               map[string]string
	// take says whether this pass may acquire: this replica is on the ring.
	take bool
}

// listLeases reads the membership and cluster Leases.
func (c *Coordinator) listLeases(ctx context.Context) (members []coordinationv1.Lease, clusters map[string]*coordinationv1.Lease, err error) {
	var list coordinationv1.LeaseList
	cctx, cancel := c.call(ctx)
	defer cancel()
	if err := c.o.Reader.List(cctx, &list, client.InNamespace(c.o.Namespace), client.HasLabels{v1alpha1.LeaseRoleLabel}); err != nil {
		return nil, nil, err
	}
	clusters = map[string]*coordinationv1.Lease{}
	for i := range list.Items {
		l := &list.Items[i]
		switch l.Labels[v1alpha1.LeaseRoleLabel] {
		case "member":
			members = append(members, *l)
		case "cluster":
			clusters[l.Name] = l
		}
	}
	return members, clusters, nil
}

// step makes one pass of the ownership rules and reports whether it could
// read the world.
func (c *Coordinator) step(ctx context.Context) bool {
	if c.crashed.Load() {
		return false
	}
	// Every exit path reports what is owned now: a fenced replica owns nothing.
	defer func() { metrics.OwnedClusters.Set(float64(len(c.Owned()))) }()
	t := newPassTimer()
	c.collectAcquisitions() // also in passes that take nothing (cordoned, settling, leaving)
	obs, ok := c.observe(ctx)
	if !ok {
		return false
	}
	p, err := c.plan(obs)
	t.mark(metrics.PassObserve)
	if err != nil {
		c.log.Error(err, "Invalid ring options")
		return false
	}
	c.apply(ctx, obs, p, t)
	c.endPass(t, c.o.RetryPeriod)
	return true
}

// observe reads the Leases and RemoteClusters, updates the locally observed
// times of every Lease and publishes the view (holders, members) that
// status and the controllers read. It writes nothing but metrics.
func (c *Coordinator) observe(ctx context.Context) (*reading, bool) {
	members, leases, err := c.listLeases(ctx)
	if err != nil {
		c.log.Error(err, "Cannot list Leases")
		c.fenceInvalid()
		return nil, false
	}
	// Stamped when the read returned, not when it was sent: a renewal that
	// landed during a slow List must not look older than it is, or the
	// margin between lease duration and renew deadline shrinks by the delay.
	o := &reading{now: c.o.Clock.Now(), members: members, leases: leases}
	if o.names, err = c.o.Clusters(); err != nil {
		c.log.Error(err, "Cannot list RemoteClusters")
		return nil, false
	}
	o.exists = make(map[string]bool, len(o.names))
	for _, n := range o.names {
		o.exists[n] = true
	}
	if c.o.Placements != nil {
		if o.placements, err = c.o.Placements(); err != nil {
			c.log.Error(err, "Cannot read the RemoteClusters' placements")
			return nil, false
		}
	}
	o.live, o.leaving, o.cordoned = c.obs.members(members, o.now)
	o.selfCordoned = o.cordoned[c.o.self]
	if o.selfCordoned {
		metrics.Cordoned.Set(1)
	} else {
		metrics.Cordoned.Set(0)
	}
	c.noteTimings(members)
	view := View{Members: map[string]bool{}, Holders: map[string]Holding{}, Cordoned: map[string]bool{}}
	for m := range o.live {
		view.Members[HolderName(m)] = !o.leaving[m] && !o.cordoned[m]
		if o.cordoned[m] {
			view.Cordoned[HolderName(m)] = true
		}
	}
	c.obs.absent(leases, o.now)
	c.retire(leases, o.now)
	for _, l := range leases {
		c.obs.observe(l, o.now)
		if h, cl := holderOf(l), LeaseCluster(l); h != "" && cl != "" {
			hold := Holding{Holder: HolderName(h), Incarnation: h}
			if l.Spec.AcquireTime != nil {
				hold.Since = l.Spec.AcquireTime.Time
			}
			view.Holders[cl] = hold
		}
	}
	_, _, o.writable = c.member.valid()
	o.epoch, o.valid = c.member.held()
	c.mu.Lock()
	c.view = view
	o.selfLeaving = c.leaving
	c.mu.Unlock()

	metrics.Clusters.Set(float64(len(o.names)))
	if o.writable {
		metrics.Fenced.Set(0)
	} else {
		metrics.Fenced.Set(1)
	}
	metrics.UnownedClusters.Set(float64(c.unowned(o.names, leases, o.live, o.valid, o.now, noRing(o))))
	return o, true
}

// plan decides from an reading alone: the ring over the active
// members, the held clusters to lose (rule 1's other side: the Lease is no
// longer ours) or hand over (rule 3), and whether to acquire this pass.
func (c *Coordinator) plan(o *reading) (*plan, error) {
	ringMembers := make([]string, 0, len(o.live)+1)
	for m := range o.live {
		if !o.leaving[m] && !o.cordoned[m] && HolderName(m) != c.o.Identity {
			ringMembers = append(ringMembers, HolderName(m))
		}
	}
	if o.inRing() {
		ringMembers = append(ringMembers, c.o.Identity)
	}
	metrics.RingMembers.Set(float64(len(ringMembers)))
	ring, err := NewRing(ringMembers, c.o.Ring)
	if err != nil {
		return nil, err
	}
	p := &plan{ring: ring, why: map[string]string{}}
	p.assign, p.notes = ring.Place(o.names, o.placements)
	c.member.publish(RingHash(ring.Members()), c.tracked())
	c.mu.Lock()
	c.ring, c.notes = ring, p.notes
	for n, st := range c.clusters {
		if st.phase != phaseOwned && st.phase != phaseDraining {
			continue
		}
		lease := o.leases[ClusterLeaseName(n)]
		switch {
		case lease == nil || holderOf(lease) != c.o.self:
			p.losses = append(p.losses, n) // deleted or taken by hand: not ours any more
		case st.phase == phaseDraining: // being handed over already
		case !o.exists[n] || p.assign[n] != c.o.Identity:
			p.handovers = append(p.handovers, n)
			p.why[n] = handoverReason(o, n, c.o.Identity, p.assign[n])
		}
	}
	c.mu.Unlock()
	// Nothing is taken while writes are fenced (a renewal's answer late,
	// within the grace): the acquisition would be refused anyway.
	p.take = o.inRing() && o.writable
	return p, nil
}

// noRing says why no replica is on the ring, when none is although some
// are live: every live one is cordoned or leaving. "" otherwise.
func noRing(o *reading) string {
	if len(o.live) == 0 {
		return ""
	}
	for m := range o.live {
		if !o.leaving[m] && !o.cordoned[m] {
			return ""
		}
	}
	return "every live replica is cordoned or leaving, so none is on the ring (clustershard uncordon)"
}

// handoverReason says why the ring moves cluster n away from this replica,
// to member to: this replica is cordoned, or the cluster's placement sends
// it elsewhere, or the ring changed.
func handoverReason(o *reading, n, self, to string) string {
	pl := o.placements[n]
	switch {
	case o.selfLeaving:
		return v1alpha1.TransferShutdown
	case o.selfCordoned:
		return v1alpha1.TransferDrain
	case pl.Pin != "" && pl.Pin == to, slices.Contains(pl.Avoid, self):
		return v1alpha1.TransferPin
	default:
		return v1alpha1.TransferRebalance
	}
}

// apply acts on a plan: it re-joins if needed, fences what is no longer
// valid (rule 4), gives up lost clusters, hands over moved ones (rule 3,
// rate limited), sweeps Leases nobody tracks, then acquires the assigned
// clusters that are free now (rule 1; rule 2 runs in acquire).
func (c *Coordinator) apply(ctx context.Context, o *reading, p *plan, t *passTimer) {
	if o.active() && o.writable {
		c.rejoin(ctx, o.members)
	}
	c.fenceInvalid()
	for _, n := range p.losses {
		if c.cacheBehind(ctx, n, o.leases[ClusterLeaseName(n)]) {
			continue
		}
		c.lose(ctx, n, "Lease changed by someone else")
	}
	t.mark(metrics.PassLosses)
	var shares map[string]int
	if len(p.handovers) > 0 {
		shares = c.windowShares(o, p)
	}
	// While writes are fenced (a renewal's answer late, within the grace)
	// no hand-over starts: its drain could not write, its release would
	// wait for writes cut in doubt. The next pass starts them.
	for _, n := range p.handovers {
		if o.valid && !o.writable {
			break
		}
		// A deleted cluster goes at once. Others wait for room in their
		// successor's hand-over window (window.go), then, while
		// rebalancing, for the moves rate limit; a shutdown is not rate
		// limited.
		if o.exists[n] && (!c.windowAllows(p.assign[n], shares[p.assign[n]]) || (!o.selfLeaving && !c.limit.Allow())) {
			continue
		}
		c.handOver(ctx, n, !o.exists[n], p.why[n], p.assign[n], p.assign[n] != "")
	}
	t.mark(metrics.PassHandovers)
	if o.writable || !o.valid {
		c.sweep(ctx, o.leases, p.assign, o.exists, o.active())
	}
	t.mark(metrics.PassSweep)
	if o.active() && !o.inRing() {
		// Cordoned: nothing is assigned here, so it has caught up (and is
		// ready: a pod restarted while cordoned must not stall a rollout).
		c.catchUp(p.assign)
	}
	if !p.take || !c.settled(o, p.ring) {
		// Take nothing in the first retry period of membership (read now,
		// after this pass's writes), nor, at a cold start, before the
		// ring's members have settled (settle.go): replicas starting
		// together see each other first instead of one of them grabbing
		// clusters, starting their installs and handing them over again.
		return
	}
	c.acquireAssigned(ctx, o, p)
	c.catchUp(p.assign)
	t.mark(metrics.PassAcquire)
}

// acquireAssigned acquires the clusters the ring assigns to this replica
// whose Lease is free now (after this pass's losses and hand-overs).
func (c *Coordinator) acquireAssigned(ctx context.Context, o *reading, p *plan) {
	var free []string
	for _, n := range o.names {
		if p.assign[n] != c.o.Identity {
			delete(c.wanted, n)
			continue
		}
		if _, ok := c.wanted[n]; !ok {
			c.wanted[n] = o.now
		}
		c.mu.Lock()
		st := c.clusters[n]
		busy := (st != nil && st.phase != phaseFree) || c.acquiring[n]
		c.mu.Unlock()
		// A write of an earlier authority that may still land keeps the
		// cluster from this replica until it cannot: raised again, the
		// epoch would have that write of its own still open at the remote.
		if !busy && c.inDoubt(n) == nil && c.free(ctx, ClusterLeaseName(n), o.leases[ClusterLeaseName(n)], o.live, o.now) {
			free = append(free, n)
		}
	}
	c.startAcquisitions(ctx, free, o.leases, o.epoch, o.live)
}
