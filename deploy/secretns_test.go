package deploy_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// The kustomize example that allows kubeconfig Secrets in another namespace
// renders, is accepted by a real API server (dry run), passes the flag to
// the replicas and grants Secrets there through a Role; the base grants
// Secrets through a Role in its own namespace only, never a ClusterRole.
func TestKubeConfigNamespacesExample(t *testing.T) {
	ctx := t.Context()
	for _, ns := range []string{"clustershard-system", "team-a"} {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	for dir, want := range map[string][]string{"default": {"clustershard-system"}, "examples/kubeconfig-namespaces": {"clustershard-system", "team-a"}} {
		res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
		if err != nil {
			t.Fatalf("kustomize build deploy/%s: %v", dir, err)
		}
		secretRoles := map[string]bool{}
		var args string
		for _, r := range res.Resources() {
			data, err := r.AsYAML()
			if err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(data, &u.Object); err != nil {
				t.Fatal(err)
			}
			if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.DryRunAll, client.FieldOwner("manifest-test"), client.ForceOwnership); err != nil {
				t.Errorf("%s: %s %s/%s rejected: %v", dir, u.GetKind(), u.GetNamespace(), u.GetName(), err)
			}
			grantsSecrets := strings.Contains(string(data), "- secrets")
			switch {
			case u.GetKind() == "ClusterRole" && grantsSecrets:
				t.Errorf("%s: ClusterRole %s grants Secrets", dir, u.GetName())
			case u.GetKind() == "Role" && grantsSecrets:
				secretRoles[u.GetNamespace()] = true
			case u.GetKind() == "StatefulSet":
				args = string(data)
			}
		}
		for _, ns := range want {
			if !secretRoles[ns] {
				t.Errorf("%s: no Role grants the Secrets of %s (%v)", dir, ns, secretRoles)
			}
		}
		if len(secretRoles) != len(want) {
			t.Errorf("%s: Roles with Secrets in %v, want %v", dir, secretRoles, want)
		}
		if len(want) > 1 && !strings.Contains(args, "--kubeconfig-secret-namespaces="+strings.Join(want, ",")) {
			t.Errorf("%s: the replicas are not told the namespaces:\n%s", dir, args)
		}
	}
}
