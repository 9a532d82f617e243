package deploy_test

import (
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/test/manifests"
	"github.com/clustershard/clustershard/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, testenv.Options{}, &env))
}

// The kustomize base renders, and every object in it is accepted by a real
// API server (server-side apply, dry run), so invalid manifests fail here.
func TestKustomizeBaseAppliesWithDryRun(t *testing.T) {
	ctx := t.Context()
	objs, err := manifests.Kustomize("default")
	if err != nil {
		t.Fatalf("kustomize build deploy/default: %v", err)
	}
	kinds := map[string]int{}
	for _, u := range objs {
		kinds[u.GetKind()]++
		if u.GetKind() == "Namespace" {
			// Dry run creates nothing: the namespace must exist for the rest.
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: u.GetName()}}
			if err := env.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
		err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.DryRunAll, client.FieldOwner("manifest-test"), client.ForceOwnership)
		if err != nil {
			t.Errorf("%s %s/%s rejected: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
	}
	for _, want := range []string{"Namespace", "CustomResourceDefinition", "ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding", "ServiceAccount", "StatefulSet", "Service", "PodDisruptionBudget"} {
		if kinds[want] == 0 {
			t.Errorf("the base has no %s (has %v)", want, kinds)
		}
	}
}
