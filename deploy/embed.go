// Package deploy embeds the generated CRDs so the binary (status, demo) and
// tests can install them without reading files from disk.
package deploy

import (
	"embed"
	"fmt"
	"io/fs"
	"path"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed crds/*.yaml examples/crds/*.yaml
var files embed.FS

// CRDs returns the clustershard CRDs and, with examples, the example kind's.
func CRDs(examples bool) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	globs := []string{"crds/*.yaml"}
	if examples {
		globs = append(globs, "examples/crds/*.yaml")
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, g := range globs {
		names, err := fs.Glob(files, g)
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			if path.Base(n) == "kustomization.yaml" {
				continue
			}
			data, err := files.ReadFile(n)
			if err != nil {
				return nil, err
			}
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := yaml.UnmarshalStrict(data, crd); err != nil {
				return nil, fmt.Errorf("%s: %w", n, err)
			}
			out = append(out, crd)
		}
	}
	return out, nil
}
