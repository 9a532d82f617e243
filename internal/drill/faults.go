package drill

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/fleet"
	"github.com/clustershard/clustershard/internal/localcluster"
	"github.com/clustershard/clustershard/internal/netproxy"
	"github.com/clustershard/clustershard/shard"
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
	rep := r.reps.live[victim]
	at := time.Now()
	if err := rep.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	rep.paused = true
	r.moved(ctx, res, "", owned, at, r.crashBound())
	// Stay stopped past the lease duration even if the take-over was quick.
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return time.Since(at) > r.o.LeaseDuration+time.Second, nil
	})
	rep.paused = false
	return rep.cmd.Process.Signal(syscall.SIGCONT)
}

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

// blackholeFault is a partition that closes nothing, on both of the
// victim's paths: its way to the management API server and the way to
// every cluster it holds (their kubeconfigs lead through proxies of the
// runner first) keep their connections (and accept new ones) but forward
// no byte either way for longer than the lease duration, so the victim
// learns of it only from its own timeouts (every call of an ownership pass
// is bounded). It fences itself on its local clock, the others take its
// clusters, and what was held back is delivered after the heal: a late
// renewal, which must not revive the victim's old ownership, and remote
// writes, which must not land in another replica's authority (I1).
func blackholeFault(ctx context.Context, r *Runner, res *Result) error {
	victim, owned, err := r.victim(ctx)
	if err != nil {
		return err
	}
	res.Victim = victim
	byName := map[string]fleet.Cluster{}
	for _, cl := range r.clusters {
		byName[cl.Name] = cl
	}
	var remotes []*netproxy.Proxy
	var restores []func() error
	defer func() {
		for i, p := range remotes {
			p.Heal()
			if err := restores[i](); err != nil {
				res.note("I4", "restore a kubeconfig: %v", err)
			}
			_ = p.Close()
		}
	}()
	for _, c := range owned {
		p, restore, err := r.proxyCluster(ctx, byName[c])
		if err != nil {
			return err
		}
		remotes, restores = append(remotes, p), append(restores, restore)
	}
	if owned, err = r.clustersOf(ctx, victim); err != nil {
		return err
	}
	p := r.proxies[victim]
	at := time.Now()
	p.Hold()
	for _, rp := range remotes {
		rp.Hold()
	}
	// Healed past the lease duration, while the others take over: their
	// managers for these clusters reach them through the same proxies.
	healed := make(chan struct{})
	time.AfterFunc(r.o.LeaseDuration+time.Second, func() {
		p.Heal()
		for _, rp := range remotes {
			rp.Heal()
		}
		close(healed)
	})
	r.moved(ctx, res, "", owned, at, r.crashBound())
	<-healed // held past the lease duration even if the take-over was quick
	return nil
}

// releaseFailsFault makes a live replica's releases fail: while a
// ValidatingAdmissionPolicy of the management API server refuses every
// release of a cluster Lease held by the replica with the most clusters,
// another replica is stopped and started again, and the busiest one hands
// clusters over to it. The policy is lifted half a renew deadline after the
// hand-over began (its membership stays valid throughout). The refused
// releases must be retried, or the Leases freed on a later pass, rather
// than forgotten with the Lease still naming a live replica that runs
// nothing: every cluster it handed over runs again within the crash bound
// (I2).
func releaseFailsFault(ctx context.Context, r *Runner, res *Result) error {
	victim, _, err := r.victim(ctx)
	if err != nil {
		return err
	}
	res.Victim = victim
	var joiner string
	for _, id := range r.liveIDs() {
		if id != victim {
			joiner = id
		}
	}
	if err := r.term(joiner); err != nil {
		return err
	}
	if err := r.settle(ctx, 60*time.Second); err != nil {
		return err
	}
	lift, err := r.refuseReleases(ctx, victim)
	if err != nil {
		return errors.Join(err, lift(), r.startReady(ctx, joiner))
	}
	rep := r.reps.live[victim]
	at := time.Now()
	if err := r.startReplica(joiner); err != nil {
		return errors.Join(err, lift())
	}
	if !pollUntil(ctx, r.readyTimeout(), func() bool { return len(releasedSince(rep.journal, at)) > 0 }) {
		return errors.Join(fmt.Errorf("%s handed nothing over within %v of %s's start", victim, r.readyTimeout(), joiner), lift())
	}
	time.Sleep(r.renewDeadline() / 2)
	if err := lift(); err != nil {
		return err
	}
	res.Notes = append(res.Notes, fmt.Sprintf("releases of %s refused until %v after it began handing clusters over to %s",
		victim, r.renewDeadline()/2, joiner))
	err = r.waitReady(ctx, joiner, r.readyTimeout())
	r.moved(ctx, res, "", releasedSince(rep.journal, at), at, r.crashBound())
	return err
}

// refuseReleases makes the management API server refuse every release of a
// cluster Lease held by replica id (an update that clears its holder), and
// returns once it does; lift removes the refusal.
func (r *Runner) refuseReleases(ctx context.Context, id string) (lift func() error, err error) {
	fail := admissionregistrationv1.Fail
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "drill-refuse-releases"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"coordination.k8s.io"}, APIVersions: []string{"v1"}, Resources: []string{"leases"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: fmt.Sprintf(`!(has(oldObject.spec.holderIdentity) && oldObject.spec.holderIdentity == %q && (!has(object.spec.holderIdentity) || object.spec.holderIdentity == ""))`, id),
				Message:    "the drill refuses the releases of " + id,
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: policy.Name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	lift = func() error {
		var errs []error
		for _, o := range []client.Object{binding, policy} {
			errs = append(errs, client.IgnoreNotFound(r.c.Delete(context.WithoutCancel(ctx), o)))
		}
		return errors.Join(errs...)
	}
	for _, o := range []client.Object{policy, binding} {
		if err := r.c.Create(ctx, o); err != nil {
			return lift, err
		}
	}
	// The policy takes effect within seconds: until a dry-run release of
	// one of its Leases is refused.
	owned, err := r.clustersOf(ctx, id)
	if err != nil || len(owned) == 0 {
		return lift, fmt.Errorf("%s holds no cluster Lease to refuse the release of: %w", id, err)
	}
	if !pollUntil(ctx, 30*time.Second, func() bool {
		var l coordinationv1.Lease
		if err := r.c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: shard.ClusterLeaseName(owned[0])}, &l); err != nil {
			return false
		}
		l.Spec.HolderIdentity = ptr.To("")
		return apierrors.IsInvalid(r.c.Update(ctx, &l, client.DryRunAll))
	}) {
		return lift, errors.New("the release-refusing policy took no effect within 30s")
	}
	return lift, nil
}

// releasedSince returns the clusters a journal shows handed over
// ("releasing") at or after since.
func releasedSince(journal string, since time.Time) []string {
	entries, err := ReadJournal(journal)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if e.Event == shard.JournalReleasing && !e.Time.Before(since) && !slices.Contains(out, e.Cluster) {
			out = append(out, e.Cluster)
		}
	}
	return out
}

// pollUntil polls cond every 10ms until it holds (true) or timeout passes.
func pollUntil(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	return wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	}) == nil
}

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
	if member.Annotations[shard.LeavingAnnotation] == "true" {
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
