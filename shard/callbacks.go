package shard

import (
	"context"
	"fmt"
	"sync"
)

// callbacks counts the WithOwnership callbacks running for one cluster, so
// that a hand-over can wait for them, within a bound.
type callbacks struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0
}

func (c *callbacks) enter() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == 0 {
		c.idle = make(chan struct{})
	}
	c.n++
}

func (c *callbacks) leave() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n--
	if c.n == 0 {
		close(c.idle)
	}
}

// count returns how many callbacks run now.
func (c *callbacks) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// wait returns once no callback runs, or an error naming how many still do
// when ctx ends first.
func (c *callbacks) wait(ctx context.Context) error {
	c.mu.Lock()
	n, idle := c.n, c.idle
	c.mu.Unlock()
	if n == 0 {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%d WithOwnership callbacks still running: %w", n, ctx.Err())
	}
}

// handlerLock serialises the Handler calls of one cluster (Lost never
// overlaps Acquired); lock waits at most until ctx ends.
type handlerLock chan struct{}

func newHandlerLock() handlerLock { return make(handlerLock, 1) }

func (h handlerLock) lock(ctx context.Context) error {
	select {
	case h <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("the previous Handler call of the cluster still runs: %w", ctx.Err())
	}
}

func (h handlerLock) unlock() { <-h }

// call bounds one API call of an ownership pass: the management rest.Config
// may set no timeout, and a call that never returns would stop every later
// pass. A renew deadline is the longest a pass's judgement stays current.
func (c *Coordinator) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.o.RenewDeadline)
}

// stopBudget is the bound of one manager's stop and the callbacks' drain
// on a hand-over or a loss (Options.StopTimeout).
func (c *Coordinator) stopBudget(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), c.o.StopTimeout)
}
