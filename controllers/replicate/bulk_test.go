package replicate

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/clustershard/clustershard/api/v1alpha1"
)

// The re-check of every source of a cluster (a take-over's cluster event)
// queues behind a source a user changed meanwhile.
func TestClusterEventsQueueBehindUserChanges(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("bulk-test")
	defer q.ShutDown()
	req := func(name string) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}
	}
	h := bulk{handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{req("bulk-0"), req("bulk-1"), req("bulk-2")}
	})}
	h.Generic(t.Context(), event.GenericEvent{Object: &v1alpha1.RemoteCluster{}}, q)
	q.Add(req("changed")) // an update event's default priority
	if got, _ := q.Get(); got != req("changed") {
		t.Fatalf("served %v first, want the changed source before the cluster's re-check", got)
	}
	if n := q.Len(); n != 3 {
		t.Fatalf("%d requests left, want the cluster's three", n)
	}
}
