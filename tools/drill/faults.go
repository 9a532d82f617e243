package drill

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/shard"
	"github.com/clustershard/clustershard/test/localcluster"
)

// fault injects one scenario's fault(s) into the running fleet, measures
// the recovery of what it moved (I2) and undoes what must be undone; the
// caller then checks convergence, exclusivity and liveness.
type fault func(ctx context.Context, r *Runner, res *Result) error

// faults by scenario name; Scenarios lists them in their default order.
var faults = map[string]fault{
	"kill":                killFault,
	"term":                termFault,
	"pause":               pauseFault,
	"queued-writes-pause": queuedWritesFault,
	"partition":           partitionFault,
	"blackhole":           blackholeFault,
	"late-delivery":       lateDeliveryFault,
	"release-fails":       releaseFailsFault,
	"slow-remote-write":   slowRemoteWriteFault,
	"apiserver-restart":   apiserverRestartFault,
	"rolling":             rollingFault,
	"remote-down":         remoteDownFault,
	"kubeconfig":          kubeconfigFault,
	"lease-tamper":        leaseTamperFault,
	"retarget":            retargetFault,
	"mixed-timings":       mixedTimingsFault,
	"scale":               scaleFault,
	"duplicate-identity":  duplicateIdentityFault,
}

func killFault(ctx context.Context, r *Runner, res *Result) error {
	victim, owned, err := r.victim(ctx)
	if err != nil {
		return err
	}
	res.Victim = victim
	at := time.Now()
	r.kill(victim)
	r.moved(ctx, res, "", owned, at, r.crashBound())
	return r.startReady(ctx, victim)
}

func termFault(ctx context.Context, r *Runner, res *Result) error {
	victim, owned, err := r.victim(ctx)
	if err != nil {
		return err
	}
	res.Victim = victim
	at := time.Now()
	err = r.term(victim)
	r.moved(ctx, res, "", owned, at, gracefulBound)
	return errors.Join(err, r.startReady(ctx, victim))
}

// pauseFault SIGSTOPs a replica for longer than the lease duration; the
// zombie wakes fenced and must not write (I1 reads its journal).
func pauseFault(ctx context.Context, r *Runner, res *Result) error {
	victim, owned, err := r.victim(ctx)
	if err != nil {
		return err
	}
	res.Victim = victim
	return r.pausePast(ctx, res, victim, owned, r.crashBound(), r.o.LeaseDuration+time.Second)
}

// partitionFault cuts one replica's connections to the management API
// server (its proxy closes them and refuses new ones) for longer than the
// lease duration, then heals: the replica fences itself, the others take
// its clusters, and it rejoins afterwards.
func partitionFault(ctx context.Context, r *Runner, res *Result) error {
	victim, owned, err := r.victim(ctx)
	if err != nil {
		return err
	}
	res.Victim = victim
	p := r.proxies[victim]
	at := time.Now()
	p.Cut()
	r.moved(ctx, res, "", owned, at, r.crashBound())
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return time.Since(at) > r.o.LeaseDuration+time.Second, nil
	})
	p.Heal()
	return nil
}

// apiserverRestartFault restarts the management API server: replicas lose
// their watches and renewals for a moment; whoever cannot renew within the
// renew deadline fences itself, and ownership settles again.
func apiserverRestartFault(ctx context.Context, r *Runner, res *Result) error {
	res.Victim = "management"
	before, err := r.holders(ctx)
	if err != nil {
		return err
	}
	at := time.Now()
	if err := r.cp.RestartManagementAPIServer(); err != nil {
		return err
	}
	downtime := time.Since(at)
	res.Downtime = downtime.Round(time.Millisecond).String()
	// Replicas that could not renew fence themselves within the renew
	// deadline: wait that long, then every cluster whose manager stopped
	// must run again within the crash bound plus the downtime.
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return time.Since(at) > downtime+r.renewDeadline()+time.Second, nil
	})
	var all []string
	for c := range before {
		all = append(all, c)
	}
	r.moved(ctx, res, "", r.stoppedSince(all, at), at, r.crashBound()+downtime)
	return nil
}

// rollingFault restarts every replica, highest ordinal first, as a
// StatefulSet rollout does: SIGTERM, wait for the hand-over, start again,
// wait until the new pod is ready (it has taken its share) and every
// manager runs.
func rollingFault(ctx context.Context, r *Runner, res *Result) error {
	ids := r.liveIDs()
	slices.Reverse(ids)
	for _, id := range ids {
		owned, err := r.clustersOf(ctx, id)
		if err != nil {
			return err
		}
		at := time.Now()
		err = r.term(id)
		r.moved(ctx, res, id, owned, at, gracefulBound)
		if err := errors.Join(err, r.startReady(ctx, id)); err != nil {
			return err
		}
		if err := r.settle(ctx, 60*time.Second); err != nil {
			return fmt.Errorf("after restarting %s: %w", id, err)
		}
	}
	return nil
}

// scaleFault scales R → R+2 → 2 replicas: new replicas take their share by
// graceful hand-over, then replicas leave (highest ordinal first).
func scaleFault(ctx context.Context, r *Runner, res *Result) error {
	before, err := r.holders(ctx)
	if err != nil {
		return err
	}
	n := len(r.liveIDs())
	at := time.Now()
	if err := r.startReady(ctx, replicaID(n), replicaID(n+1)); err != nil { // both at once: podManagementPolicy Parallel
		return err
	}
	if err := r.settle(ctx, 60*time.Second); err != nil {
		return fmt.Errorf("scale up: %w", err)
	}
	after, err := r.holders(ctx)
	if err != nil {
		return err
	}
	var movedUp []string
	for c, h := range after {
		if before[c] != h {
			movedUp = append(movedUp, c)
		}
	}
	// From the start of two new processes: includes their start-up and join.
	r.moved(ctx, res, "up", movedUp, at, r.crashBound())
	ids := r.liveIDs()
	slices.Reverse(ids)
	for _, id := range ids[:len(ids)-2] {
		owned, err := r.clustersOf(ctx, id)
		if err != nil {
			return err
		}
		at := time.Now()
		err = r.term(id)
		r.moved(ctx, res, "down-"+id, owned, at, gracefulBound)
		if err != nil {
			return err
		}
	}
	return nil
}

// readyTimeout bounds a new replica's readiness: start-up, its catch-up
// timeout (twice the lease) and slack.
func (r *Runner) readyTimeout() time.Duration { return 2*r.o.LeaseDuration + 30*time.Second }

// remoteDownFault stops the first remote API server, changes every source
// while it is down, and starts it again: ownership stays, replication
// catches up (I3).
func remoteDownFault(ctx context.Context, r *Runner, res *Result) error {
	remote := r.cp.Remotes[0]
	if err := remote.StopAPIServer(); err != nil {
		res.Notes = append(res.Notes, err.Error()) // the fault happened anyway
	}
	res.Victim = remote.Name
	var down []string
	for _, cl := range r.clusters {
		if cl.Remote == 0 {
			down = append(down, cl.Name)
		}
	}
	if err := r.waitCondition(ctx, down, v1alpha1.ConditionConnected, metav1.ConditionFalse, 30*time.Second); err != nil {
		res.note("I3", "remote API server down: %v", err)
	}
	if err := r.bumpObjects(ctx, "59s"); err != nil {
		return errors.Join(err, remote.StartAPIServer())
	}
	return remote.StartAPIServer()
}

// kubeconfigFault rotates the kubeconfig of one cluster (new credentials),
// then corrupts it (Ready must turn False), then restores it.
func kubeconfigFault(ctx context.Context, r *Runner, res *Result) error {
	cl := r.clusters[0]
	res.Victim = cl.Name
	secret := cl.Name + "-kubeconfig"
	_, rotated, err := r.cp.Remotes[cl.Remote].AddUser(fmt.Sprintf("rotated-%d", time.Now().UnixNano()), "system:masters")
	if err != nil {
		return err
	}
	at := time.Now()
	if err := localcluster.WriteKubeConfigSecret(ctx, r.c, Namespace, secret, localcluster.DefaultSecretKey, rotated); err != nil {
		return err
	}
	r.moved(ctx, res, "rotated", []string{cl.Name}, at, 30*time.Second)
	if err := localcluster.WriteKubeConfigSecret(ctx, r.c, Namespace, secret, localcluster.DefaultSecretKey, []byte("not: [a kubeconfig")); err != nil {
		return err
	}
	if err := r.waitCondition(ctx, []string{cl.Name}, v1alpha1.ConditionReady, metav1.ConditionFalse, 30*time.Second); err != nil {
		res.note("I3", "corrupt kubeconfig: %v", err)
	}
	at = time.Now()
	if err := localcluster.WriteKubeConfigSecret(ctx, r.c, Namespace, secret, localcluster.DefaultSecretKey, rotated); err != nil {
		return err
	}
	r.moved(ctx, res, "fixed", []string{cl.Name}, at, 30*time.Second)
	return nil
}

// leaseTamperFault deletes a cluster Lease, deletes a membership Lease, and
// overwrites a cluster Lease's holder with a replica that does not exist.
func leaseTamperFault(ctx context.Context, r *Runner, res *Result) error {
	holders, err := r.holders(ctx)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(holders))
	for c := range holders {
		names = append(names, c)
	}
	slices.Sort(names)
	if len(names) < 2 {
		return errors.New("lease-tamper needs two owned clusters")
	}
	deleted, bogus := names[0], names[1]
	at := time.Now()
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: shard.ClusterLeaseName(deleted)}}
	if err := r.c.Delete(ctx, lease); err != nil {
		return err
	}
	r.moved(ctx, res, "deleted", []string{deleted}, at, r.crashBound())

	victim := r.liveIDs()[0]
	member := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: shard.MemberLeaseName(victim)}}
	if err := r.c.Delete(ctx, member); err != nil {
		return err
	}
	res.Victim = victim
	if err := r.settle(ctx, 60*time.Second); err != nil {
		return fmt.Errorf("after deleting %s's membership Lease: %w", victim, err)
	}

	at = time.Now()
	// The Lease may still be changing after the membership loss: retry on
	// conflict, as a person editing it would.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var l coordinationv1.Lease
		if err := r.c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: shard.ClusterLeaseName(bogus)}, &l); err != nil {
			return err
		}
		l.Spec.HolderIdentity = ptr.To("bogus-replica")
		return r.c.Update(ctx, &l)
	})
	if err != nil {
		return err
	}
	r.moved(ctx, res, "bogus", []string{bogus}, at, r.crashBound()+r.o.LeaseDuration)
	return nil
}

// waitCondition waits until every cluster's condition typ has status.
func (r *Runner) waitCondition(ctx context.Context, clusters []string, typ string, status metav1.ConditionStatus, timeout time.Duration) error {
	var missing []string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		missing = missing[:0]
		for _, name := range clusters {
			var rc v1alpha1.RemoteCluster
			if err := r.c.Get(ctx, client.ObjectKey{Name: name}, &rc); err != nil || !hasCondition(rc.Status.Conditions, typ, status) {
				missing = append(missing, name)
			}
		}
		return len(missing) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("%s not %s=%s within %v", missing, typ, status, timeout)
	}
	return nil
}

func hasCondition(conds []metav1.Condition, typ string, status metav1.ConditionStatus) bool {
	for _, c := range conds {
		if c.Type == typ && c.Status == status {
			return true
		}
	}
	return false
}

// liveIDs returns the live replicas' ids, sorted.
func (r *Runner) liveIDs() []string {
	ids := make([]string, 0, len(r.reps.live))
	for id := range r.reps.live {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// duplicateIdentityFault starts a second process with the --replica-id of
// the live replica holding the most clusters (a force-deleted pod whose node
// heals, an id typed twice) and keeps it running past the lease duration.
// It is another incarnation: it must never own a cluster while the first
// lives (its journal), I1 checks both processes' authority and remote
// writes apart, and the first keeps every cluster it held. Then it is
// stopped with SIGTERM.
func duplicateIdentityFault(ctx context.Context, r *Runner, res *Result) error {
	victim, owned, err := r.victim(ctx)
	if err != nil {
		return err
	}
	res.Victim = victim
	dup, err := r.spawn(victim)
	if err != nil {
		return err
	}
	at := time.Now()
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		select {
		case <-dup.exited:
			return true, nil
		default:
		}
		return time.Since(at) > r.o.LeaseDuration+2*time.Second, nil
	})
	if entries, err := ReadJournal(dup.journal); err == nil {
		for _, e := range entries {
			if e.Event == shard.JournalOwned {
				res.note("I1", "the second process of %s owned %s at %s while the first lived", victim, e.Cluster, e.Time.Format(time.StampMicro))
			}
		}
	}
	select {
	case <-dup.exited:
		return fmt.Errorf("the second process of %s exited on its own", victim)
	default:
	}
	if err := r.stayed(ctx, res, victim, owned, "while a second process of it ran"); err != nil {
		return err
	}
	dup.expectExit, dup.termed = true, true
	if err := dup.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-dup.exited:
		dup.killedAt = time.Now()
	case <-time.After(30 * time.Second):
		_ = dup.cmd.Process.Kill()
		<-dup.exited
		dup.killedAt = time.Now()
		return fmt.Errorf("the second process of %s did not exit within 30s of SIGTERM", victim)
	}
	if code := dup.cmd.ProcessState.ExitCode(); code != 0 {
		return fmt.Errorf("the second process of %s exited with status %d after SIGTERM", victim, code)
	}
	// Its shutdown must not have marked the first one leaving, nor moved
	// anything.
	var member coordinationv1.Lease
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: shard.MemberLeaseName(victim)}, &member); err != nil {
		return err
	}
	if member.Annotations[v1alpha1.LeavingAnnotation] == "true" {
		res.note("I2", "the second process of %s marked the first one leaving when it stopped", victim)
	}
	return r.stayed(ctx, res, victim, owned, "after a second process of it stopped")
}

// stayed notes every cluster of owned whose Lease no longer names a process
// of victim.
func (r *Runner) stayed(ctx context.Context, res *Result, victim string, owned []string, when string) error {
	holders, err := r.holders(ctx)
	if err != nil {
		return err
	}
	for _, c := range owned {
		if holders[c] != victim {
			res.note("I2", "%s moved from %s to %q %s", c, victim, holders[c], when)
		}
	}
	return nil
}
