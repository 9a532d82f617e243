package replica_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/localcluster"
)

// applyShipped creates the objects of a file under deploy/remote in remote 1.
func applyShipped(t *testing.T, file string) {
	t.Helper()
	root, err := localcluster.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(root, "deploy", "remote", file))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			break
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := env.RemoteClients[1].Create(t.Context(), u); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("apply %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

// limitedUser returns a kubeconfig of remote 1 for a new user bound to the
// shipped ClusterRole clustershard-remote.
func limitedUser(t *testing.T, user string) []byte {
	t.Helper()
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "clustershard-remote-" + user},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "clustershard-remote"},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: user, APIGroup: "rbac.authorization.k8s.io"}},
	}
	if err := env.RemoteClients[1].Create(t.Context(), binding); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	_, kubeconfig, err := env.Remotes[1].AddUser(user)
	if err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

// The remote RBAC shipped in deploy/remote is enough: a remote kubeconfig
// whose user holds only that ClusterRole gets a Ready cluster that syncs.
func TestShippedRemoteRBACIsEnough(t *testing.T) {
	ctx := t.Context()
	applyShipped(t, "rbac.yaml")
	limited := limitedUser(t, "limited")
	startReplica(t, "least")
	remoteCluster(t, "least-privilege", 1)
	setSecret(t, "least-privilege", limited)
	waitReady(t, "least-privilege", 60*time.Second)
	ensureNamespace(t, env.Client, "least")
	if err := env.Client.Create(ctx, source("least", "limited-copy", "least-privilege")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "copy made with the limited user", func() bool {
		_, err := copyOf(t, 1, "least", "limited-copy")
		return err == nil
	})
	// The limited user cannot do more than that: it cannot read Secrets.
	cfg, err := testenvConfig(limited)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.List(ctx, &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "SecretList"}}); !apierrors.IsForbidden(err) {
		t.Fatalf("the remote user can list Secrets (err=%v)", err)
	}
}

// With deploy/remote/helm-rbac.yaml added, the same least-privileged user
// installs, upgrades and uninstalls the test chart in the namespace it covers.
func TestShippedHelmRBACIsEnough(t *testing.T) {
	ctx := t.Context()
	applyShipped(t, "rbac.yaml")
	applyShipped(t, "helm-rbac.yaml")
	kubeconfig := limitedUser(t, "helm-limited")
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "clustershard-charts", Name: "clustershard-helm-limited-user"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "clustershard-helm"},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: "helm-limited", APIGroup: "rbac.authorization.k8s.io"}},
	}
	if err := env.RemoteClients[1].Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	startReplica(t, "least-helm")
	helmClusterWith(t, "least-helm", kubeconfig, &v1alpha1.HelmInstall{
		Chart: chartPath(t, "tiny"), ReleaseName: "least", Namespace: "clustershard-charts",
	})
	waitReady(t, "least-helm", 60*time.Second)
	installedWith(t, "least-helm", 1)
	editHelm(t, "least-helm", func(h *v1alpha1.HelmInstall) { h.Values = rawValues(t, map[string]any{"greeting": "hi"}) })
	installedWith(t, "least-helm", 2)
	deleteCluster(t, "least-helm")
	eventually(t, 60*time.Second, "uninstalled with the limited user", func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Name: "least-helm"}, &v1alpha1.RemoteCluster{})) &&
			len(history(t, 1, "clustershard-charts", "least")) == 0
	})
	// The namespace was not created by clustershard: it stays.
	if err := env.RemoteClients[1].Get(ctx, client.ObjectKey{Name: "clustershard-charts"}, &corev1.Namespace{}); err != nil {
		t.Fatalf("a namespace clustershard did not create was deleted: %v", err)
	}
}
