package remotecluster

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/metrics"
	"github.com/clustershard/clustershard/internal/remote"
	"github.com/clustershard/clustershard/registry"
)

// rotation is what a running manager's credentials can be rotated with: its
// swappable credentials, the endpoint it was spawned for, and the user its
// epoch impersonates ("" when the epoch is not enforced).
type rotation struct {
	creds    *remote.Credentials
	endpoint *rest.Config
	user     string
}

// rotatable returns the config to spawn a manager with, whose credentials
// can later be rotated in place, and remembers how. parsed is the config as
// the kubeconfig gave it, cfg that config with the epoch's impersonation.
// A config that cannot be made rotatable is spawned as it is (a change of
// its kubeconfig restarts the manager).
func (r *Reconciler) rotatable(cluster string, parsed, cfg *rest.Config, user string) *rest.Config {
	out, creds, err := remote.Rotatable(cfg)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rotations == nil {
		r.rotations = map[string]rotation{}
	}
	if err != nil {
		delete(r.rotations, cluster)
		return cfg
	}
	r.rotations[cluster] = rotation{creds: creds, endpoint: parsed, user: user}
	return out
}

// rotate applies new kubeconfig credentials (cfg, of content hash) to the
// running manager without stopping it, when only the credentials changed:
// the same server, CA and TLS settings, new credentials that the remote API
// server accepts and, when the epoch is enforced, that are the same user's.
// It returns why not otherwise, and the caller restarts the manager.
func (r *Reconciler) rotate(ctx context.Context, rc *v1alpha1.RemoteCluster, cfg *rest.Config, hash string) (bool, string) {
	r.mu.Lock()
	rot, ok := r.rotations[rc.Name]
	r.mu.Unlock()
	info, running := r.Registry.Get(rc.Name)
	switch {
	case !ok:
		return false, "the running manager's credentials cannot be swapped"
	case !running || info.State != registry.StateRunning:
		return false, "the manager is not running"
	case !remote.SameEndpoint(rot.endpoint, cfg):
		return false, "the server, CA or TLS settings changed"
	case !remote.CanRotate(cfg):
		return false, "the new credentials come from a plugin or a file"
	}
	if _, err := probe(ctx, cfg, r.probeTimeout()); err != nil {
		return false, "the remote API server does not answer the new credentials: " + err.Error()
	}
	if rot.user != "" {
		user, err := whoAmI(ctx, cfg, r.probeTimeout())
		if err != nil {
			return false, "cannot ask who the new credentials are: " + err.Error()
		}
		if user != rot.user {
			return false, fmt.Sprintf("the new credentials are user %q's, the running manager's epoch is %q's", user, rot.user)
		}
	}
	if err := rot.creds.Swap(cfg); err != nil {
		return false, err.Error()
	}
	r.mu.Lock()
	rot.endpoint = cfg
	r.rotations[rc.Name] = rot
	r.mu.Unlock()
	r.setRunningHash(rc.Name, hash)
	metrics.CredentialRotations.WithLabelValues("in-place").Inc()
	log.FromContext(ctx).Info("Kubeconfig credentials rotated in place; the remote manager keeps running")
	r.event(rc, corev1.EventTypeNormal, v1alpha1.ReasonCredentialsRotated, "New kubeconfig credentials applied to the running remote manager (no restart)")
	return true, ""
}

// whoAmI asks the remote API server who cfg's credentials are.
func whoAmI(ctx context.Context, cfg *rest.Config, timeout time.Duration) (string, error) {
	c := rest.CopyConfig(cfg)
	c.Timeout = timeout
	kube, err := kubernetes.NewForConfig(c)
	if err != nil {
		return "", err
	}
	review, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return review.Status.UserInfo.Username, nil
}
