package shard

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/metrics"
)

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
	now := c.o.Clock.Now()
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
	if !valid || selfLeaving || c.o.Clock.Since(c.joined()) < c.o.RetryPeriod {
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
