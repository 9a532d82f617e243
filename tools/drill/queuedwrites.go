package drill

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/clustershard/clustershard/shard"
	"github.com/clustershard/clustershard/test/localcluster"
)

// queuedWritesFault restarts a replica with a remote client of 1 QPS and
// burst 1, changes every source so that its remote writes queue in
// client-go's rate limiter behind one another, and SIGSTOPs it past the lease
// duration with the queue full. When it wakes, the writes that waited in the
// limiter passed the client-side fence long ago: only the fence in the
// transport, which judges a write when it is really sent, keeps them from
// reaching clusters the others took meanwhile (I1 reads the remote writes).
// The victim is then restarted with the usual flags.
func queuedWritesFault(ctx context.Context, r *Runner, res *Result) error {
	victim, _, err := r.victim(ctx)
	if err != nil {
		return err
	}
	res.Victim = victim
	if err := r.restartWith(ctx, victim, override{args: []string{"--remote-qps", "1", "--remote-burst", "1"}}); err != nil {
		return err
	}
	owned, err := r.clustersOf(ctx, victim)
	if err != nil {
		return err
	}
	bumped := time.Now()
	if err := r.bumpObjects(ctx, fmt.Sprintf("%ds", 200+len(r.reps.all))); err != nil {
		return err
	}
	// Stopped as soon as a remote API server saw it read or write a copy
	// after the change: at one request a second, its next request, the
	// write that follows the read of a copy or the next source's, waits in
	// its limiter, having passed any check made before client-go's.
	if !pollUntil(ctx, 30*time.Second, func() bool { return r.requestedCopySince(victim, bumped) }) {
		return fmt.Errorf("%s sent no request for a copy within 30s of the sources' change", victim)
	}
	if err := r.pausePast(ctx, res, victim, owned, r.crashBound(), r.o.LeaseDuration+time.Second); err != nil {
		return err
	}
	time.Sleep(3 * time.Second) // the queue drains against the fence
	return errors.Join(r.term(victim), r.startReady(ctx, victim))
}

// requestedCopySince reports whether a remote API server recorded a read or
// a write of a copy by a process of replica id received at or after since.
func (r *Runner) requestedCopySince(id string, since time.Time) bool {
	for _, rc := range r.cp.Remotes {
		requests, err := readAudit(localcluster.AuditLogPath(r.dir, rc.Name))
		if err != nil {
			return false
		}
		for _, w := range requests {
			if shard.HolderName(w.Replica) == id && !w.Received.Before(since) && strings.HasPrefix(w.Object, "examplechaos ") {
				return true
			}
		}
	}
	return false
}
