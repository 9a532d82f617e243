package monitor_test

import (
	"context"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/controllers/monitor"
	"github.com/clustershard/clustershard/internal/remotecopy"
	"github.com/clustershard/clustershard/test/testenv"
)

var env *testenv.Env

// One management API server and one remote holding the example CRDs.
func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, testenv.Options{Remotes: 1, RemoteCRDs: true}, &env))
}

var (
	exampleKind = testenv.MustKind(testenv.ExampleKind)
	// strictKind is shaped like Chaos Mesh's chaos kinds (no status
	// subresource, status.experiment required, minimal conditions).
	strictKind = testenv.MustKind(testenv.StrictKind)
	// looseKind keeps any status (its CRD is created by looseCRD): what a
	// remote controller writes there is not checked by any schema.
	looseKind = testenv.MustKind("LooseChaos.v1alpha1.loose.clustershard.io/loosechaos")
)

const cluster = "east"

// newReconciler monitors k's copies in remote 0, the cluster called "east".
func newReconciler(k remotecopy.Kind) *monitor.Reconciler {
	return &monitor.Reconciler{Kind: k, Remote: env.RemoteClients[0], Manage: env.Client, Fresh: env.Client, Cluster: cluster, Identity: "replica-test"}
}

func reconcile(t *testing.T, r *monitor.Reconciler, key client.ObjectKey) (ctrl.Result, error) {
	t.Helper()
	return r.Reconcile(t.Context(), ctrl.Request{NamespacedName: key})
}

// inBoth creates namespace ns in the management cluster and in the remote.
func inBoth(t *testing.T, ns string) {
	t.Helper()
	for _, c := range []client.Client{env.Client, env.RemoteClients[0]} {
		err := c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

// newSource returns an unsaved source of k naming cluster.
func newSource(k remotecopy.Kind, ns, name, cluster string) *unstructured.Unstructured {
	src := k.New()
	src.SetNamespace(ns)
	src.SetName(name)
	src.Object["spec"] = map[string]any{"remoteCluster": cluster, "action": "pod-kill"}
	return src
}

// createCopy creates the remote copy of src, as replicate would.
func createCopy(t *testing.T, k remotecopy.Kind, src *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	cp := k.Copy(src, cluster, "replica-test")
	if err := env.RemoteClients[0].Create(t.Context(), cp); err != nil {
		t.Fatal(err)
	}
	return cp
}

// get reads an object of k through c; nil when it does not exist.
func get(t *testing.T, c client.Client, k remotecopy.Kind, key client.ObjectKey) *unstructured.Unstructured {
	t.Helper()
	o := k.New()
	if err := c.Get(t.Context(), key, o); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		t.Fatal(err)
	}
	return o
}

// looseCRD creates looseKind's CRD in both clusters: a schema that keeps
// unknown fields anywhere and no status subresource. It waits until both
// API servers serve the kind.
func looseCRD(t *testing.T) {
	t.Helper()
	yes := true
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: looseKind.CRD},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: looseKind.GVK.Group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "LooseChaos", ListKind: "LooseChaosList", Plural: "loosechaos", Singular: "loosechaos"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1alpha1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &yes}},
			}},
		},
	}
	inBoth(t, "loose-probe")
	for _, c := range []client.Client{env.Client, env.RemoteClients[0]} {
		if err := c.Create(t.Context(), crd.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		probe := newSource(looseKind, "loose-probe", "probe", cluster)
		err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			return c.Create(ctx, probe.DeepCopy(), client.DryRunAll) == nil, nil
		})
		if err != nil {
			t.Fatalf("%s not served: %v", looseKind.CRD, err)
		}
	}
}
