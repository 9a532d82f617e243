package shard

import (
	"context"
	"fmt"
	"time"
)

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
	// A cluster being drained (handOver) is still owned: its Lease is held
	// and no other replica may take it until it is released, so the writes
	// of the work already under way go on. Owns is false for it: no new work
	// starts.
	if st == nil || (st.phase != phaseOwned && st.phase != phaseDraining) || st.epoch != epoch {
		return time.Time{}, fmt.Errorf("%w: %q", ErrNotOwner, name)
	}
	return until, nil
}

// WriteBound is the latest instant by which a remote write for cluster sent
// now must be finished by its server (its server-side timeout): while this
// replica keeps renewing, the write's deadline follows (WriteDeadline is
// asked again when it comes); if renewals stop, no other replica can own the
// cluster before this bound has passed.
func (c *Coordinator) WriteBound(name string) (time.Time, error) {
	if _, err := c.WriteDeadline(name); err != nil {
		return time.Time{}, err
	}
	b := c.member.bound()
	if b.IsZero() {
		return time.Time{}, ErrNotMember
	}
	return b, nil
}

// WithOwnership runs f while this replica owns cluster; callbacks of one
// cluster may run at once. A planned hand-over first drains them: it lets
// those already running finish, their writes still passing the fence, for
// at most StopTimeout, and starts no new one (so an install on its way ends
// deployed instead of cut). Then, and on a loss at once, f's new writes are
// fenced and the manager stops; a stop waits for f at most StopTimeout
// again, past which the Lease is abandoned, not released, so others take it
// only after a lease duration. It returns ErrNotOwner without calling f when
// the cluster is not owned or is being handed over.
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

// graceEnded stops what is no longer held when the grace after validity
// ends (a crashed process, in tests, decides nothing).
func (c *Coordinator) graceEnded() {
	if !c.crashed.Load() {
		c.fenceInvalid()
	}
}

// fenceInvalid stops every cluster owned in an older epoch or once
// membership no longer holds (rule 4: validity and its grace ended). Those
// Leases stay as they are: membership lapsed, so others may soon consider
// them free.
func (c *Coordinator) fenceInvalid() {
	epoch, valid := c.member.held()
	c.mu.Lock()
	var stale []string
	for n, st := range c.clusters {
		if (st.phase == phaseOwned || st.phase == phaseDraining) && (!valid || st.epoch != epoch) {
			stale = append(stale, n)
		}
	}
	c.mu.Unlock()
	for _, n := range stale {
		c.lose(context.Background(), n, "membership not valid")
	}
}
