package replica_test

import (
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/remotecopy"
	"github.com/clustershard/clustershard/replica"
	"github.com/clustershard/clustershard/test/testenv"
)

// shapeKind's CRD is changed by TestShapeFollowsCRD while a replica runs.
var shapeKind = testenv.MustKind("ShapeChaos.v1alpha1.shapes.clustershard.io/shapechaos")

// shapeCRD is shapeKind's CRD: without status in its schema, with status
// (unknown fields kept), and with a status subresource too.
func shapeCRD(status, subresource bool) *apiextensionsv1.CustomResourceDefinition {
	yes := true
	props := map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object", XPreserveUnknownFields: &yes}}
	if status {
		props["status"] = apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &yes}
	}
	v := apiextensionsv1.CustomResourceDefinitionVersion{
		Name: "v1alpha1", Served: true, Storage: true,
		Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props}},
	}
	if subresource {
		v.Subresources = &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}}
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: shapeKind.CRD},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: shapeKind.GVK.Group, Scope: apiextensionsv1.NamespaceScoped,
			Names:    apiextensionsv1.CustomResourceDefinitionNames{Kind: "ShapeChaos", ListKind: "ShapeChaosList", Plural: "shapechaos", Singular: "shapechaos"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{v},
		},
	}
}

// setShapeCRD creates or changes shapeKind's CRD in c and waits until the
// API server serves the change.
func setShapeCRD(t *testing.T, c client.Client, want *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	var crd apiextensionsv1.CustomResourceDefinition
	if err := c.Get(t.Context(), client.ObjectKey{Name: want.Name}, &crd); err != nil {
		if err := c.Create(t.Context(), want); err != nil {
			t.Fatal(err)
		}
	} else {
		crd.Spec = want.Spec
		if err := c.Update(t.Context(), &crd); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "the CRD established", func() bool {
		var got apiextensionsv1.CustomResourceDefinition
		if err := c.Get(t.Context(), client.ObjectKey{Name: want.Name}, &got); err != nil {
			return false
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true
			}
		}
		return false
	})
	time.Sleep(time.Second) // the API server swaps its handler for the kind shortly after Established
}

// writeRemoteStatus writes status on the copy as a Chaos Mesh controller
// would, through /status when the remote CRD has one.
func writeRemoteStatus(t *testing.T, key client.ObjectKey, subresource bool, phase string) {
	t.Helper()
	eventually(t, 10*time.Second, "status written on the copy", func() bool {
		cp := shapeKind.New()
		if err := env.RemoteClients[0].Get(t.Context(), key, cp); err != nil {
			return false
		}
		_ = unstructured.SetNestedField(cp.Object, phase, "status", "phase")
		if subresource {
			return env.RemoteClients[0].Status().Update(t.Context(), cp) == nil
		}
		return env.RemoteClients[0].Update(t.Context(), cp) == nil
	})
}

func sourcePhase(t *testing.T, key client.ObjectKey) (string, remotecopy.Outcome) {
	src := shapeKind.New()
	if err := env.Client.Get(t.Context(), key, src); err != nil {
		return "", remotecopy.Outcome{}
	}
	phase, _, _ := unstructured.NestedString(src.Object, "status", "phase")
	o, _ := remotecopy.ReadOutcome(src)
	return phase, o
}

// The shape of a replicated kind follows its CRD while the replica runs. A
// schema without status: the source says its status is not mirrored. Status
// added: the remote status is mirrored with the object. A status subresource
// added: it is mirrored through /status (a patch of the object would be
// dropped silently by the API server, so a stale shape would never mirror).
func TestShapeFollowsCRD(t *testing.T) {
	ctx := t.Context()
	setShapeCRD(t, env.Client, shapeCRD(false, false))
	t.Cleanup(func() {
		for _, c := range append([]client.Client{env.Client}, env.RemoteClients...) {
			_ = c.Delete(ctx, shapeCRD(false, false))
		}
	})
	startReplicaWith(t, "shape-0", func(o *replica.Options) { o.Kinds = []remotecopy.Kind{shapeKind} })
	const cluster, ns = "shape-east", "shape-ns"
	remoteCluster(t, cluster, 0)
	waitReady(t, cluster, 60*time.Second)
	ensureNamespace(t, env.Client, ns)
	src := shapeKind.New()
	src.SetNamespace(ns)
	src.SetName("changing")
	_ = unstructured.SetNestedField(src.Object, cluster, "spec", "remoteCluster")
	if err := env.Client.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(src)
	eventually(t, 30*time.Second, "Synced, saying the status is not mirrored", func() bool {
		_, o := sourcePhase(t, key)
		return o.Reason == v1alpha1.ReasonSynced && strings.Contains(o.Message, "remote status not mirrored")
	})
	_, o := sourcePhase(t, key)
	t.Logf("no status in the schema: %+v", o)

	// Status added to the schema (Chaos Mesh's shape): mirrored with the object.
	for _, c := range []client.Client{env.Client, env.RemoteClients[0]} {
		setShapeCRD(t, c, shapeCRD(true, false))
	}
	writeRemoteStatus(t, key, false, "Injected")
	eventually(t, 30*time.Second, "the remote status mirrored with the object, and the outcome without the caveat", func() bool {
		phase, o := sourcePhase(t, key)
		return phase == "Injected" && o.Reason == v1alpha1.ReasonSynced && !strings.Contains(o.Message, "not mirrored")
	})

	// A status subresource added: mirrored through /status.
	for _, c := range []client.Client{env.Client, env.RemoteClients[0]} {
		setShapeCRD(t, c, shapeCRD(true, true))
	}
	writeRemoteStatus(t, key, true, "Recovered")
	eventually(t, 30*time.Second, "the remote status mirrored through /status", func() bool {
		phase, _ := sourcePhase(t, key)
		return phase == "Recovered"
	})
	if err := env.Client.Delete(ctx, src); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "source gone", func() bool {
		p, o := sourcePhase(t, key)
		return p == "" && o.Reason == ""
	})
}
