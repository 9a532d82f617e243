package replica_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/internal/localcluster"
)

// The remote RBAC shipped in deploy/remote is enough: a remote kubeconfig
// whose user holds only that ClusterRole gets a Ready cluster that syncs.
func TestShippedRemoteRBACIsEnough(t *testing.T) {
	ctx := t.Context()
	root, err := localcluster.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(root, "deploy", "remote", "rbac.yaml"))
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
		if err := env.RemoteClients[1].Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("apply %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "clustershard-remote-limited-user"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "clustershard-remote"},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: "limited", APIGroup: "rbac.authorization.k8s.io"}},
	}
	if err := env.RemoteClients[1].Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	_, limited, err := env.Remotes[1].AddUser("limited")
	if err != nil {
		t.Fatal(err)
	}
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
