package replica_test

import (
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/test/localcluster"
	"github.com/clustershard/clustershard/test/manifests"
)

// applyShipped creates the objects of a file under deploy/remote in remote 1.
func applyShipped(t *testing.T, file string) {
	t.Helper()
	root, err := localcluster.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifests.File(filepath.Join(root, "deploy", "remote", file))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
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

// shippedServiceAccount returns a kubeconfig of remote 1 for the
// ServiceAccount deploy/remote/rbac.yaml creates, with a token from the
// TokenRequest API, as the README tells operators to build it.
func shippedServiceAccount(t *testing.T) []byte {
	t.Helper()
	remote := env.Remotes[1].Config
	cs, err := kubernetes.NewForConfig(remote)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts("clustershard-remote").CreateToken(t.Context(), "clustershard-remote",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kc, err := localcluster.KubeConfigFromREST("remote-1", &rest.Config{Host: remote.Host,
		TLSClientConfig: rest.TLSClientConfig{CAData: remote.CAData}, BearerToken: tr.Status.Token})
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

// The remote RBAC shipped in deploy/remote is enough: a kubeconfig of its
// ServiceAccount gets a Ready cluster that syncs, and the remote API server
// enforces the ownership epoch (RemoteFenced=True).
func TestShippedRemoteRBACIsEnough(t *testing.T) {
	ctx := t.Context()
	applyShipped(t, "rbac.yaml")
	limited := shippedServiceAccount(t)
	startReplica(t, "least")
	remoteCluster(t, "least-privilege", 1)
	setSecret(t, "least-privilege", limited)
	waitReady(t, "least-privilege", 60*time.Second)
	if c := condition(t, "least-privilege", v1alpha1.ConditionRemoteFenced); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("with the shipped RBAC the remote should enforce the epoch: %+v", c)
	}
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
	// A user bound to the ClusterRole but not the ServiceAccount may not
	// impersonate itself: the cluster runs, fenced by its owner alone, and
	// says so.
	if c := condition(t, "least-helm", v1alpha1.ConditionRemoteFenced); c == nil || c.Status != metav1.ConditionFalse {
		t.Fatalf("want RemoteFenced=False for a user outside the shipped Roles, got %+v", c)
	} else {
		t.Logf("RemoteFenced=False %s: %s", c.Reason, c.Message)
	}
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
