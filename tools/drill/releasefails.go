package drill

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/shard"
)

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
