package shard

import (
	"time"

	"github.com/clustershard/clustershard/internal/metrics"
)

// passTimer breaks one pass of the coordinator down by phase, so that a
// slow pass (every acquisition waits for the pass before it) says where its
// time went: clustershard_ownership_pass_phase_seconds, and a log line for
// a pass longer than the retry period.
type passTimer struct {
	start, last time.Time
	phases      []any // name, duration: the log line's key-value pairs
}

func newPassTimer() *passTimer {
	now := time.Now()
	return &passTimer{start: now, last: now}
}

// mark ends phase name.
func (t *passTimer) mark(name string) {
	if t == nil {
		return
	}
	now := time.Now()
	d := now.Sub(t.last)
	t.last = now
	metrics.OwnershipPassPhase.WithLabelValues(name).Observe(d.Seconds())
	t.phases = append(t.phases, name, d.Round(time.Millisecond).String())
}

// end records the whole pass and logs it when it outlasted slow.
func (c *Coordinator) endPass(t *passTimer, slow time.Duration) {
	d := time.Since(t.start)
	metrics.OwnershipPassPhase.WithLabelValues(metrics.PassTotal).Observe(d.Seconds())
	if d > slow {
		c.log.Info("Slow ownership pass: the next acquisitions waited for it", append([]any{"took", d.Round(time.Millisecond).String()}, t.phases...)...)
	}
}
