package drill

import (
	"context"
	"errors"
	"fmt"
	"time"
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
	// A renew deadline longer than the others' lease duration: they must
	// not judge it gone by their own lease.
	long := override{leaseDuration: 2 * r.o.LeaseDuration, renewDeadline: 3 * r.o.LeaseDuration / 2}
	if err := r.restartWith(ctx, victim, long); err != nil {
		return err
	}
	owned, err := r.clustersOf(ctx, victim)
	if err != nil {
		return err
	}
	res.Notes = append(res.Notes, fmt.Sprintf("%s ran with lease duration %v and renew deadline %v, the others %v and %v",
		victim, long.leaseDuration, long.renewDeadline, r.o.LeaseDuration, r.renewDeadline()))
	if err := r.pausePast(ctx, res, victim, owned, long.leaseDuration+5*time.Second, long.leaseDuration+time.Second); err != nil {
		return err
	}
	return errors.Join(r.term(victim), r.startReady(ctx, victim))
}
