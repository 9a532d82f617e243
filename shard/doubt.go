package shard

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/clustershard/clustershard/internal/metrics"
)

// writeDoubt is what the coordinator knows of the remote writes of one
// cluster that may still land: how many are in flight, and until when
// unanswered ones may still be processed by the remote API server.
type writeDoubt struct {
	inflight int
	until    time.Time
}

// WriteBegan implements registry.WriteTracker: the fenced transport reports
// each remote write before its fence check, and when it ended, until when it
// may still be processed if it went unanswered (cut at the fence deadline, a
// connection broken or black-holed). A lease duration is added to that for
// a delivery delayed on the way (the server counts its timeout from
// receipt).
func (c *Coordinator) WriteBegan(name string) func(doubtUntil time.Time) {
	c.mu.Lock()
	d := c.doubt[name]
	if d == nil {
		d = &writeDoubt{}
		c.doubt[name] = d
	}
	d.inflight++
	c.mu.Unlock()
	var once sync.Once
	return func(doubtUntil time.Time) {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			d.inflight--
			if !doubtUntil.IsZero() {
				if until := doubtUntil.Add(c.o.LeaseDuration); until.After(d.until) {
					d.until = until
				}
				metrics.RemoteWritesInDoubt.Inc()
			}
			if d.inflight == 0 && !c.o.Clock.Now().Before(d.until) && c.doubt[name] == d {
				delete(c.doubt, name)
			}
		})
	}
}

// inDoubt returns why writes of cluster name may still reach its remote API
// server, or nil. While they may, its Lease is abandoned (others wait a lease
// duration unchanged) rather than released.
func (c *Coordinator) inDoubt(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.doubt[name]
	if d == nil {
		return nil
	}
	now := c.o.Clock.Now()
	switch {
	case d.inflight > 0:
		return fmt.Errorf("%d remote writes of cluster %q still in flight", d.inflight, name)
	case now.Before(d.until):
		return fmt.Errorf("remote writes of cluster %q went unanswered and may land until %s", name, d.until.Format(time.RFC3339Nano))
	}
	delete(c.doubt, name)
	return nil
}

// awaitWrites waits, within ctx, until no remote write of cluster name is
// in flight, then returns inDoubt: nil when every write was answered (the
// Lease may be released), the reason otherwise.
func (c *Coordinator) awaitWrites(ctx context.Context, name string) error {
	for {
		c.mu.Lock()
		d := c.doubt[name]
		inflight := d != nil && d.inflight > 0
		c.mu.Unlock()
		if !inflight {
			return c.inDoubt(name)
		}
		select {
		case <-ctx.Done():
			return c.inDoubt(name)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
