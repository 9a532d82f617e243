package remotecluster

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/test/localcluster"
	"github.com/clustershard/clustershard/test/testenv"
)

// A RemoteCluster naming a kubeconfig Secret outside the namespaces
// kubeconfig Secrets may live in gets Connected=False
// SecretNamespaceNotAllowed and a Warning, no Secret is read, and a manager
// spawned from an allowed Secret before is stopped. Whoever may create a
// RemoteCluster cannot make the replicas use another team's credentials.
func TestSecretOutsideAllowedNamespacesIsNotRead(t *testing.T) {
	ctx := t.Context()
	const name, other = "elsewhere", "team-b"
	// A valid kubeconfig, in a namespace the replicas may not read.
	if err := localcluster.WriteKubeConfigSecret(ctx, env.Client, other, name+"-kubeconfig", localcluster.DefaultSecretKey, env.Remotes[0].KubeConfig); err != nil {
		t.Fatal(err)
	}
	remoteCluster(t, name, name+"-kubeconfig", localcluster.DefaultSecretKey, env.Remotes[0].KubeConfig)
	r, reg, rec := newReconciler(name)
	var secretReads atomic.Int32
	base, err := client.NewWithWatch(env.Management.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	r.Client = interceptor.NewClient(base, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Secret); ok && key.Namespace == other {
				secretReads.Add(1)
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})

	// First from the allowed namespace: a manager runs.
	if _, err := reconcileOnce(t, r, name); err != nil {
		t.Fatal(err)
	}
	if spawns, _ := reg.counts(); spawns != 1 {
		t.Fatalf("%d spawns from the allowed Secret, want 1", spawns)
	}
	for nextEvent(rec) != "" {
	}

	// Then the RemoteCluster is pointed at the other team's Secret.
	rc := read(t, name)
	rc.Spec.KubeConfig.SecretRef.Namespace = other
	if err := env.Client.Update(ctx, rc); err != nil {
		t.Fatal(err)
	}
	_, err = reconcileOnce(t, r, name)
	if !errors.Is(err, reconcile.TerminalError(nil)) {
		t.Fatalf("Reconcile = %v, want a terminal error (only a change of the RemoteCluster or the flags fixes it)", err)
	}
	if n := secretReads.Load(); n != 0 {
		t.Errorf("the Secret in %s was read %d times", other, n)
	}
	if _, stops := reg.counts(); stops != 1 {
		t.Errorf("%d stops, want the running manager stopped", stops)
	}
	for _, typ := range []string{v1alpha1.ConditionConnected, v1alpha1.ConditionReady} {
		cond := condition(t, name, typ)
		if cond.Status != metav1.ConditionFalse || cond.Reason != v1alpha1.ReasonSecretNamespaceNotAllowed || !strings.Contains(cond.Message, testenv.ControllerNamespace) {
			t.Errorf("%s = %s/%s (%s), want False/%s naming the allowed namespaces", typ, cond.Status, cond.Reason, cond.Message, v1alpha1.ReasonSecretNamespaceNotAllowed)
		}
	}
	if e := nextEvent(rec); !strings.Contains(e, "Warning") || !strings.Contains(e, v1alpha1.ReasonSecretNamespaceNotAllowed) {
		t.Errorf("event %q, want a Warning %s", e, v1alpha1.ReasonSecretNamespaceNotAllowed)
	}
}

// A refusal that is terminal (no retry) is retried all the same when its
// status could not be written: the RemoteCluster must not go on showing
// its previous state.
func TestTerminalRefusalIsRetriedWhenItsStatusFails(t *testing.T) {
	const name, other = "elsewhere-conflict", "team-c"
	remoteCluster(t, name, name+"-kubeconfig", localcluster.DefaultSecretKey, env.Remotes[0].KubeConfig)
	rc := read(t, name)
	rc.Spec.KubeConfig.SecretRef.Namespace = other
	if err := env.Client.Update(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	r, _, _ := newReconciler(name)
	base, err := client.NewWithWatch(env.Management.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	r.Client = interceptor.NewClient(base, interceptor.Funcs{
		SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
			return apierrors.NewConflict(v1alpha1.GroupVersion.WithResource("remoteclusters").GroupResource(), name, errors.New("changed meanwhile"))
		},
	})
	_, err = reconcileOnce(t, r, name)
	if err == nil || errors.Is(err, reconcile.TerminalError(nil)) {
		t.Fatalf("Reconcile = %v, want a retried (not terminal) error when the status was not written", err)
	}
	r.Client = env.Client
	if _, err := reconcileOnce(t, r, name); !errors.Is(err, reconcile.TerminalError(nil)) {
		t.Fatalf("Reconcile = %v, want the terminal refusal once its status is written", err)
	}
	if cond := condition(t, name, v1alpha1.ConditionConnected); cond.Reason != v1alpha1.ReasonSecretNamespaceNotAllowed {
		t.Errorf("Connected = %s/%s", cond.Status, cond.Reason)
	}
}
