package replicate

import (
	"context"
	"errors"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/metrics"
	"github.com/clustershard/clustershard/internal/remotecopy"
)

// syncFailureReason names the cause of a failed write of a copy, so the
// condition and the event point at it rather than at a generic failure.
func syncFailureReason(err error) string {
	msg := remoteMessage(err)
	switch {
	case webhookUnavailable(err):
		return v1alpha1.ReasonWebhookUnavailable
	case strings.Contains(msg, "admission webhook"):
		return v1alpha1.ReasonWebhookRefused
	case apierrors.IsNotFound(err) && strings.Contains(msg, "namespaces"):
		return v1alpha1.ReasonNamespaceMissing
	case apierrors.IsForbidden(err):
		return v1alpha1.ReasonForbidden
	default:
		return v1alpha1.ReasonSyncFailed
	}
}

// report sets RemoteSynced (under ownership) and, on failure, returns an
// error so the workqueue backs off (see record).
func (r *Reconciler) report(ctx context.Context, src *unstructured.Unstructured, cluster string, ok bool, reason, msg string) error {
	err := r.record(ctx, src, cluster, ok, reason, msg)
	if ok {
		return err
	}
	return errors.Join(errors.New(msg), err)
}

// record sets RemoteSynced (under ownership), with a Warning event when a
// failure changed it, and returns only an error of that write: a caller that
// retries on its own terms (not with the workqueue's backoff) returns it.
func (r *Reconciler) record(ctx context.Context, src *unstructured.Unstructured, cluster string, ok bool, reason, msg string) error {
	var wrote bool
	err := r.Ownership.WithOwnership(cluster, func() error {
		var err error
		wrote, err = remotecopy.SetRemoteSynced(ctx, r.Client, r.Kind, src, ok, reason, msg)
		return err
	})
	if wrote && !ok {
		r.event(src, corev1.EventTypeWarning, reason, msg)
	}
	return err
}

func (r *Reconciler) event(obj *unstructured.Unstructured, typ, reason, msg string) {
	if r.Recorder != nil {
		r.Recorder.Eventf(obj, nil, typ, reason, "Replicate", "%s", msg)
	}
}

// recreatedPrefix starts the Synced message of a re-created copy.
const recreatedPrefix = "copy re-created in "

// reasonAPIError counts failed writes to the management API server.
const reasonAPIError = "APIError"

// track records the replication state of src for the metrics.
func (r *Reconciler) track(src *unstructured.Unstructured, state string) {
	metrics.Tracker.Set(r.Identity, r.Kind.GVK.Kind, client.ObjectKeyFromObject(src).String(), src.GetGeneration(), state)
}

// failed records a failed attempt: the state and the error reason.
func (r *Reconciler) failed(src *unstructured.Unstructured, state, reason string) {
	r.track(src, state)
	metrics.ReplicationErrors.WithLabelValues(r.Kind.GVK.Kind, reason).Inc()
}

func (r *Reconciler) forget(key string) {
	r.recreating.Delete(key)
	metrics.Tracker.Forget(r.Identity, r.Kind.GVK.Kind, key)
}
