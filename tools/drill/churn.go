package drill

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1alpha1 "github.com/clustershard/clustershard/api/example/v1alpha1"
)

// churnEvery is the pace of the churn: one create, one update and one
// delete per tick.
const churnEvery = 100 * time.Millisecond

// churn creates, updates and deletes sources across the fleet until the
// returned stop is called; stop returns how many of each it did.
func (r *Runner) churn(ctx context.Context) (stop func() string) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var created, updated, deleted, failed int
	wg.Go(func() {
		tick := time.NewTicker(churnEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			n := r.churned
			r.churned++
			if r.churnOne(ctx, n, &created, &updated, &deleted) != nil {
				failed++
			}
		}
	})
	return func() string {
		cancel()
		wg.Wait()
		return fmt.Sprintf("churn: %d created, %d updated, %d deleted, %d failed calls", created, updated, deleted, failed)
	}
}

// churnOne creates churn-n, updates churn-(n-1) and deletes churn-(n-3), each
// in the scope of its cluster.
func (r *Runner) churnOne(ctx context.Context, n int, created, updated, deleted *int) error {
	obj := func(i int) *examplev1alpha1.ExampleChaos {
		cl := r.clusters[i%len(r.clusters)]
		return &examplev1alpha1.ExampleChaos{
			ObjectMeta: metav1.ObjectMeta{Namespace: cl.Scope, Name: fmt.Sprintf("churn-%d", i)},
			Spec:       examplev1alpha1.ExampleChaosSpec{RemoteCluster: cl.Name, Action: "pod-kill", Duration: r.duration},
		}
	}
	if err := r.c.Create(ctx, obj(n)); err != nil {
		return err
	}
	*created++
	if n >= 1 {
		prev := obj(n - 1)
		if err := r.c.Patch(ctx, prev, client.RawPatch(client.Merge.Type(), []byte(`{"spec":{"action":"network-delay"}}`))); client.IgnoreNotFound(err) != nil {
			return err
		}
		*updated++
	}
	if n >= 3 {
		if err := r.c.Delete(ctx, obj(n-3)); client.IgnoreNotFound(err) != nil {
			return err
		}
		*deleted++
	}
	return nil
}
