package replication

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Field managers of the two writers of a source's status: replicate owns the
// RemoteSynced condition, monitor the mirrored status. Server-side apply
// merges their fields (conditions are a list map keyed by type).
const (
	ReplicateFieldManager = "clustershard-replicate"
	MonitorFieldManager   = "clustershard-monitor"
	CopyFieldManager      = "clustershard"
)

// SetRemoteSynced applies the RemoteSynced condition to a source's status
// when it differs from what the source shows (status, reason, message or the
// generation it was observed at). It returns whether it wrote.
func SetRemoteSynced(ctx context.Context, c client.Client, src *unstructured.Unstructured, ok bool, reason, message string) (bool, error) {
	status := string(metav1.ConditionFalse)
	if ok {
		status = string(metav1.ConditionTrue)
	}
	conds, _, _ := unstructured.NestedSlice(src.Object, "status", "conditions")
	transition := time.Now().UTC().Format(time.RFC3339)
	for _, raw := range conds {
		m, _ := raw.(map[string]any)
		if m["type"] != ConditionRemoteSynced {
			continue
		}
		observed, _, _ := unstructured.NestedInt64(m, "observedGeneration")
		if m["status"] == status && m["reason"] == reason && m["message"] == message && observed == src.GetGeneration() {
			return false, nil
		}
		if m["status"] == status {
			if t, ok := m["lastTransitionTime"].(string); ok {
				transition = t
			}
		}
	}
	apply := &unstructured.Unstructured{Object: map[string]any{
		"status": map[string]any{"conditions": []any{map[string]any{
			"type": ConditionRemoteSynced, "status": status, "reason": reason, "message": message,
			"lastTransitionTime": transition, "observedGeneration": src.GetGeneration(),
		}}},
	}}
	apply.SetGroupVersionKind(src.GroupVersionKind())
	apply.SetNamespace(src.GetNamespace())
	apply.SetName(src.GetName())
	return true, c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(apply), client.FieldOwner(ReplicateFieldManager), client.ForceOwnership)
}
