package shard

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// View is what the coordinator saw on its last pass, for status and metrics.
type View struct {
	// Members are the live replicas; true for those in the ring (neither
	// leaving nor cordoned).
	Members map[string]bool
	// Cordoned are the live replicas kept out of the ring by a cordon.
	Cordoned map[string]bool
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

// Owns reports whether this replica owns cluster now and may write for it
// (Lease held in the current membership epoch, membership valid, not
// handing it over).
func (c *Coordinator) Owns(name string) bool {
	if _, err := c.WriteDeadline(name); err != nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.clusters[name]
	return st != nil && st.phase == phaseOwned
}

// Holds reports whether this replica holds cluster: it owns it, or did
// when its membership's validity ended less than the grace ago (a renewal
// answered late, see RenewalGrace). Its manager runs on, but while Owns is
// false nothing may be written for it: a controller waits (HeldFor) and
// writes nothing, rather than reporting the cluster as not run.
func (c *Coordinator) Holds(name string) bool {
	epoch, ok := c.member.held()
	if !ok {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.clusters[name]
	return st != nil && st.phase == phaseOwned && st.epoch == epoch
}

// HeldRetry is when a controller that found a cluster held but not
// writable (Holds without Owns) should look again: soon, since the late
// renewal's answer may come any moment, and by the end of the grace.
func (c *Coordinator) HeldRetry() time.Duration {
	return min(c.member.heldFor(), 100*time.Millisecond) + 10*time.Millisecond
}

// Owned returns the clusters this replica holds now (Holds: their managers
// run here, their writes fenced for a moment within the grace after a
// renewal late), so a renewal answered in the grace does not show as every
// cluster lost and taken again.
func (c *Coordinator) Owned() []string {
	c.mu.Lock()
	names := make([]string, 0, len(c.clusters))
	for n := range c.clusters {
		names = append(names, n)
	}
	c.mu.Unlock()
	owned := names[:0]
	for _, n := range names {
		if c.Holds(n) {
			owned = append(owned, n)
		}
	}
	return owned
}

// unowned counts the clusters no replica may be running a manager for: the
// Lease is absent or released, or its holder's membership has not been seen
// renewed within the renew deadline, after which the holder has fenced
// itself by rule 4 (its validity ends a renew deadline after its last
// renewal was sent, which is before this replica saw it).
func (c *Coordinator) unowned(names []string, leases map[string]*coordinationv1.Lease, live map[string]bool, selfValid bool, now time.Time, noRing string) int {
	seen := map[string]Unowned{}
	for _, name := range names {
		h := holderOf(leases[ClusterLeaseName(name)])
		why := ""
		switch {
		case h == "":
			why = "its Lease is free and no replica has acquired it"
			if noRing != "" {
				why += ": " + noRing
			}
			if err := c.acquireErr[name]; err != nil {
				why += " (the last acquisition by " + c.o.Identity + " failed: " + err.Error() + ")"
			}
		case h == c.o.self:
			if !selfValid || c.untracked(name) {
				why = "its Lease names " + c.o.self + ", which does not run it" // fenced, or forgotten
				if err := c.inDoubt(name); err != nil {
					why += " until no write of its earlier authority may land (" + err.Error() + ")"
				}
			}
		case !live[h] || !c.obs.changedWithin(MemberLeaseName(HolderName(h)), now, c.obs.heldFor(MemberLeaseName(HolderName(h)))):
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
	c.tellUnowned(seen, now)
	return len(seen)
}

// tellUnowned tells Options.Unowned, while this replica reports, of each
// cluster unowned for UnownedAfter, once: the controllers have nothing
// else to wake them for a cluster nobody runs.
func (c *Coordinator) tellUnowned(seen map[string]Unowned, now time.Time) {
	if c.o.Unowned == nil || !c.Reporter() {
		c.told = nil
		return
	}
	told := map[string]bool{}
	for name, u := range seen {
		switch {
		case c.told[name]:
			told[name] = true
		case now.Sub(u.Since) >= c.o.UnownedAfter:
			c.o.Unowned(name)
			told[name] = true
		}
	}
	c.told = told
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
func (c *Coordinator) UnownedCluster(name string) (since time.Time, why string, unowned bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	u, ok := c.view.Unowned[name]
	return u.Since, u.Why, ok
}

// Holder returns the replica that holds cluster's Lease as the last pass
// saw it, and the Lease's acquire time as its holder wrote it.
func (c *Coordinator) Holder(cluster string) (holder string, since time.Time, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.view.Holders[cluster]
	return h.Holder, h.Since, ok
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
