package drill

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// mixedTimingsFault is a rolling change of the timing flags caught half
// way: the replica with the most clusters restarts with twice the lease
// duration of the others and a renew deadline longer than their lease
// duration (1.5 times), takes its share back, and is
// SIGSTOPped. The others must wait out its longer lease, published on its
// membership Lease, before they take its clusters (I1 judges its authority
// by its own renew deadline), and take them within that lease plus the
// crash slack (I2). It is then woken and restarted with the usual timings.
func mixedTimingsFault(ctx context.Context, r *Runner, res *Result) error {
	victim, _, err := r.victim(ctx)
	if err != nil {
		return err
	}
	res.Victim = victim
	if err := r.term(victim); err != nil {
		return err
	}
	// A renew deadline longer than the others' lease duration: they must
	// not judge it gone by their own lease.
	long := override{leaseDuration: 2 * r.o.LeaseDuration, renewDeadline: 3 * r.o.LeaseDuration / 2}
	r.overrides[victim] = long
	err = r.startReady(ctx, victim)
	delete(r.overrides, victim) // its next start has the usual timings
	if err != nil {
		return err
	}
	if err := r.settle(ctx, 60*time.Second); err != nil {
		return err
	}
	owned, err := r.clustersOf(ctx, victim)
	if err != nil {
		return err
	}
	res.Notes = append(res.Notes, fmt.Sprintf("%s ran with lease duration %v and renew deadline %v, the others %v and %v",
		victim, long.leaseDuration, long.renewDeadline, r.o.LeaseDuration, r.renewDeadline()))
	rep := r.reps.live[victim]
	at := time.Now()
	if err := rep.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	rep.paused = true
	r.moved(ctx, res, "", owned, at, long.leaseDuration+5*time.Second)
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		return time.Since(at) > long.leaseDuration+time.Second, nil
	})
	rep.paused = false
	if err := rep.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return err
	}
	return errors.Join(r.term(victim), r.startReady(ctx, victim))
}
