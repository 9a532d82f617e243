package remotecopy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
)

// Outcome is the outcome of a source's replication, kept as JSON in
// v1alpha1.OutcomeAnnotation. It does not depend on metadata.generation, which a
// kind without a status subresource bumps on every status write: SpecHash
// says which content of the source the outcome is about.
type Outcome struct {
	// Status is "True" when the copy reflects the source, else "False".
	Status string `json:"status"`
	// Reason is a CamelCase reason, as in the RemoteSynced condition.
	Reason string `json:"reason"`
	// Message is the detail, with the remote's own words on a failure.
	Message string `json:"message,omitempty"`
	// SpecHash is SpecHash of the source the outcome is about.
	SpecHash string `json:"specHash"`
}

// ReadOutcome returns the outcome a source carries, if any.
func ReadOutcome(src client.Object) (Outcome, bool) {
	raw, ok := src.GetAnnotations()[v1alpha1.OutcomeAnnotation]
	if !ok {
		return Outcome{}, false
	}
	var o Outcome
	if err := json.Unmarshal([]byte(raw), &o); err != nil {
		return Outcome{}, false
	}
	return o, true
}

// SpecHash hashes what a copy is made of: the source's content except its
// type, metadata and status (16 hex digits of SHA-256 over canonical JSON).
func SpecHash(src *unstructured.Unstructured) string {
	content := map[string]any{}
	for k, v := range src.Object {
		if k != "apiVersion" && k != "kind" && k != "metadata" && k != "status" {
			content[k] = v
		}
	}
	data, _ := json.Marshal(content) // maps marshal with sorted keys
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// SetRemoteSynced records a source's outcome in the form its kind's schema
// accepts: the v1alpha1.OutcomeAnnotation always, and the RemoteSynced condition in
// status.conditions with the fields the schema keeps (observedGeneration
// only with a status subresource, where generation counts spec changes). It
// writes only what differs, with optimistic concurrency, through /status
// when the kind has a status subresource and with the object when not. It
// returns whether it wrote.
func SetRemoteSynced(ctx context.Context, c client.Client, k Kind, src *unstructured.Unstructured, ok bool, reason, message string) (bool, error) {
	shape := k.Shape()
	status := string(metav1.ConditionFalse)
	if ok {
		status = string(metav1.ConditionTrue)
	}
	want := Outcome{Status: status, Reason: reason, Message: message, SpecHash: SpecHash(src)}
	cond := map[string]any{"type": v1alpha1.ConditionRemoteSynced, "status": status, "reason": reason, "message": message}
	if shape.StatusSubresource {
		cond["observedGeneration"] = src.GetGeneration()
	}
	for key := range cond {
		if !shape.Keeps(key) {
			delete(cond, key)
		}
	}
	old := findCondition(src)
	condCurrent := !shape.Conditions() || sameCondition(old, cond)
	if shape.Keeps("lastTransitionTime") {
		cond["lastTransitionTime"] = time.Now().UTC().Format(time.RFC3339)
		if old != nil && old["status"] == status && old["lastTransitionTime"] != nil {
			cond["lastTransitionTime"] = old["lastTransitionTime"]
		}
	}
	have, _ := ReadOutcome(src)
	annCurrent := have == want
	if annCurrent && condCurrent {
		return false, nil
	}
	if !annCurrent {
		before := src.DeepCopy()
		data, _ := json.Marshal(want)
		ann := src.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[v1alpha1.OutcomeAnnotation] = string(data)
		src.SetAnnotations(ann)
		if !shape.StatusSubresource && !condCurrent {
			setCondition(src, shape, cond) // one write for both
			condCurrent = true
		}
		if err := c.Patch(ctx, src, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return false, err
		}
	}
	if !condCurrent {
		before := src.DeepCopy()
		setCondition(src, shape, cond)
		if err := patchStatus(ctx, c, shape, src, before); err != nil {
			return true, err
		}
	}
	return true, nil
}

// MirrorStatus sets a source's status to its remote copy's, keeping the
// source's RemoteSynced condition. It writes, with optimistic concurrency,
// only when the status differs, and reports whether it wrote. A kind whose
// schema has no status is not mirrored.
func MirrorStatus(ctx context.Context, c client.Client, k Kind, src *unstructured.Unstructured, remote map[string]any) (bool, error) {
	shape := k.Shape()
	if !shape.Status {
		return false, nil
	}
	want := runtime.DeepCopyJSON(remote)
	var conds []any
	if list, ok := want["conditions"].([]any); ok {
		for _, item := range list {
			if m, _ := item.(map[string]any); m["type"] != v1alpha1.ConditionRemoteSynced {
				conds = append(conds, item)
			}
		}
	}
	if ours := findCondition(src); ours != nil {
		conds = append(conds, runtime.DeepCopyJSONValue(ours))
	}
	if conds != nil {
		want["conditions"] = conds
	}
	have, _, _ := unstructured.NestedMap(src.Object, "status")
	if equality.Semantic.DeepEqual(have, want) {
		return false, nil
	}
	before := src.DeepCopy()
	src.Object["status"] = want
	return true, patchStatus(ctx, c, shape, src, before)
}

// patchStatus writes src's status (changed from before) with optimistic
// concurrency: through /status, or with the object when the kind has no
// status subresource (a write to /status would answer 404).
func patchStatus(ctx context.Context, c client.Client, shape Shape, src, before *unstructured.Unstructured) error {
	patch := client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})
	if shape.StatusSubresource {
		return c.Status().Patch(ctx, src, patch)
	}
	return c.Patch(ctx, src, patch)
}

// findCondition returns the source's RemoteSynced condition, or nil.
func findCondition(src *unstructured.Unstructured) map[string]any {
	conds, _, _ := unstructured.NestedSlice(src.Object, "status", "conditions")
	for _, raw := range conds {
		if m, ok := raw.(map[string]any); ok && m["type"] == v1alpha1.ConditionRemoteSynced {
			return m
		}
	}
	return nil
}

// sameCondition compares the fields of want (lastTransitionTime aside).
func sameCondition(have, want map[string]any) bool {
	if have == nil {
		return false
	}
	for key, v := range want {
		h := have[key]
		if hv, ok := h.(float64); ok { // JSON numbers read back as int64 or float64
			h = int64(hv)
		}
		if key == "message" && v == "" && h == nil {
			continue
		}
		if h != v {
			return false
		}
	}
	return true
}

// setCondition puts cond into src's status.conditions, replacing the
// previous RemoteSynced, and fills the status fields the schema requires.
func setCondition(src *unstructured.Unstructured, shape Shape, cond map[string]any) {
	status, _, _ := unstructured.NestedMap(src.Object, "status")
	if status == nil {
		status = map[string]any{}
	}
	for key, zero := range shape.RequiredStatus {
		if _, ok := status[key]; !ok {
			status[key] = runtime.DeepCopyJSONValue(zero)
		}
	}
	var out []any
	list, _ := status["conditions"].([]any)
	for _, item := range list {
		if m, _ := item.(map[string]any); m["type"] != v1alpha1.ConditionRemoteSynced {
			out = append(out, item)
		}
	}
	status["conditions"] = append(out, cond)
	src.Object["status"] = status
}
