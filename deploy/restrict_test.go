package deploy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/test/manifests"
)

// The example policy restricting who writes RemoteClusters, applied to a
// real API server: a user outside platform-admins is refused with its
// message even though RBAC lets it create RemoteClusters; a member and
// clustershard's ServiceAccount are admitted.
func TestRestrictRemoteClustersPolicy(t *testing.T) {
	ctx := t.Context()
	objs, err := manifests.File("examples/restrict-remoteclusters.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		if err := env.Client.Create(ctx, u); err != nil {
			t.Fatalf("create %s: %v", u.GetKind(), err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), u) })
	}
	// RBAC lets everyone below create RemoteClusters: only the policy decides.
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "restrict-test-rc-writer"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"remoteclusters"}, Verbs: []string{"create"}},
	}}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "restrict-test-rc-writer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "Group", APIGroup: rbacv1.GroupName, Name: "system:authenticated"}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	create := func(user string, groups ...string) error {
		cfg := rest.CopyConfig(env.Management.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
		c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		rc := &v1alpha1.RemoteCluster{ObjectMeta: metav1.ObjectMeta{Name: "restricted"}, Spec: v1alpha1.RemoteClusterSpec{
			KubeConfig: v1alpha1.KubeConfigSource{SecretRef: v1alpha1.SecretKeyReference{Namespace: "clustershard-system", Name: "x", Key: "kubeconfig"}},
		}}
		return c.Create(ctx, rc, client.DryRunAll)
	}
	// The policy takes a moment to be enforced.
	var refused error
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		refused = create("mallory")
		return refused != nil, nil
	})
	if refused == nil || !strings.Contains(refused.Error(), "only members of platform-admins") {
		t.Fatalf("a user outside platform-admins: %v, want refused by the policy", refused)
	}
	if err := create("alice", "platform-admins"); err != nil {
		t.Errorf("a member of platform-admins refused: %v", err)
	}
	if err := create("system:serviceaccount:clustershard-system:clustershard", "system:serviceaccounts"); err != nil {
		t.Errorf("clustershard's ServiceAccount refused: %v", err)
	}
}
