package deploy_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
)

// The Helm chart renders with the Helm Go library, with default and custom
// values, and every object is accepted by a real API server (server-side
// apply, dry run).
func TestHelmChartAppliesWithDryRun(t *testing.T) {
	ctx := t.Context()
	chart, err := loader.Load("helm/clustershard")
	if err != nil {
		t.Fatal(err)
	}
	const ns, teamNS = "shard-helm", "shard-helm-team"
	for _, n := range []string{ns, teamNS} {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	// The namespaces kubeconfig Secrets may live in, per case: the
	// release's own, and the listed ones (the release's listed again).
	secretNS := map[string][]string{"defaults": {ns}, "custom": {ns, teamNS}}
	for name, vals := range map[string]map[string]any{
		"defaults": nil,
		"custom": {
			"replicaCount":   5,
			"replicateKinds": []any{"ExampleChaos.v1alpha1.example.clustershard.io/examplechaos"},
			"extraRules": []any{map[string]any{
				"apiGroups": []any{"example.clustershard.io"}, "resources": []any{"examplechaos"}, "verbs": []any{"get", "list", "watch", "update", "patch"},
			}},
			"lease":                      map[string]any{"duration": "20s", "renewDeadline": "12s", "retryPeriod": "3s"},
			"kubeconfigSecretNamespaces": []any{teamNS, ns},
		},
	} {
		t.Run(name, func(t *testing.T) {
			install := action.NewInstall(&action.Configuration{})
			install.ClientOnly, install.DryRun, install.Replace = true, true, true
			install.ReleaseName, install.Namespace = "shard", ns
			rel, err := install.Run(chart, vals)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			docs := strings.Split(rel.Manifest, "\n---\n")
			for _, crd := range chart.CRDObjects() {
				docs = append(docs, string(crd.File.Data))
			}
			kinds := map[string]int{}
			secretRoles := map[string]bool{}
			for _, doc := range docs {
				u := &unstructured.Unstructured{}
				if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
					t.Fatalf("parse rendered object: %v\n%s", err, doc)
				}
				if len(u.Object) == 0 {
					continue
				}
				kinds[u.GetKind()]++
				if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.DryRunAll, client.FieldOwner("helm-test"), client.ForceOwnership); err != nil {
					t.Errorf("%s %s/%s rejected: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
				}
				if u.GetKind() == "StatefulSet" && !strings.Contains(doc, "--kubeconfig-secret-namespaces="+strings.Join(secretNS[name], ",")+"\n") {
					t.Errorf("kubeconfig Secret namespaces not %v:\n%s", secretNS[name], doc)
				}
				if u.GetKind() == "StatefulSet" && name == "custom" {
					replicas, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
					if replicas != 5 || !strings.Contains(doc, "--replicate-kind=ExampleChaos") || !strings.Contains(doc, "--lease-duration=20s") {
						t.Errorf("values not applied:\n%s", doc)
					}
				}
				if strings.Contains(doc, "secrets") {
					// Secrets are read through a Role per allowed namespace, never cluster-wide.
					if u.GetKind() == "ClusterRole" {
						t.Errorf("a ClusterRole grants Secrets:\n%s", doc)
					}
					if u.GetKind() == "Role" {
						secretRoles[u.GetNamespace()] = true
					}
				}
			}
			for _, n := range secretNS[name] {
				if !secretRoles[n] {
					t.Errorf("no Role grants the Secrets of %s (Roles with Secrets: %v)", n, secretRoles)
				}
			}
			if len(secretRoles) != len(secretNS[name]) {
				t.Errorf("Roles with Secrets in %v, want %v", secretRoles, secretNS[name])
			}
			for _, want := range []string{"CustomResourceDefinition", "ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding", "ServiceAccount", "StatefulSet", "Service", "PodDisruptionBudget"} {
				if kinds[want] == 0 {
					t.Errorf("the chart renders no %s (has %v)", want, kinds)
				}
			}
		})
	}
}
