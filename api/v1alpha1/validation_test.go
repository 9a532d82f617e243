package v1alpha1_test

import (
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, testenv.Options{}, &env))
}

func validCluster(name string) *v1alpha1.RemoteCluster {
	return &v1alpha1.RemoteCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.RemoteClusterSpec{
			KubeConfig: v1alpha1.KubeConfigSource{SecretRef: v1alpha1.SecretKeyReference{
				Namespace: "clustershard-system", Name: "east-kubeconfig", Key: "kubeconfig",
			}},
			Namespaces: []string{"chaos", "apps"},
		},
	}
}

func TestValidRemoteClusterRoundTrips(t *testing.T) {
	ctx := t.Context()
	rc := validCluster("round-trip")
	rc.Spec.Install = &v1alpha1.InstallSpec{
		Namespace: "chaos",
		Helm: &v1alpha1.HelmInstall{
			Chart: "/charts/chaos-mesh", Version: "2.7.0", ReleaseName: "chaos-mesh", Namespace: "chaos-mesh",
			Values: &runtime.RawExtension{Raw: []byte(`{"dashboard":{"create":false},"replicas":2}`)},
		},
	}
	want := rc.Spec.DeepCopy()
	if err := env.Client.Create(ctx, rc); err != nil {
		t.Fatalf("create: %v", err)
	}
	var got v1alpha1.RemoteCluster
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(rc), &got); err != nil {
		t.Fatal(err)
	}
	// Defaults are applied by the API server.
	want.Install.CRDs = ptr.To(true)
	want.Install.CleanupPolicy = v1alpha1.CleanupRetain
	if !equality.Semantic.DeepEqual(got.Spec.KubeConfig, want.KubeConfig) ||
		!equality.Semantic.DeepEqual(got.Spec.Namespaces, want.Namespaces) ||
		!equality.Semantic.DeepEqual(got.Spec.Install.CRDs, want.Install.CRDs) ||
		got.Spec.Install.CleanupPolicy != want.Install.CleanupPolicy ||
		got.Spec.Install.Helm.ReleaseName != want.Install.Helm.ReleaseName {
		t.Fatalf("spec did not round-trip:\n got %+v\nwant %+v", got.Spec, *want)
	}
	if !strings.Contains(string(got.Spec.Install.Helm.Values.Raw), `"replicas":2`) {
		t.Fatalf("free-form values were pruned: %s", got.Spec.Install.Helm.Values.Raw)
	}
}

func TestInvalidRemoteClustersAreRejected(t *testing.T) {
	long := strings.Repeat("a", 64)
	cases := []struct {
		name   string
		mutate func(*v1alpha1.RemoteCluster)
		want   string
	}{
		{"missing secret name", func(rc *v1alpha1.RemoteCluster) { rc.Spec.KubeConfig.SecretRef.Name = "" }, "spec.kubeConfig.secretRef.name"},
		{"empty key", func(rc *v1alpha1.RemoteCluster) { rc.Spec.KubeConfig.SecretRef.Key = "" }, "spec.kubeConfig.secretRef.key"},
		{"missing namespace", func(rc *v1alpha1.RemoteCluster) { rc.Spec.KubeConfig.SecretRef.Namespace = "" }, "spec.kubeConfig.secretRef.namespace"},
		{"bad key characters", func(rc *v1alpha1.RemoteCluster) { rc.Spec.KubeConfig.SecretRef.Key = "a/b" }, "spec.kubeConfig.secretRef.key"},
		{"bad cleanup enum", func(rc *v1alpha1.RemoteCluster) {
			rc.Spec.Install = &v1alpha1.InstallSpec{CleanupPolicy: "Explode"}
		}, `Unsupported value: "Explode"`},
		{"name too long", func(rc *v1alpha1.RemoteCluster) { rc.Name = long }, "at most 63 characters"},
		{"release name too long", func(rc *v1alpha1.RemoteCluster) {
			rc.Spec.Install = &v1alpha1.InstallSpec{Helm: &v1alpha1.HelmInstall{Chart: "c", ReleaseName: long, Namespace: "n"}}
		}, "spec.install.helm.releaseName"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rc := validCluster("invalid-" + string(rune('a'+i)))
			tc.mutate(rc)
			err := env.Client.Create(t.Context(), rc)
			if err == nil {
				t.Fatalf("accepted an invalid RemoteCluster")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

func TestStatusOnlyThroughSubresource(t *testing.T) {
	ctx := t.Context()
	rc := validCluster("status-subresource")
	if err := env.Client.Create(ctx, rc); err != nil {
		t.Fatal(err)
	}
	rc.Status.Owner = "replica-0"
	if err := env.Client.Update(ctx, rc); err != nil {
		t.Fatalf("update: %v", err)
	}
	var got v1alpha1.RemoteCluster
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(rc), &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Owner != "" {
		t.Fatalf("a main-resource update wrote status.owner=%q", got.Status.Owner)
	}
	got.Status.Owner = "replica-0"
	meta.SetStatusCondition(&got.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionOwned, Status: metav1.ConditionTrue, Reason: "LeaseHeld", Message: "held by replica-0"})
	if err := env.Client.Status().Update(ctx, &got); err != nil {
		t.Fatalf("status update: %v", err)
	}
	var again v1alpha1.RemoteCluster
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(rc), &again); err != nil {
		t.Fatal(err)
	}
	if again.Status.Owner != "replica-0" || !meta.IsStatusConditionTrue(again.Status.Conditions, v1alpha1.ConditionOwned) {
		t.Fatalf("status subresource update lost: %+v", again.Status)
	}
}
