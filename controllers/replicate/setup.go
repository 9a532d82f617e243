package replicate

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/clustershard/clustershard/controllers/replication"
	"github.com/clustershard/clustershard/internal/metrics"
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
		For(r.Kind.New(), builder.WithPredicates(bound)).
		WatchesRawSource(source.Channel(clusterEvents, handler.EnqueueRequestsFromMapFunc(r.sourcesOfCluster))).
		Complete(r)
}

func targets(k replication.Kind, u *unstructured.Unstructured) []string {
	out := []string{}
	if c := k.Cluster(u); c != "" {
		out = append(out, c)
	}
	if p := u.GetAnnotations()[replication.ReplicatedToAnnotation]; p != "" && p != k.Cluster(u) {
		out = append(out, p)
	}
	return out
}

func (r *Reconciler) sourcesOfCluster(ctx context.Context, o client.Object) []reconcile.Request {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(r.Kind.GVK.GroupVersion().WithKind(r.Kind.GVK.Kind + "List"))
	if err := r.Client.List(ctx, list, client.MatchingFields{ClusterIndex: o.GetName()}); err != nil {
		// Lost events are not retried: say so loudly.
		ctrl.LoggerFrom(ctx).Error(err, "Cannot list the sources of a cluster", "cluster", o.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}
