package replicate

import (
	"context"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// bulk enqueues the requests of h's generic events (every source of a
// cluster this replica acquired or lost) at low priority, so that after a
// take-over a source a user just changed (an update event, default
// priority) is served before the re-check of every source the cluster had.
type bulk struct {
	handler.EventHandler
}

// Generic implements handler.EventHandler.
func (b bulk) Generic(ctx context.Context, evt event.TypedGenericEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	b.EventHandler.Generic(ctx, evt, lowQueue{q})
}

// lowQueue adds at handler.LowPriority when the queue has priorities (the
// controller's default queue does).
type lowQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
}

func (l lowQueue) Add(item reconcile.Request) {
	if pq, ok := l.TypedRateLimitingInterface.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(handler.LowPriority)}, item)
		return
	}
	l.TypedRateLimitingInterface.Add(item)
}
