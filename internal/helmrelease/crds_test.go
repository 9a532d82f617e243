package helmrelease_test

import (
	"slices"
	"testing"

	"helm.sh/helm/v3/pkg/chart"

	"github.com/clustershard/clustershard/internal/helmrelease"
)

func TestCRDNames(t *testing.T) {
	dep := &chart.Chart{Metadata: &chart.Metadata{Name: "dep"}, Files: []*chart.File{
		{Name: "crds/b.yaml", Data: []byte("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: b.example.io\n")},
	}}
	ch := &chart.Chart{Metadata: &chart.Metadata{Name: "top"}, Files: []*chart.File{
		{Name: "crds/a.yaml", Data: []byte("kind: CustomResourceDefinition\nmetadata:\n  name: a.example.io\n---\n# a comment\n---\nkind: ConfigMap\nmetadata:\n  name: not-a-crd\n")},
		{Name: "crds/README.md", Data: []byte("not a manifest")},
		{Name: "files/c.yaml", Data: []byte("kind: CustomResourceDefinition\nmetadata:\n  name: c.example.io\n")},
	}}
	ch.AddDependency(dep)
	got, err := helmrelease.CRDNames(ch)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a.example.io", "b.example.io"}; !slices.Equal(got, want) {
		t.Fatalf("CRDNames = %v, want %v", got, want)
	}
	bad := &chart.Chart{Metadata: &chart.Metadata{Name: "bad"}, Files: []*chart.File{{Name: "crds/x.yaml", Data: []byte("kind: [")}}}
	if _, err := helmrelease.CRDNames(bad); err == nil {
		t.Fatal("a malformed crds/ file was accepted")
	}
}
