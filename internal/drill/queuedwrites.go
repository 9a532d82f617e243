package drill

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/clustershard/clustershard/internal/localcluster"
	"github.com/clustershard/clustershard/shard"
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
	if err := r.term(victim); err != nil {
		return err
	}
	r.overrides[victim] = override{args: []string{"--remote-qps", "1", "--remote-burst", "1"}}
	err = r.startReady(ctx, victim)
	delete(r.overrides, victim) // its next start has the usual flags
	if err != nil {
		return err
	}
	if err := r.settle(ctx, 60*time.Second); err != nil {
		return err
	}
	holders, err := r.holders(ctx)
	if err != nil {
		return err
	}
	var owned []string
	for c, h := range holders {
		if h == victim {
			owned = append(owned, c)
		}
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
	rep := r.reps.live[victim]
	at := time.Now()
	if err := rep.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	rep.paused = true
	r.moved(ctx, res, "", owned, at, r.crashBound())
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return time.Since(at) > r.o.LeaseDuration+time.Second, nil
	})
	rep.paused = false
	if err := rep.cmd.Process.Signal(syscall.SIGCONT); err != nil {
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
