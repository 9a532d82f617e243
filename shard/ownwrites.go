package shard

import (
	coordinationv1 "k8s.io/api/coordination/v1"
)

// A cache shows this replica's own release of a cluster Lease a moment
// after the write: until then it still lists the Lease held by this replica
// at the version the release replaced, although nothing runs for it here.
// The sweep (sweep.go) would take that for a Lease left behind and write it
// again, a conflict that holds the pass for a round trip per cluster just
// handed over (up to 1.6 s a pass in the drill's rolling restart). So the
// versions our releases replaced are remembered until the cache lists
// another: a Lease listed at such a version is known to be superseded by
// our own write, and is left alone.

// wroteOver records that our write of Lease name replaced version rv.
func (c *Coordinator) wroteOver(name, rv string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ownWrites[name] = rv
}

// supersededByUs reports whether Lease l, as listed, is a version one of
// our writes has replaced already.
func (c *Coordinator) supersededByUs(l *coordinationv1.Lease) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	rv, ok := c.ownWrites[l.Name]
	return ok && rv == l.ResourceVersion
}

// forgetOwnWrites drops, on a pass's reading, the versions the cache no
// longer lists (it caught up, or the Lease is gone).
func (c *Coordinator) forgetOwnWrites(leases map[string]*coordinationv1.Lease) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, rv := range c.ownWrites {
		if l := leases[name]; l == nil || l.ResourceVersion != rv {
			delete(c.ownWrites, name)
		}
	}
}
