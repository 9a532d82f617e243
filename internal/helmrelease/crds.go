package helmrelease

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"

	"helm.sh/helm/v3/pkg/chart"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// CRDNames returns the names of the CustomResourceDefinitions a chart ships
// in crds/ (its dependencies' included), sorted. Helm installs those once,
// before the templates, and never upgrades or deletes them; whoever else
// writes them (spec.install.crds) would fight over them with the release.
func CRDNames(ch *chart.Chart) ([]string, error) {
	var names []string
	for _, crd := range ch.CRDObjects() {
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(crd.File.Data), 4096)
		for {
			var doc struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			err := dec.Decode(&doc)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("chart %s: %s: %w", ch.Name(), crd.Filename, err)
			}
			if doc.Kind == "CustomResourceDefinition" && doc.Metadata.Name != "" {
				names = append(names, doc.Metadata.Name)
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}
