package drill

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1alpha1 "github.com/clustershard/clustershard/api/example/v1alpha1"
)

// SharedNamespace is the namespace that every drill cluster watches besides
// its own scope: the moving sources live there, one per cluster, so that
// each can name any cluster and be moved from one to another (the retarget
// scenario), and I3 checks them in every scenario.
const SharedNamespace = "drill-shared"

// movingPrefix names the moving sources: moving-<i> names cluster i at
// first.
const movingPrefix = "moving-"

// ensureMovingSources creates the moving sources that are missing (deleted
// by a retarget round), each naming the cluster of its index.
func (r *Runner) ensureMovingSources(ctx context.Context) error {
	for i, cl := range r.clusters {
		obj := &examplev1alpha1.ExampleChaos{
			ObjectMeta: metav1.ObjectMeta{Namespace: SharedNamespace, Name: movingPrefix + strconv.Itoa(i)},
			Spec:       examplev1alpha1.ExampleChaosSpec{RemoteCluster: cl.Name, Action: "pod-kill", Duration: r.duration},
		}
		if err := r.c.Create(ctx, obj); client.IgnoreAlreadyExists(err) != nil {
			return err
		}
	}
	return nil
}

// retarget moves every moving source to the next cluster of the fleet, so
// its copy must leave the cluster it was in (removed by that cluster's
// owner) before the new cluster's owner copies it, and deletes every third
// one right after its move: nothing may be left in either cluster. It
// returns how many it moved and deleted.
func (r *Runner) retarget(ctx context.Context) (moved, deleted int, err error) {
	index := map[string]int{}
	for i, cl := range r.clusters {
		index[cl.Name] = i
	}
	var list examplev1alpha1.ExampleChaosList
	if err := r.c.List(ctx, &list, client.InNamespace(SharedNamespace)); err != nil {
		return 0, 0, err
	}
	var errs []error
	for i := range list.Items {
		src := &list.Items[i]
		if !src.DeletionTimestamp.IsZero() || !strings.HasPrefix(src.Name, movingPrefix) {
			continue
		}
		next := r.clusters[(index[src.Spec.RemoteCluster]+1)%len(r.clusters)].Name
		patch := fmt.Appendf(nil, `{"spec":{"remoteCluster":%q}}`, next)
		if err := r.c.Patch(ctx, src, client.RawPatch(client.Merge.Type(), patch)); err != nil {
			errs = append(errs, client.IgnoreNotFound(err))
			continue
		}
		moved++
		if n, _ := strconv.Atoi(strings.TrimPrefix(src.Name, movingPrefix)); n%3 == r.retargets%3 {
			if err := r.c.Delete(ctx, src); client.IgnoreNotFound(err) != nil {
				errs = append(errs, err)
				continue
			}
			deleted++
		}
	}
	r.retargets++
	return moved, deleted, errors.Join(errs...)
}

// retargetFault moves sources between clusters while ownership moves:
// first while the replica with the most clusters is killed (the clusters it
// held have no manager for a lease duration, so moves from and to them
// wait), then again while it hands its clusters over on SIGTERM. Each
// round also deletes a third of the moved sources. I3 then checks every
// cluster: each source's copy only in the cluster it names now, no copy
// left in another, none of a deleted source.
func retargetFault(ctx context.Context, r *Runner, res *Result) error {
	if err := r.ensureMovingSources(ctx); err != nil {
		return err
	}
	if err := r.settle(ctx, 60*time.Second); err != nil {
		return err
	}
	var notes []string
	victim, owned, err := r.victim(ctx)
	if err != nil {
		return err
	}
	res.Victim = victim
	at := time.Now()
	r.kill(victim)
	moved, deleted, err := r.retarget(ctx)
	if err != nil {
		return fmt.Errorf("retarget during the kill: %w", err)
	}
	notes = append(notes, fmt.Sprintf("%d sources moved and %d of them deleted while %s was killed", moved, deleted, victim))
	r.moved(ctx, res, "kill", owned, at, r.crashBound())
	if err := r.startReady(ctx, victim); err != nil {
		return err
	}
	if err := r.settle(ctx, 60*time.Second); err != nil {
		return err
	}
	if err := r.ensureMovingSources(ctx); err != nil {
		return err
	}
	if owned, err = r.clustersOf(ctx, victim); err != nil {
		return err
	}
	at = time.Now()
	wait := r.termAsync(victim)
	moved, deleted, err = r.retarget(ctx)
	notes = append(notes, fmt.Sprintf("%d sources moved and %d of them deleted while %s handed over", moved, deleted, victim))
	res.Notes = append(res.Notes, strings.Join(notes, "; "))
	r.moved(ctx, res, "term", owned, at, gracefulBound)
	return errors.Join(err, wait(), r.startReady(ctx, victim))
}
