package replicate

import (
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/remotecopy"
)

// After a take-over, the re-check of a cluster's sources serves the ones
// created, changed, failed or deleted since their last sync before the ones
// already in sync, and a source a user changes meanwhile (default priority)
// also goes before the resyncs.
func TestRecheckServesChangedSourcesBeforeResyncs(t *testing.T) {
	k, err := remotecopy.ParseKind("ExampleChaos.v1alpha1.example.clustershard.io/examplechaos")
	if err != nil {
		t.Fatal(err)
	}
	const cluster = "c1"
	source := func(name string, spec map[string]any, outcome *remotecopy.Outcome) unstructured.Unstructured {
		u := unstructured.Unstructured{Object: map[string]any{"spec": spec}}
		u.SetNamespace("ns")
		u.SetName(name)
		ann := map[string]string{v1alpha1.ReplicatedToAnnotation: cluster}
		u.SetAnnotations(ann)
		if outcome != nil {
			data, _ := json.Marshal(outcome)
			ann[v1alpha1.OutcomeAnnotation] = string(data)
			u.SetAnnotations(ann)
		}
		return u
	}
	spec := map[string]any{"remoteCluster": cluster, "duration": "1m"}
	hash := remotecopy.SpecHash(&unstructured.Unstructured{Object: map[string]any{"spec": spec}})
	syncedTo := &remotecopy.Outcome{Status: string(metav1.ConditionTrue), Reason: v1alpha1.ReasonSynced, SpecHash: hash}
	failed := &remotecopy.Outcome{Status: string(metav1.ConditionFalse), Reason: v1alpha1.ReasonSyncFailed, SpecHash: hash}
	changed := map[string]any{"remoteCluster": cluster, "duration": "2m"}
	deleting := source("deleting", spec, syncedTo)
	now := metav1.Now()
	deleting.SetDeletionTimestamp(&now)
	sources := []unstructured.Unstructured{
		source("synced-0", spec, syncedTo),
		source("changed", changed, syncedTo),
		source("synced-1", spec, syncedTo),
		source("never", spec, nil),
		source("failed", spec, failed),
		deleting,
		source("moved", map[string]any{"remoteCluster": "c2"}, syncedTo),
		source("synced-2", spec, syncedTo),
	}

	q := priorityqueue.New[reconcile.Request]("recheck-test")
	defer q.ShutDown()
	enqueue(q, sources, cluster, k)
	q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "user-edit"}})

	var order []string
	for q.Len() > 0 {
		req, _ := q.Get()
		order = append(order, req.Name)
		q.Done(req)
	}
	if len(order) != len(sources)+1 {
		t.Fatalf("served %v, want %d requests", order, len(sources)+1)
	}
	first, last := order[:len(order)-3], order[len(order)-3:]
	for _, name := range last {
		if name != "synced-0" && name != "synced-1" && name != "synced-2" {
			t.Fatalf("served %v: the resyncs of sources in sync must come last", order)
		}
	}
	for _, name := range first {
		if len(name) > 6 && name[:6] == "synced" {
			t.Fatalf("served %v: a resync went before a changed source", order)
		}
	}
}
