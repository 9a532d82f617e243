package replica_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/replica"
	"github.com/clustershard/clustershard/test/localcluster"
	"github.com/clustershard/clustershard/test/manifests"
	"github.com/clustershard/clustershard/test/testenv"
)

// serviceAccount is the user of the shipped RBAC's ServiceAccount.
const serviceAccount = "system:serviceaccount:" + testenv.ControllerNamespace + ":clustershard"

// applyManagementRBAC creates the shipped management RBAC (the kustomize
// base's deploy/rbac: ServiceAccount, roles and bindings) and returns a
// config of the management cluster acting as its ServiceAccount.
func applyManagementRBAC(t *testing.T) *rest.Config {
	t.Helper()
	root, err := localcluster.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifests.Kustomize(filepath.Join(root, "deploy", "rbac"))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		if err := env.Client.Apply(t.Context(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("rbac-test"), client.ForceOwnership); err != nil {
			t.Fatalf("apply %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	cfg := rest.CopyConfig(env.Management.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: serviceAccount, Groups: []string{"system:serviceaccounts", "system:authenticated"}}
	return cfg
}

// With the shipped RBAC, a replica reads kubeconfig Secrets of its own
// namespace only: a RemoteCluster naming another team's Secret is refused
// with SecretNamespaceNotAllowed, the ServiceAccount may not read that
// Secret even when asked directly (RBAC denies it), and the replica's cache
// does not hold it. A RemoteCluster whose Secret is in the replica's
// namespace still becomes Ready under the same RBAC, and a replica told to
// read Secrets in a namespace where RBAC grants it nothing refuses to start.
func TestShippedRBACReadsKubeConfigSecretsOnlyWhereAllowed(t *testing.T) {
	ctx := t.Context()
	cfg := applyManagementRBAC(t)
	const other = "team-secrets"
	if err := localcluster.WriteKubeConfigSecret(ctx, env.Client, other, "theirs", "kubeconfig", env.Remotes[0].KubeConfig); err != nil {
		t.Fatal(err)
	}

	sa, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := sa.Get(ctx, client.ObjectKey{Namespace: other, Name: "theirs"}, &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Errorf("the ServiceAccount read a Secret of %s: %v, want Forbidden", other, err)
	}
	if err := sa.List(ctx, &corev1.SecretList{}); !apierrors.IsForbidden(err) {
		t.Errorf("the ServiceAccount listed every Secret: %v, want Forbidden", err)
	}

	allowed := remoteCluster(t, "rbac-allowed", 0)
	if err := sa.Get(ctx, client.ObjectKey{Namespace: testenv.ControllerNamespace, Name: allowed.Spec.KubeConfig.SecretRef.Name}, &corev1.Secret{}); err != nil {
		t.Errorf("the ServiceAccount cannot read a Secret of its own namespace: %v", err)
	}
	theirs := &v1alpha1.RemoteCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "rbac-theirs"},
		Spec: v1alpha1.RemoteClusterSpec{KubeConfig: v1alpha1.KubeConfigSource{
			SecretRef: v1alpha1.SecretKeyReference{Namespace: other, Name: "theirs", Key: "kubeconfig"},
		}},
	}
	if err := env.Client.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteCluster(t, theirs.Name) })

	// A namespace the shipped RBAC grants nothing in is named at start-up,
	// rather than a Secret informer that never syncs.
	o := replicaOptions("replica-norole")
	o.Kinds, o.SecretNamespaces = nil, []string{testenv.ControllerNamespace, "team-norole"}
	if _, err := replica.New(ctx, cfg, o); err == nil || !strings.Contains(err.Error(), `namespace "team-norole"`) || !strings.Contains(err.Error(), "--kubeconfig-secret-namespaces") {
		t.Errorf("a replica allowed Secrets in a namespace without its Role: %v, want refused at start-up", err)
	}

	rp := startReplicaOn(t, "replica-rbac", cfg, func(o *replica.Options) { o.Kinds = nil })
	waitReady(t, allowed.Name, 30*time.Second)
	eventually(t, 30*time.Second, "rbac-theirs refused", func() bool {
		c := condition(t, theirs.Name, v1alpha1.ConditionConnected)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonSecretNamespaceNotAllowed
	})
	if c := condition(t, theirs.Name, v1alpha1.ConditionConnected); !strings.Contains(c.Message, "nothing was read") {
		t.Errorf("Connected message %q", c.Message)
	}

	reader := rp.Manager.GetCache()
	if err := reader.Get(ctx, client.ObjectKey{Namespace: other, Name: "theirs"}, &corev1.Secret{}); err == nil {
		t.Error("the replica's cache holds a Secret of another namespace")
	}
	if err := reader.Get(ctx, client.ObjectKey{Namespace: testenv.ControllerNamespace, Name: allowed.Spec.KubeConfig.SecretRef.Name}, &corev1.Secret{}); err != nil {
		t.Errorf("the replica's cache lacks a Secret of its namespace: %v", err)
	}
}
