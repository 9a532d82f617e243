package drill

import (
	"context"
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1alpha1 "github.com/clustershard/clustershard/api/example/v1alpha1"
	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/shard"
	"github.com/clustershard/clustershard/test/localcluster"
	"github.com/clustershard/clustershard/tools/fleet"
)

// holders returns the holder of every cluster Lease.
func (r *Runner) holders(ctx context.Context) (map[string]string, error) {
	var list coordinationv1.LeaseList
	if err := r.c.List(ctx, &list, client.InNamespace(Namespace), client.MatchingLabels{v1alpha1.LeaseRoleLabel: "cluster"}); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, l := range list.Items {
		if c := shard.LeaseCluster(&l); c != "" && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
			out[c] = shard.HolderName(*l.Spec.HolderIdentity)
		}
	}
	return out, nil
}

// journals reads every incarnation's journal.
func (r *Runner) journals() (map[*replica][]shard.JournalEntry, error) {
	out := map[*replica][]shard.JournalEntry{}
	for _, rep := range r.reps.all {
		entries, err := ReadJournal(rep.journal)
		if err != nil {
			return nil, err
		}
		out[rep] = entries
	}
	return out, nil
}

// runningSince returns, per cluster, since when a live replica holding its
// Lease has been running its manager (its latest "running" after its latest
// "owned", not followed by a hand-over or loss; a manager restarted for a new
// kubeconfig counts from its restart), if that is at or after since. A cluster that went back to a replica which ran it before counts
// only once that replica runs it again.
func (r *Runner) runningSince(ctx context.Context, since time.Time) (map[string]time.Time, error) {
	holders, err := r.holders(ctx)
	if err != nil {
		return nil, err
	}
	js, err := r.journals()
	if err != nil {
		return nil, err
	}
	out := map[string]time.Time{}
	for rep, entries := range js {
		if r.reps.live[rep.id] != rep || rep.paused {
			continue
		}
		current := map[string]time.Time{} // cluster → running since, in the current tenure
		for _, e := range entries {
			switch e.Event {
			case shard.JournalOwned, shard.JournalReleasing, shard.JournalLost, shard.JournalStopped:
				delete(current, e.Cluster)
			case shard.JournalRunning:
				current[e.Cluster] = e.Time // a restarted manager runs since its restart
			}
		}
		for c, t := range current {
			if holders[c] == rep.id && !t.Before(since) {
				out[c] = t
			}
		}
	}
	return out, nil
}

// settle waits until every cluster is held by a live replica whose manager
// for it runs.
func (r *Runner) settle(ctx context.Context, timeout time.Duration) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		running, err := r.runningSince(ctx, time.Time{})
		if err != nil {
			return false, nil //nolint:nilerr // journals are being written; retry
		}
		return len(running) == len(r.clusters), nil
	})
}

// clusterNamed returns the fleet's cluster of that name (zero if none).
func (r *Runner) clusterNamed(name string) fleet.Cluster {
	for _, cl := range r.clusters {
		if cl.Name == name {
			return cl
		}
	}
	return fleet.Cluster{}
}

// clustersOf returns the clusters replica id holds.
func (r *Runner) clustersOf(ctx context.Context, id string) ([]string, error) {
	holders, err := r.holders(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for c, h := range holders {
		if h == id {
			out = append(out, c)
		}
	}
	return out, nil
}

// victim picks the live replica holding the most clusters and returns them.
func (r *Runner) victim(ctx context.Context) (string, []string, error) {
	holders, err := r.holders(ctx)
	if err != nil {
		return "", nil, err
	}
	by := map[string][]string{}
	for c, h := range holders {
		by[h] = append(by[h], c)
	}
	best := ""
	for id := range r.reps.live {
		if best == "" || len(by[id]) > len(by[best]) || (len(by[id]) == len(by[best]) && id < best) {
			best = id
		}
	}
	return best, by[best], nil
}

// scenario injects one fault and checks the invariants.
func (r *Runner) scenario(ctx context.Context, name string) Result {
	res := Result{Scenario: name, Recovery: map[string]time.Duration{}}
	duration := fmt.Sprintf("%ds", 31+len(r.reps.all)+len(res.Scenario)) // a new spec.duration per scenario
	if err := r.bumpObjects(ctx, duration); err != nil {
		return res.fail("I3", "update sources: %v", err)
	}
	stopChurn := func() string { return "" }
	if r.o.Churn {
		stopChurn = r.churn(ctx)
	}
	if err := faults[name](ctx, r, &res); err != nil {
		res.note("I4", "%s: %v", name, err)
	}
	res.Churn = stopChurn()
	if err := r.settle(ctx, 60*time.Second); err != nil {
		res.note("I2", "fleet not settled within 60s after the fault: %v", err)
	}
	if err := r.bumpObjects(ctx, duration+"0"); err != nil { // and once more after it
		res.note("I3", "update sources: %v", err)
	}
	r.converged(ctx, &res, duration+"0")
	r.exclusive(&res)
	for _, u := range r.unexpectedExits() {
		res.note("I4", "%s", u)
	}
	for _, l := range r.leaks() {
		res.note("I4", "%s", l)
	}
	return res
}

// graceful and crash are the recovery bounds of I2.
func (r *Runner) crashBound() time.Duration { return r.o.LeaseDuration + 5*time.Second }

// gracefulBound is the longest a planned hand-over may leave a cluster
// without a manager: from its old owner's release (JournalReleasing: its
// drain done, no new write starts, its manager stopping) to its new owner's
// manager running. A planned hand-over is paced by the successor
// (--handover-window): the clusters not yet let go keep running on their
// old owner meanwhile, so the wait for their turn is no gap; the whole
// hand-over is bounded by handOverBound instead.
const gracefulBound = 2 * time.Second

// doubtBound bounds the gap of a cluster whose old owner left its Lease to
// expire because a remote write was in doubt: the write ends by its fence
// deadline (within the renew deadline), then the Lease expires.
func (r *Runner) doubtBound() time.Duration {
	return r.o.renewDeadline() + r.o.LeaseDuration + 5*time.Second
}

// handOverBound bounds a planned hand-over as a whole, from the fault until
// every moved cluster runs on its new owner: the replicas' --shutdown-timeout
// (25s), past which a shutdown hands over what is left at once.
const handOverBound = 25 * time.Second

// moved measures I2 for clusters that lost their manager at fault: each must
// run again on a live owner within bound, counted from the fault after a
// crash and from the old owner's release after a planned hand-over
// (gracefulBound). label prefixes the clusters in the report (a scenario
// may move clusters several times).
func (r *Runner) moved(ctx context.Context, res *Result, label string, clusters []string, fault time.Time, bound time.Duration) {
	graceful := bound == gracefulBound
	timeout := bound + 10*time.Second
	if graceful {
		timeout = handOverBound + 10*time.Second
	}
	got := r.recovery(ctx, clusters, fault, timeout)
	released := map[string]release{}
	if graceful {
		if js, err := r.journals(); err == nil { // unread: measured from the fault, stricter
			for _, entries := range js {
				lastReleases(released, entries, got, fault)
			}
		}
	}
	res.Moved += len(clusters)
	if b, err := time.ParseDuration(res.Bound); err != nil || bound > b {
		res.Bound = bound.Round(time.Millisecond).String() // the largest bound of the scenario
	}
	for _, c := range clusters {
		d, ok := got[c]
		key := c
		if label != "" {
			key = label + "/" + c
		}
		gap, limit := d, bound
		if rel, ok := released[c]; ok {
			gap = fault.Add(d).Sub(rel.at)
			if rel.abandoned {
				limit = r.doubtBound()
			}
		}
		switch {
		case !ok:
			res.note("I2", "%s not running again within %v", key, timeout)
		case graceful && d > handOverBound:
			res.note("I2", "%s running on its new owner %v after the fault > the hand-over's bound %v", key, d, handOverBound)
		case gap > limit && graceful:
			res.note("I2", "%s without a manager for %v (its old owner's release to its new owner's manager running) > bound %v", key, gap, limit)
		case gap > limit:
			res.note("I2", "%s running again after %v > bound %v", key, d, bound)
		}
		if ok {
			res.Recovery[key] = gap
		}
	}
}

// release is when a replica last let go of a moved cluster between a fault
// and the cluster's manager running on its new owner.
type release struct {
	at time.Time
	// abandoned says the Lease was left to expire (a remote write of the
	// cluster was still in doubt) rather than written free.
	abandoned bool
}

// lastReleases records in out, for each cluster of running (the time from
// fault until it ran on its new owner), when entries (one replica's
// journal) last released it between the fault and then, if later than what
// out holds, and whether that Lease was abandoned; a cluster no replica
// released (its owner died) gets none.
func lastReleases(out map[string]release, entries []shard.JournalEntry, running map[string]time.Duration, fault time.Time) {
	for _, e := range entries {
		d, ok := running[e.Cluster]
		if !ok || e.Time.Before(fault) || e.Time.After(fault.Add(d)) {
			continue
		}
		r := out[e.Cluster]
		switch {
		case e.Event == shard.JournalReleasing && e.Time.After(r.at):
			r.at, r.abandoned = e.Time, false
		case e.Event == shard.JournalReleased && e.Detail == shard.JournalAbandoned && !e.Time.Before(r.at):
			r.abandoned = true
		default:
			continue
		}
		out[e.Cluster] = r
	}
}

// recovery waits until each of clusters runs on a live replica after fault
// (or timeout) and returns the times to recovery.
func (r *Runner) recovery(ctx context.Context, clusters []string, fault time.Time, timeout time.Duration) map[string]time.Duration {
	out := map[string]time.Duration{}
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		running, err := r.runningSince(ctx, fault)
		if err != nil {
			return false, nil //nolint:nilerr // retry
		}
		for _, c := range clusters {
			if t, ok := running[c]; ok {
				out[c] = t.Sub(fault)
			}
		}
		return len(out) == len(clusters), nil
	})
	return out
}

// bumpObjects gives every source a new spec, so I3 checks the current spec.
func (r *Runner) bumpObjects(ctx context.Context, duration string) error {
	r.duration = duration
	var list examplev1alpha1.ExampleChaosList
	if err := r.c.List(ctx, &list); err != nil {
		return err
	}
	for i := range list.Items {
		o := &list.Items[i]
		before := o.DeepCopy()
		o.Spec.Duration = duration
		if err := r.c.Patch(ctx, o, client.MergeFrom(before)); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// converged checks I3 within the bound: every source has its remote copy
// with the current spec and RemoteSynced=True for its generation; no remote
// copy without its source; no source stuck in deletion.
func (r *Runner) converged(ctx context.Context, res *Result, duration string) {
	var problems []string
	start := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, r.o.Converge, true, func(context.Context) (bool, error) {
		problems = r.convergenceProblems(ctx, duration) // not the poll's context: its deadline would end the last check
		return len(problems) == 0, nil
	})
	res.Converged = time.Since(start).Round(10 * time.Millisecond).String()
	if err != nil {
		for _, p := range problems[:min(len(problems), 5)] {
			res.note("I3", "%s", p)
		}
	}
}

func (r *Runner) convergenceProblems(ctx context.Context, duration string) []string {
	var problems []string
	byName := map[string]fleet.Cluster{}
	for _, cl := range r.clusters {
		byName[cl.Name] = cl
	}
	var list examplev1alpha1.ExampleChaosList
	if err := r.c.List(ctx, &list); err != nil {
		return []string{err.Error()}
	}
	named := map[string]string{} // namespace/name of each source → the cluster it names
	for _, src := range list.Items {
		key := src.Spec.RemoteCluster + "/" + src.Namespace + "/" + src.Name
		named[src.Namespace+"/"+src.Name] = src.Spec.RemoteCluster
		cl, ok := byName[src.Spec.RemoteCluster]
		switch {
		case !src.DeletionTimestamp.IsZero():
			problems = append(problems, key+": source stuck in deletion")
			continue
		case !ok:
			problems = append(problems, key+": source names a cluster outside the fleet")
			continue
		}
		cond := meta.FindStatusCondition(src.Status.Conditions, v1alpha1.ConditionRemoteSynced)
		switch {
		case cond == nil:
			problems = append(problems, key+": no RemoteSynced condition")
		case cond.Status != "True" || cond.ObservedGeneration != src.Generation:
			problems = append(problems, fmt.Sprintf("%s: RemoteSynced %s for generation %d of %d: %s: %s",
				key, cond.Status, cond.ObservedGeneration, src.Generation, cond.Reason, cond.Message))
		}
		var cp examplev1alpha1.ExampleChaos
		err := r.remote(cl.Remote).Get(ctx, client.ObjectKeyFromObject(&src), &cp)
		switch {
		case err != nil:
			problems = append(problems, key+": no remote copy: "+err.Error())
		case cp.Labels[v1alpha1.CopyClusterLabel] != cl.Name:
			problems = append(problems, fmt.Sprintf("%s: the remote copy is %s's", key, cp.Labels[v1alpha1.CopyClusterLabel]))
		case cp.Spec.Duration != src.Spec.Duration || cp.Spec.Action != src.Spec.Action || (src.Spec.Duration != duration && !strings.HasPrefix(src.Name, "churn-")):
			problems = append(problems, key+": remote copy has an old spec")
		}
	}
	// Every copy in every cluster, in any namespace, belongs to a source
	// that names that cluster now: none of a deleted source, none left
	// behind in the cluster a source moved away from.
	for _, cl := range r.clusters {
		var copies examplev1alpha1.ExampleChaosList
		if err := r.remote(cl.Remote).List(ctx, &copies, client.MatchingLabels{v1alpha1.CopyClusterLabel: cl.Name}); err != nil {
			return []string{err.Error()}
		}
		for _, cp := range copies.Items {
			key := cl.Name + "/" + cp.Namespace + "/" + cp.Name
			switch now, ok := named[cp.Namespace+"/"+cp.Name]; {
			case !ok:
				problems = append(problems, key+": remote copy without a source")
			case now != cl.Name:
				problems = append(problems, fmt.Sprintf("%s: remote copy left behind, its source names %q now", key, now))
			}
		}
		if r.o.Helm {
			problems = append(problems, r.releaseProblems(ctx, cl)...)
		}
	}
	return problems
}

// releaseProblems checks the cluster's agent release: deployed, and still at
// revision 1 (no hand-over, restart or resync may upgrade an unchanged spec).
func (r *Runner) releaseProblems(ctx context.Context, cl fleet.Cluster) []string {
	var records corev1.SecretList
	if err := r.remote(cl.Remote).List(ctx, &records, client.InNamespace(cl.Scope), client.MatchingLabels{"owner": "helm", "name": fleet.AgentRelease}); err != nil {
		return []string{err.Error()}
	}
	var revisions []string
	for _, s := range records.Items {
		revisions = append(revisions, s.Labels["version"]+":"+s.Labels["status"])
	}
	if len(revisions) != 1 || revisions[0] != "1:deployed" {
		return []string{fmt.Sprintf("%s: Helm release %s/%s has revisions %v, want only 1:deployed", cl.Name, cl.Scope, fleet.AgentRelease, revisions)}
	}
	return nil
}

// exclusive checks I1 over every journal so far: no two replicas' held
// intervals over one cluster overlap (HeldIntervals: a manager may run),
// and every write the remote API servers
// recorded for a cluster lies in its writer's authority and in no one
// else's. The audit logs are read before the journals, so every write read
// happened before the intervals' "now".
func (r *Runner) exclusive(res *Result) {
	var writes []Write
	for _, rc := range r.cp.Remotes {
		w, err := ReadAuditWrites(localcluster.AuditLogPath(r.dir, rc.Name))
		if err != nil {
			res.note("I1", "read the audit log of %s: %v", rc.Name, err)
			return
		}
		writes = append(writes, w...)
	}
	js, err := r.journals()
	if err != nil {
		res.note("I1", "read journals: %v", err)
		return
	}
	var ivs, held []Interval
	now := time.Now()
	for rep, entries := range js {
		ivs = append(ivs, Intervals(entries, rep.renewDeadline, rep.grace, rep.killedAt, now)...)
		held = append(held, HeldIntervals(entries, rep.renewDeadline, rep.grace, rep.killedAt, now)...)
	}
	res.Intervals, res.Writes = len(ivs), len(writes)
	// Every journal and write so far is checked again (a write may reach an
	// audit log late), but a violation is reported by the first scenario
	// that finds it only, so the report points at the fault that caused it.
	for _, o := range Overlaps(held) {
		if r.firstSeen(o.String()) {
			res.note("I1", "%s", o)
		}
	}
	var stray []string
	for _, s := range StrayWrites(writes, ivs) {
		if r.firstSeen(s) {
			stray = append(stray, s)
		}
	}
	for _, s := range stray[:min(len(stray), 10)] {
		res.note("I1", "remote write %s", s)
	}
	if len(stray) > 10 {
		res.note("I1", "and %d more remote writes out of authority", len(stray)-10)
	}
}

// firstSeen reports whether an I1 violation is reported for the first time
// in this drill, and remembers it.
func (r *Runner) firstSeen(violation string) bool {
	if r.seenI1[violation] {
		return false
	}
	r.seenI1[violation] = true
	return true
}

// stoppedSince returns the clusters of which some replica gave up authority
// (releasing or lost) at or after since, by the journals.
func (r *Runner) stoppedSince(clusters []string, since time.Time) []string {
	js, err := r.journals()
	if err != nil {
		return nil
	}
	stopped := map[string]bool{}
	for _, entries := range js {
		for _, e := range entries {
			if (e.Event == shard.JournalReleasing || e.Event == shard.JournalLost) && !e.Time.Before(since) {
				stopped[e.Cluster] = true
			}
		}
	}
	var out []string
	for _, c := range clusters {
		if stopped[c] {
			out = append(out, c)
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
