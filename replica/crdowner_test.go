package replica_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/remotecopy"
	"github.com/clustershard/clustershard/replica"
	"github.com/clustershard/clustershard/test/localcluster"
	"github.com/clustershard/clustershard/test/testenv"
)

// helmKind is the kind whose CRD the with-crds chart ships.
var helmKind = testenv.MustKind("HelmChaos.v1alpha1.charts.clustershard.io/helmchaos")

// installHelmKindCRD creates the with-crds chart's CRD in the management
// cluster and removes it, from there and from both remotes, at the end.
func installHelmKindCRD(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartPath(t, "with-crds"), "crds", "helmchaos.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(t.Context(), &crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range append([]client.Client{env.Client}, env.RemoteClients...) {
			_ = c.Delete(t.Context(), &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: helmKind.CRD}})
		}
	})
	eventually(t, 30*time.Second, "the CRD established in the management cluster", func() bool {
		var got apiextensionsv1.CustomResourceDefinition
		if err := env.Client.Get(t.Context(), client.ObjectKey{Name: helmKind.CRD}, &got); err != nil {
			return false
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true
			}
		}
		return false
	})
}

// installCluster creates a RemoteCluster for remote i with spec.install.crds
// on, cleanupPolicy Delete and the Helm release h (may be nil).
func installCluster(t *testing.T, name string, remote int, h *v1alpha1.HelmInstall) {
	t.Helper()
	secret := name + "-kubeconfig"
	if err := localcluster.WriteKubeConfigSecret(t.Context(), env.Client, testenv.ControllerNamespace, secret, "kubeconfig", env.Remotes[remote].KubeConfig); err != nil {
		t.Fatal(err)
	}
	rc := &v1alpha1.RemoteCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.RemoteClusterSpec{
			KubeConfig: v1alpha1.KubeConfigSource{SecretRef: v1alpha1.SecretKeyReference{Namespace: testenv.ControllerNamespace, Name: secret, Key: "kubeconfig"}},
			Install:    &v1alpha1.InstallSpec{Helm: h, CleanupPolicy: v1alpha1.CleanupDelete},
		},
	}
	if err := env.Client.Create(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteCluster(t, name) })
}

// deleteAndWait deletes a RemoteCluster and waits until it is gone.
func deleteAndWait(t *testing.T, name string) {
	t.Helper()
	deleteCluster(t, name)
	eventually(t, 60*time.Second, name+" gone", func() bool {
		return apierrors.IsNotFound(env.Client.Get(t.Context(), client.ObjectKey{Name: name}, &v1alpha1.RemoteCluster{}))
	})
}

func remoteCRD(t *testing.T, remote int) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	var crd apiextensionsv1.CustomResourceDefinition
	if err := env.RemoteClients[remote].Get(t.Context(), client.ObjectKey{Name: helmKind.CRD}, &crd); err != nil || !crd.DeletionTimestamp.IsZero() {
		return nil
	}
	return &crd
}

// CRDs in remote clusters have one writer. A CRD the Helm release ships in
// crds/ is installed by Helm only (spec.install.crds skips it) and survives
// cleanupPolicy Delete, which removes the release; a CRD clustershard applied
// is kept by cleanupPolicy Delete while it holds an object clustershard did
// not create, and the RemoteCluster says so in an event.
func TestCRDsHaveOneOwner(t *testing.T) {
	ctx := t.Context()
	installHelmKindCRD(t)
	startReplicaWith(t, "crd-owner", func(o *replica.Options) { o.Kinds = []remotecopy.Kind{helmKind} })

	// The chart ships the CRD: Helm writes it, clustershard does not.
	installCluster(t, "crd-helm", 1, &v1alpha1.HelmInstall{Chart: chartPath(t, "with-crds"), ReleaseName: "chaos", Namespace: "chaos-mesh"})
	waitReady(t, "crd-helm", 90*time.Second)
	if c := condition(t, "crd-helm", v1alpha1.ConditionInstalled); c == nil || !strings.Contains(c.Message, "1 shipped by the Helm release ("+helmKind.CRD+")") {
		t.Fatalf("Installed does not say the release ships the CRD: %+v", c)
	}
	crd := remoteCRD(t, 1)
	if crd == nil {
		t.Fatal("the chart's CRD is not in the remote cluster")
	}
	if _, ok := crd.Labels[v1alpha1.InstalledByLabel]; ok {
		t.Fatalf("clustershard labelled the release's CRD: %v", crd.Labels)
	}
	for _, m := range crd.ManagedFields {
		if m.Manager == v1alpha1.FieldManager {
			t.Fatalf("clustershard wrote the release's CRD: managed fields %+v", crd.ManagedFields)
		}
	}
	// Its kind replicates.
	ensureNamespace(t, env.Client, "crd-ns")
	src := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"remoteCluster": "crd-helm", "action": "pod-kill"}}}
	src.SetGroupVersionKind(helmKind.GVK)
	src.SetNamespace("crd-ns")
	src.SetName("from-chart")
	if err := env.Client.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the copy in the remote cluster", func() bool {
		return env.RemoteClients[1].Get(ctx, client.ObjectKeyFromObject(src), helmKind.New()) == nil
	})
	if err := env.Client.Delete(ctx, src); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "source gone", func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(src), helmKind.New()))
	})
	deleteAndWait(t, "crd-helm")
	if h := history(t, 1, "chaos-mesh", "chaos"); len(h) != 0 {
		t.Fatalf("the release was not uninstalled: %d revisions", len(h))
	}
	if remoteCRD(t, 1) == nil {
		t.Fatal("cleanupPolicy Delete removed the CRD the Helm release installed")
	}

	// clustershard applies the CRD; an object it did not create keeps it.
	installCluster(t, "crd-ours", 0, nil)
	waitReady(t, "crd-ours", 90*time.Second)
	if crd := remoteCRD(t, 0); crd == nil || crd.Labels[v1alpha1.InstalledByLabel] != "clustershard" {
		t.Fatalf("clustershard did not apply the CRD: %+v", crd)
	}
	ensureNamespace(t, env.RemoteClients[0], "foreign-ns")
	foreign := helmKind.New()
	foreign.SetNamespace("foreign-ns")
	foreign.SetName("made-by-hand")
	if err := env.RemoteClients[0].Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	deleteAndWait(t, "crd-ours")
	if remoteCRD(t, 0) == nil {
		t.Fatal("cleanupPolicy Delete removed a CRD holding an object clustershard did not create")
	}
	eventually(t, 10*time.Second, "a CRDKept event on the RemoteCluster", func() bool {
		var list eventsv1.EventList
		if err := env.Client.List(ctx, &list); err != nil {
			return false
		}
		for _, e := range list.Items {
			if e.Regarding.Name == "crd-ours" && e.Reason == v1alpha1.ReasonCRDKept && strings.Contains(e.Note, "foreign-ns/made-by-hand") {
				t.Logf("event: %s", e.Note)
				return true
			}
		}
		return false
	})
}
