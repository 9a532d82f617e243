package crdshape_test

import (
	"context"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/controllers/crdshape"
	"github.com/clustershard/clustershard/internal/remotecopy"
	"github.com/clustershard/clustershard/test/testenv"
)

var env *testenv.Env

// The controller reads only the management cluster's CRDs: no remote.
func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, testenv.Options{}, &env))
}

// shapeCRD is the CRD of kind (plural: its lower-case name) in group
// crdshape.clustershard.io: without status in its schema, with a status
// keeping unknown fields, and with a status subresource too.
func shapeCRD(kind string, status, subresource bool) *apiextensionsv1.CustomResourceDefinition {
	yes := true
	plural := strings.ToLower(kind)
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
		ObjectMeta: metav1.ObjectMeta{Name: plural + ".crdshape.clustershard.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "crdshape.clustershard.io", Scope: apiextensionsv1.NamespaceScoped,
			Names:    apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: plural},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{v},
		},
	}
}

// setCRD creates want, or changes the CRD of its name to want's spec (on
// a conflict with the API server's own status writes, again).
func setCRD(t *testing.T, want *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var crd apiextensionsv1.CustomResourceDefinition
		err := env.Client.Get(t.Context(), client.ObjectKey{Name: want.Name}, &crd)
		if apierrors.IsNotFound(err) {
			return env.Client.Create(t.Context(), want.DeepCopy())
		}
		if err != nil {
			return err
		}
		crd.Spec = want.Spec
		return env.Client.Update(t.Context(), &crd)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func reconcile(t *testing.T, r *crdshape.Reconciler, crd string) error {
	t.Helper()
	_, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKey{Name: crd}})
	return err
}

// A kind's shape follows its CRD, in every copy of the Kind a controller
// holds: status added to the schema (written with the object, Chaos Mesh's
// shape), a status subresource added (written through /status), both
// removed again (nothing can be mirrored).
func TestShapeFollowsCRD(t *testing.T) {
	crd := shapeCRD("FollowChaos", false, false)
	setCRD(t, crd)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), crd) })
	k := testenv.MustKind("FollowChaos.v1alpha1.crdshape.clustershard.io/followchaos").WithShape(remotecopy.DefaultShape)
	held := k // a controller's copy of the kind
	r := &crdshape.Reconciler{Client: env.Client, Kinds: []remotecopy.Kind{k}}

	steps := []struct {
		status, subresource bool
		want                remotecopy.Shape
	}{
		{false, false, remotecopy.Shape{Known: true, ConditionFields: []string{}}},
		{true, false, remotecopy.Shape{Known: true, Status: true}},
		{true, true, remotecopy.Shape{Known: true, Status: true, StatusSubresource: true}},
		{false, false, remotecopy.Shape{Known: true, ConditionFields: []string{}}},
	}
	for i, s := range steps {
		setCRD(t, shapeCRD("FollowChaos", s.status, s.subresource))
		if err := reconcile(t, r, crd.Name); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got := held.Shape(); !reflect.DeepEqual(got, s.want) {
			t.Errorf("step %d (status %v, subresource %v): shape %+v, want %+v", i, s.status, s.subresource, got, s.want)
		}
	}
	if s := held.Shape().String(); !strings.Contains(s, "cannot be mirrored") {
		t.Errorf("a kind without status says %q", s)
	}
}

// A deleted CRD leaves the kind with its last shape, without an error
// (its sources are gone with it).
func TestDeletedCRDKeepsLastShape(t *testing.T) {
	ctx := t.Context()
	crd := shapeCRD("GoneChaos", true, true)
	setCRD(t, crd)
	k := testenv.MustKind("GoneChaos.v1alpha1.crdshape.clustershard.io/gonechaos").WithShape(remotecopy.DefaultShape)
	r := &crdshape.Reconciler{Client: env.Client, Kinds: []remotecopy.Kind{k}}
	if err := reconcile(t, r, crd.Name); err != nil {
		t.Fatal(err)
	}
	last := k.Shape()
	if !last.Known {
		t.Fatalf("shape not learned: %+v", last)
	}

	if err := env.Client.Delete(ctx, crd); err != nil {
		t.Fatal(err)
	}
	// The API server's CRD cleanup deletes the kind's objects first: on a
	// busy 2-core machine (the suite's packages run at once) that took over
	// 30 s once.
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Name: crd.Name}, &apiextensionsv1.CustomResourceDefinition{})), nil
	})
	if err != nil {
		t.Fatalf("CRD not deleted: %v", err)
	}
	if err := reconcile(t, r, crd.Name); err != nil {
		t.Fatalf("Reconcile of a deleted CRD: %v", err)
	}
	if got := k.Shape(); !reflect.DeepEqual(got, last) {
		t.Errorf("shape after the CRD was deleted: %+v, want the last one %+v", got, last)
	}
}

// The kinds users bring are learned from their real CRDs, each from its
// own: StrictChaos (Chaos Mesh's shape) has no status subresource, requires
// status.experiment and keeps type, status and reason of a condition;
// ExampleChaos has a status subresource and full conditions. A CRD of no
// replicated kind changes nothing.
func TestLearnsEachKindFromItsCRD(t *testing.T) {
	example := testenv.MustKind(testenv.ExampleKind).WithShape(remotecopy.DefaultShape)
	strict := testenv.MustKind(testenv.StrictKind).WithShape(remotecopy.DefaultShape)
	r := &crdshape.Reconciler{Client: env.Client, Kinds: []remotecopy.Kind{example, strict}}

	if err := reconcile(t, r, "remoteclusters.clustershard.io"); err != nil {
		t.Fatal(err)
	}
	if example.Shape().Known || strict.Shape().Known {
		t.Fatal("a CRD of no replicated kind changed a shape")
	}

	if err := reconcile(t, r, strict.CRD); err != nil {
		t.Fatal(err)
	}
	want := remotecopy.Shape{
		Known: true, Status: true, ConditionFields: []string{"reason", "status", "type"},
		RequiredStatus: map[string]any{"experiment": map[string]any{}},
	}
	if got := strict.Shape(); !reflect.DeepEqual(got, want) {
		t.Errorf("StrictChaos shape %+v, want %+v", got, want)
	}
	if example.Shape().Known {
		t.Error("StrictChaos's CRD changed ExampleChaos's shape")
	}

	if err := reconcile(t, r, example.CRD); err != nil {
		t.Fatal(err)
	}
	got := example.Shape()
	if !got.Known || !got.StatusSubresource || !got.Conditions() || !got.Keeps("message") || !got.Keeps("observedGeneration") {
		t.Errorf("ExampleChaos shape %+v: want a status subresource and full conditions", got)
	}
}

// A kind whose CRD does not serve its version cannot be learned: Reconcile
// returns the error (the workqueue retries) and the kind keeps its shape.
func TestUnservedVersionIsAnError(t *testing.T) {
	k := testenv.MustKind("ExampleChaos.v1beta1.example.clustershard.io/examplechaos").WithShape(remotecopy.DefaultShape)
	r := &crdshape.Reconciler{Client: env.Client, Kinds: []remotecopy.Kind{k}}
	err := reconcile(t, r, k.CRD)
	if err == nil || !strings.Contains(err.Error(), "v1beta1") {
		t.Fatalf("Reconcile error = %v, want one naming the unserved version", err)
	}
	if got := k.Shape(); !reflect.DeepEqual(got, remotecopy.DefaultShape) {
		t.Errorf("shape changed to %+v", got)
	}
}
