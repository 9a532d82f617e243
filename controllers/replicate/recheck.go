package replicate

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/remotecopy"
)

// recheckHandler enqueues every source of a cluster named by a generic event
// (the cluster was acquired, lost, or its manager started or stopped here).
// A source whose recorded outcome already says its current content is synced
// to that cluster is a mere resync and queues at handler.LowPriority; any
// other (created, changed or failed since its last sync) queues at the
// default priority, as a user's change does. So after a take-over of a
// cluster with many sources, the ones users changed meanwhile are served
// before the re-check of the ones already in sync.
func (r *Reconciler) recheckHandler() handler.EventHandler {
	return handler.Funcs{
		GenericFunc: func(ctx context.Context, evt event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if evt.Object == nil {
				return
			}
			enqueue(q, r.sourcesOf(ctx, evt.Object.GetName()), evt.Object.GetName(), r.Kind)
		},
	}
}

// sourcesOf lists the sources that name the cluster or were copied to it.
func (r *Reconciler) sourcesOf(ctx context.Context, cluster string) []unstructured.Unstructured {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(r.Kind.GVK.GroupVersion().WithKind(r.Kind.GVK.Kind + "List"))
	if err := r.Client.List(ctx, list, client.MatchingFields{ClusterIndex: cluster}); err != nil {
		// Lost events are not retried: say so loudly.
		ctrl.LoggerFrom(ctx).Error(err, "Cannot list the sources of a cluster", "cluster", cluster)
		return nil
	}
	return list.Items
}

// enqueue adds a request per source, at low priority for a mere resync when
// the queue has priorities (the controller's default queue does).
func enqueue(q workqueue.TypedRateLimitingInterface[reconcile.Request], sources []unstructured.Unstructured, cluster string, k remotecopy.Kind) {
	pq, prio := q.(priorityqueue.PriorityQueue[reconcile.Request])
	for i := range sources {
		req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&sources[i])}
		if prio && inSync(k, &sources[i], cluster) {
			pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(handler.LowPriority)}, req)
			continue
		}
		q.Add(req)
	}
}

// inSync reports whether the source's recorded outcome says its current
// content was synced to the cluster it still names and it is not being
// deleted: re-checking it only confirms what its last owner did.
func inSync(k remotecopy.Kind, src *unstructured.Unstructured, cluster string) bool {
	if !src.GetDeletionTimestamp().IsZero() || k.Cluster(src) != cluster || src.GetAnnotations()[v1alpha1.ReplicatedToAnnotation] != cluster {
		return false
	}
	o, ok := remotecopy.ReadOutcome(src)
	return ok && o.Status == string(metav1.ConditionTrue) && o.Reason == v1alpha1.ReasonSynced && o.SpecHash == remotecopy.SpecHash(src)
}
