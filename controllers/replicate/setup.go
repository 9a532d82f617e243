package replicate

import (
	"context"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/metrics"
	"github.com/clustershard/clustershard/internal/remotecopy"
)

// ClusterIndex indexes sources by the remote cluster they name or were copied to.
const ClusterIndex = "clustershard.io/target-cluster"

// SetupWithManager registers the controller of r.Kind: sources that name a
// remote cluster (or still hold a copy), re-enqueued per cluster by events.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, clusterEvents <-chan event.GenericEvent) error {
	metrics.InitKind(r.Kind.GVK.Kind)
	if err := mgr.GetFieldIndexer().IndexField(ctx, r.Kind.New(), ClusterIndex, func(o client.Object) []string {
		return targets(r.Kind, o.(*unstructured.Unstructured))
	}); err != nil {
		return err
	}
	bound := predicate.NewPredicateFuncs(func(o client.Object) bool {
		u, ok := o.(*unstructured.Unstructured)
		return ok && len(targets(r.Kind, u)) > 0
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named(name(r.Kind)).
		WithOptions(controller.Options{RateLimiter: rateLimiter(), MaxConcurrentReconciles: r.workers()}).
		For(r.Kind.New(), builder.WithPredicates(bound)).
		WatchesRawSource(source.Channel(clusterEvents, r.recheckHandler())).
		Complete(r)
}

// Defaults of the Reconciler's timings, also the defaults of the replica's
// flags.
const (
	DefaultUnownedGrace = 30 * time.Second
	DefaultRecheck      = 10 * time.Second
	// DefaultWorkers is how many sources of one kind reconcile at once.
	// A sync waits on two API servers (the remote write, the source's
	// outcome), so one worker leaves both mostly idle.
	DefaultWorkers = 16
)

func (r *Reconciler) workers() int {
	if r.Workers <= 0 {
		return DefaultWorkers
	}
	return r.Workers
}

func (r *Reconciler) recheck() time.Duration {
	if r.Recheck <= 0 {
		return DefaultRecheck
	}
	return r.Recheck
}

// MaxRetryDelay caps the backoff of a source whose copy cannot be written:
// controller-runtime's default grows to 16 minutes, too long to notice that
// a remote webhook (failurePolicy Fail) or a namespace came back.
const MaxRetryDelay = time.Minute

// rateLimiter is controller-runtime's default with the delay capped at
// MaxRetryDelay: per-source exponential backoff from 5 ms, and no more than
// 10 retries a second (bursts of 100) over all sources.
func rateLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, MaxRetryDelay),
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}

func targets(k remotecopy.Kind, u *unstructured.Unstructured) []string {
	out := []string{}
	if c := k.Cluster(u); c != "" {
		out = append(out, c)
	}
	if p := u.GetAnnotations()[v1alpha1.ReplicatedToAnnotation]; p != "" && p != k.Cluster(u) {
		out = append(out, p)
	}
	return out
}
