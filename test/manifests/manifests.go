// Package manifests reads the project's shipped manifests for tests: a
// kustomization rendered with kustomize's Go API, or a file of YAML
// documents, as unstructured objects.
package manifests

import (
	"errors"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Kustomize renders the kustomization in dir (kustomize build).
func Kustomize(dir string) ([]*unstructured.Unstructured, error) {
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, r := range res.Resources() {
		data, err := r.AsYAML()
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &u.Object); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// File reads the YAML (or JSON) documents of a file, skipping empty ones.
func File(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}
