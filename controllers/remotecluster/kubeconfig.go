package remotecluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/remote"
	"github.com/clustershard/clustershard/registry"
)

func (r *Reconciler) probeTimeout() time.Duration {
	if r.ProbeTimeout == 0 {
		return registry.DefaultProbeTimeout
	}
	return r.ProbeTimeout
}

// readKubeConfig reads the kubeconfig Secret's key, only from a namespace
// kubeconfig Secrets may live in: whoever may create a RemoteCluster must not
// make the replicas use credentials kept where that person cannot read.
func (r *Reconciler) readKubeConfig(ctx context.Context, rc *v1alpha1.RemoteCluster) ([]byte, error) {
	ref := rc.Spec.KubeConfig.SecretRef
	if !slices.Contains(r.SecretNamespaces, ref.Namespace) {
		_ = r.stop(ctx, rc.Name)
		// Only a change of the RemoteCluster or of the replicas' flags can
		// fix this: no retry loop.
		return nil, reconcile.TerminalError(r.fail(rc, v1alpha1.ConditionConnected, v1alpha1.ReasonSecretNamespaceNotAllowed,
			fmt.Errorf("kubeconfig Secret %s/%s: namespace %q is not one kubeconfig Secrets may live in (allowed: %s; see --kubeconfig-secret-namespaces); nothing was read",
				ref.Namespace, ref.Name, ref.Namespace, allowedList(r.SecretNamespaces))))
	}
	var secret corev1.Secret
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			_ = r.stop(ctx, rc.Name)
			return nil, r.fail(rc, v1alpha1.ConditionConnected, v1alpha1.ReasonSecretNotFound, fmt.Errorf("kubeconfig Secret %s/%s not found", ref.Namespace, ref.Name))
		}
		return nil, err
	}
	content, ok := secret.Data[ref.Key]
	if !ok {
		_ = r.stop(ctx, rc.Name)
		return nil, r.fail(rc, v1alpha1.ConditionConnected, v1alpha1.ReasonSecretKeyNotFound, fmt.Errorf("kubeconfig Secret %s/%s has no key %q", ref.Namespace, ref.Name, ref.Key))
	}
	return content, nil
}

func (r *Reconciler) runningHash(cluster string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok := r.spawned[cluster]
	return h, ok
}

func (r *Reconciler) setRunningHash(cluster, hash string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.spawned == nil {
		r.spawned = map[string]string{}
	}
	r.spawned[cluster] = hash
}

// restConfigFor is used by uninstall, which needs a client after the manager stopped.
func (r *Reconciler) restConfigFor(ctx context.Context, rc *v1alpha1.RemoteCluster) (*rest.Config, error) {
	content, err := r.readKubeConfig(ctx, rc)
	if err != nil {
		return nil, err
	}
	return r.parseKubeConfig(content, rc.Name)
}

// parseKubeConfig builds the rest.Config of cluster, whose requests carry
// remote.UserAgent.
func (r *Reconciler) parseKubeConfig(content []byte, cluster string) (*rest.Config, error) {
	cfg, err := remote.Parse(content, r.KubeConfig)
	if err != nil {
		return nil, err
	}
	holder := r.Holder
	if holder == "" {
		holder = r.Identity
	}
	cfg.UserAgent = remote.UserAgent(holder, cluster)
	return cfg, nil
}

// allowedList names the allowed namespaces for a message.
func allowedList(ns []string) string {
	if len(ns) == 0 {
		return "none"
	}
	return strings.Join(ns, ", ")
}
