package shard

import (
	"strings"
	"time"
)

// settleState is the cold-start settle of one process (step goroutine only).
type settleState struct {
	done    bool      // settled: from now on clusters are taken at once
	members string    // the ring's members last seen, joined
	changed time.Time // when they last changed
	logged  bool      // the wait was logged
}

// settled reports whether this pass may take clusters. Never in the first
// retry period of membership: replicas starting together see each other
// first. After that at once, unless this is a cold start: no live replica
// but this one holds a cluster Lease (the fleet starts, or restarts as a
// whole), and this one holds none. Then the replicas that start together
// would take clusters only to move them a second later, when the next
// one joins, cutting the installs and copies they began; so a replica waits
// until the ring has all ExpectedReplicas members, or its members stayed
// unchanged for SettleWindow, or SettleTimeout passed since it joined,
// whichever comes first. Once settled, a process does not wait again.
//
// Every replica judges the same ring from the same membership Leases, so
// those that start together settle within a retry period of each other.
// A replica joining a running fleet is not at a cold start (the others hold
// Leases) and takes its share at once.
func (c *Coordinator) settled(o *reading, ring *Ring) bool {
	now, joined := c.o.Clock.Now(), c.joined()
	members := ring.Members()
	key := strings.Join(members, ",")
	if key != c.settle.members {
		c.settle.members, c.settle.changed = key, now
	}
	if now.Sub(joined) < c.o.RetryPeriod {
		return false
	}
	if c.settle.done {
		return true
	}
	var why string
	switch {
	case !c.coldStart(o):
		why = "the fleet runs already"
	case c.o.ExpectedReplicas > 0 && len(members) >= c.o.ExpectedReplicas:
		why = "every expected replica is on the ring"
	case now.Sub(c.settle.changed) >= c.o.SettleWindow && now.Sub(joined) >= c.o.SettleWindow:
		why = "the ring's members stayed unchanged for the settle window"
	case now.Sub(joined) >= c.o.SettleTimeout:
		why = "the settle timeout passed"
	default:
		if !c.settle.logged {
			c.settle.logged = true
			c.log.Info("Cold start: waiting for the ring's members to settle before taking clusters", "members", len(members),
				"expected", c.o.ExpectedReplicas, "window", c.o.SettleWindow, "timeout", c.o.SettleTimeout)
		}
		return false
	}
	c.settle.done = true
	if c.settle.logged || why != "the fleet runs already" {
		c.log.Info("Ring settled: taking clusters", "why", why, "members", len(members), "afterJoining", now.Sub(joined).Round(time.Millisecond))
	}
	return true
}

// coldStart reports whether no live replica but this one holds a cluster
// Lease, and this one holds none.
func (c *Coordinator) coldStart(o *reading) bool {
	for _, l := range o.leases {
		if h := holderOf(l); h != "" && (h == c.o.self || o.live[h]) {
			return false
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.clusters) == 0
}
