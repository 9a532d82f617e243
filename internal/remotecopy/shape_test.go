package remotecopy_test

import (
	"os"
	"reflect"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/clustershard/clustershard/internal/remotecopy"
)

func readCRD(t *testing.T, path string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	return &crd
}

// The shapes of the two test kinds: ours (status subresource, full
// conditions) and the Chaos-Mesh-shaped one.
func TestShapeOf(t *testing.T) {
	ours, err := remotecopy.ShapeOf(readCRD(t, "../../deploy/examples/crds/example.clustershard.io_examplechaos.yaml"), "v1alpha1")
	if err != nil {
		t.Fatal(err)
	}
	if !ours.Known || !ours.StatusSubresource || !ours.Conditions() || !ours.Keeps("observedGeneration") || !ours.Keeps("message") || len(ours.RequiredStatus) != 0 {
		t.Fatalf("ExampleChaos shape %+v", ours)
	}
	strict, err := remotecopy.ShapeOf(readCRD(t, "../../deploy/examples/crds/example.clustershard.io_strictchaos.yaml"), "v1alpha1")
	if err != nil {
		t.Fatal(err)
	}
	if !strict.Known || strict.StatusSubresource || !strict.Conditions() {
		t.Fatalf("StrictChaos shape %+v", strict)
	}
	if want := []string{"reason", "status", "type"}; !reflect.DeepEqual(strict.ConditionFields, want) {
		t.Fatalf("condition fields %v, want %v", strict.ConditionFields, want)
	}
	if !reflect.DeepEqual(strict.RequiredStatus, map[string]any{"experiment": map[string]any{}}) {
		t.Fatalf("required status %v", strict.RequiredStatus)
	}
	if _, err := remotecopy.ShapeOf(readCRD(t, "../../deploy/examples/crds/example.clustershard.io_strictchaos.yaml"), "v9"); err == nil {
		t.Fatal("a version the CRD does not serve: no error")
	}
}
