package deploy_test

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/test/manifests"
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
		objs, err := manifests.Kustomize(dir)
		if err != nil {
			t.Fatalf("kustomize build deploy/%s: %v", dir, err)
		}
		secretRoles := map[string]bool{}
		var args []string
		for _, u := range objs {
			if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.DryRunAll, client.FieldOwner("manifest-test"), client.ForceOwnership); err != nil {
				t.Errorf("%s: %s %s/%s rejected: %v", dir, u.GetKind(), u.GetNamespace(), u.GetName(), err)
			}
			switch {
			case u.GetKind() == "ClusterRole" && grantsSecrets(u):
				t.Errorf("%s: ClusterRole %s grants Secrets", dir, u.GetName())
			case u.GetKind() == "Role" && grantsSecrets(u):
				secretRoles[u.GetNamespace()] = true
			case u.GetKind() == "StatefulSet":
				containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
				if len(containers) > 0 {
					args, _, _ = unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
				}
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
		if len(want) > 1 && !slices.Contains(args, "--kubeconfig-secret-namespaces="+strings.Join(want, ",")) {
			t.Errorf("%s: the replicas are not told the namespaces: %v", dir, args)
		}
	}
}

// grantsSecrets reports whether a Role or ClusterRole has a rule on Secrets.
func grantsSecrets(role *unstructured.Unstructured) bool {
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	for _, r := range rules {
		if m, ok := r.(map[string]any); ok {
			if res, _, _ := unstructured.NestedStringSlice(m, "resources"); slices.Contains(res, "secrets") {
				return true
			}
		}
	}
	return false
}
