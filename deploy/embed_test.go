package deploy_test

import (
	"testing"

	"github.com/clustershard/clustershard/deploy"
)

func TestEmbeddedCRDs(t *testing.T) {
	crds, err := deploy.CRDs(true)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, c := range crds {
		names[c.Name] = true
	}
	if !names["remoteclusters.clustershard.io"] || !names["examplechaos.example.clustershard.io"] {
		t.Fatalf("embedded CRDs: %v", names)
	}
}
