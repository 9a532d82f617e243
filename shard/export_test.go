package shard

import (
	"time"

	"github.com/cespare/xxhash/v2"
)

// Pause blocks this replica's membership renewals, as a frozen process would
// look to the API server; the returned function resumes them.
func (c *Coordinator) Pause() (resume func()) {
	ch := make(chan struct{})
	c.member.pauseMu.Lock()
	c.member.pause = ch
	c.member.pauseMu.Unlock()
	return func() {
		c.member.pauseMu.Lock()
		c.member.pause = nil
		c.member.pauseMu.Unlock()
		close(ch)
	}
}

// HoldRenewals blocks this replica's next membership renewal once its send
// time is taken: before it goes to the API server when beforeSend, else
// after its answer came. The returned function lets it go on.
func (c *Coordinator) HoldRenewals(beforeSend bool) (release func()) {
	ch := make(chan struct{})
	hook := &c.member.answering
	if beforeSend {
		hook = &c.member.sending
	}
	c.member.pauseMu.Lock()
	*hook = ch
	c.member.pauseMu.Unlock()
	return func() {
		c.member.pauseMu.Lock()
		*hook = nil
		c.member.pauseMu.Unlock()
		close(ch)
	}
}

// ValidUntil is when this replica's membership validity ends unless renewed.
func (c *Coordinator) ValidUntil() time.Time {
	until, _, _ := c.member.valid()
	return until
}

// Crash makes the coordinator behave as a killed process: no renewal, no
// decision, no hand-over, no release. The returned function unblocks its
// goroutines for cleanup.
func (c *Coordinator) Crash() (cleanup func()) {
	c.crashed.Store(true)
	c.closeAcquisitions() // a dead process has no write on its way
	return c.Pause()
}

// Score is the rendezvous score of name for member, or 0 when member is not
// on the ring.
func (r *Ring) Score(name, member string) uint64 {
	for i, m := range r.members {
		if m == member {
			return r.score(xxhash.Sum64String(name), i)
		}
	}
	return 0
}
