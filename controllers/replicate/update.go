package replicate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/remotecopy"
)

// write is what writing a copy came to.
type write struct {
	// recreating is set while an old copy is deleted so that a new one can be
	// created: why, for the source's outcome.
	recreating string
	// finalizers are the old copy's remote finalizers being waited for.
	finalizers []string
}

// writeCopy brings the copy in c to desired by the kind's update strategy:
// server-side apply, or (Recreate, and Auto after a webhook denied the update)
// deletion of the old copy first. The old copy is deleted with a UID
// precondition, so a stale cache can never make it delete a new copy.
func (r *Reconciler) writeCopy(ctx context.Context, c client.Client, key string, desired *unstructured.Unstructured, cluster string) (write, error) {
	strategy := r.Kind.UpdateStrategy()
	want := desired.GetAnnotations()[v1alpha1.SpecHashAnnotation]
	var old *unstructured.Unstructured
	cp := r.Kind.New()
	// From the remote manager's cache (a live read cost a round trip per
	// reconcile): a copy it has not seen yet is applied again, a write that
	// changes nothing; one deleted that it still shows is put back by the
	// monitor on the deletion's event; a hand edit it has not seen yet is
	// undone on the source's next reconcile, as any hand edit of a copy is.
	// Deletions and re-creations act with preconditions, never on its word
	// alone.
	err := c.Get(ctx, client.ObjectKeyFromObject(desired), cp)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil && strategy != remotecopy.UpdateApply:
		return write{}, err
	case err != nil:
		// Apply needs no read: write as if nothing were known.
	case cp.GetLabels()[v1alpha1.CopyClusterLabel] == cluster:
		old = cp
	}
	if old != nil && !old.GetDeletionTimestamp().IsZero() {
		why, _ := r.recreating.Load(key)
		reason, _ := why.(string)
		if reason == "" {
			reason = "the old copy is being deleted"
		}
		return write{recreating: reason, finalizers: old.GetFinalizers()}, nil
	}
	if old != nil && strategy == remotecopy.UpdateRecreate {
		if have := old.GetAnnotations()[v1alpha1.SpecHashAnnotation]; have != "" && have != want {
			return r.deleteForRecreate(ctx, c, key, old, "update strategy Recreate, the spec changed")
		}
	}
	if old != nil && old.GetDeletionTimestamp().IsZero() && current(old, desired) {
		// Nothing to change: the source's own updates (its finalizer, its
		// outcome, its status) re-run this reconcile, and each apply, even
		// one that changes nothing, costs the remote a full write (admission,
		// webhooks, the fence's policy).
		return write{}, nil
	}
	err = c.Apply(ctx, client.ApplyConfigurationFromUnstructured(desired), client.FieldOwner(v1alpha1.FieldManager), client.ForceOwnership)
	if err != nil && strategy != remotecopy.UpdateApply && old != nil && deniedByWebhook(err) && old.GetAnnotations()[v1alpha1.SpecHashAnnotation] != want {
		return r.deleteForRecreate(ctx, c, key, old, fmt.Sprintf("update strategy %s, the remote refused the spec change: %s", strategy, remoteMessage(err)))
	}
	return write{}, err
}

// deleteForRecreate deletes old, only if it is still the object read.
func (r *Reconciler) deleteForRecreate(ctx context.Context, c client.Client, key string, old *unstructured.Unstructured, why string) (write, error) {
	r.recreating.Store(key, why)
	uid, rv := old.GetUID(), old.GetResourceVersion()
	err := c.Delete(ctx, old, client.Preconditions{UID: &uid, ResourceVersion: &rv})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return write{}, fmt.Errorf("delete the copy to re-create it: %w", err)
	}
	return write{recreating: why, finalizers: old.GetFinalizers()}, nil
}

// deniedByWebhook tells whether an admission webhook answered and refused
// the write (a webhook that cannot be called is not a refusal of the change).
func deniedByWebhook(err error) bool {
	return strings.Contains(remoteMessage(err), "denied the request")
}

// webhookUnavailable tells whether the write failed because a webhook with
// failurePolicy Fail could not be called.
func webhookUnavailable(err error) bool {
	return strings.Contains(remoteMessage(err), "failed calling webhook")
}

// remoteMessage is the API server's message of err, else err's text.
func remoteMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Message
	}
	return err.Error()
}

// current reports whether the copy old already is desired: the same
// top-level fields (spec and the others; status aside), the same labels and
// the same annotations. Anything else, a field the remote defaulted or one
// added by hand included, is applied as before.
func current(old, desired *unstructured.Unstructured) bool {
	for key, v := range desired.Object {
		if key != "metadata" && !equality.Semantic.DeepEqual(old.Object[key], v) {
			return false
		}
	}
	for key := range old.Object {
		if _, ok := desired.Object[key]; !ok && key != "metadata" && key != "status" {
			return false
		}
	}
	return maps.Equal(old.GetLabels(), desired.GetLabels()) && maps.Equal(old.GetAnnotations(), desired.GetAnnotations())
}
