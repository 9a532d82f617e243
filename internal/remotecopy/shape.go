package remotecopy

import (
	"context"
	"fmt"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Shape is what a replicated kind's CRD says about its status, learned from
// the management cluster at start-up: Chaos Mesh's chaos kinds have no status
// subresource, require status.experiment and keep only type, status and
// reason of a condition, so the writers of a source's status must follow the
// schema instead of assuming ours.
type Shape struct {
	// Known is false when the CRD could not be read; the writers then assume
	// a status subresource and full conditions (the shape of our own kinds).
	Known bool
	// StatusSubresource tells whether status is written through /status.
	// Without it, status is part of the main resource and every change of it
	// bumps metadata.generation.
	StatusSubresource bool
	// Status is false when the schema has no status field at all: nothing
	// can be mirrored and the outcome lives only in an annotation.
	Status bool
	// ConditionFields are the fields a status.conditions item keeps; nil
	// means any (full metav1.Condition or unknown fields preserved), empty
	// means the schema has no status.conditions.
	ConditionFields []string
	// RequiredStatus are status fields the schema requires, with the zero
	// value a write of status must carry when the source has none yet.
	RequiredStatus map[string]any
}

// DefaultShape is the shape assumed for a kind whose CRD is not readable.
var DefaultShape = Shape{StatusSubresource: true, Status: true}

// Conditions tells whether status.conditions can hold a condition.
func (s Shape) Conditions() bool {
	return s.Status && (s.ConditionFields == nil || len(s.ConditionFields) > 0)
}

// Keeps tells whether a status.conditions item keeps field.
func (s Shape) Keeps(field string) bool {
	return s.ConditionFields == nil || slices.Contains(s.ConditionFields, field)
}

// String describes the shape for logs and the issue of a kind that cannot be mirrored.
func (s Shape) String() string {
	switch {
	case !s.Known:
		return "CRD not read; assuming a status subresource"
	case !s.Status:
		return "no status in the schema: remote status cannot be mirrored"
	case s.StatusSubresource:
		return "status subresource"
	default:
		return "no status subresource: status written with the object"
	}
}

// LearnShape reads the kind's CRD from the management cluster and returns
// the shape of the version the kind is served at.
func LearnShape(ctx context.Context, c client.Reader, k Kind) (Shape, error) {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := c.Get(ctx, client.ObjectKey{Name: k.CRD}, &crd); err != nil {
		return DefaultShape, fmt.Errorf("read CRD %s of replicated kind %s: %w", k.CRD, k.GVK.Kind, err)
	}
	return ShapeOf(&crd, k.GVK.Version)
}

// ShapeOf returns the shape of one version of a CRD.
func ShapeOf(crd *apiextensionsv1.CustomResourceDefinition, version string) (Shape, error) {
	for _, v := range crd.Spec.Versions {
		if v.Name != version {
			continue
		}
		s := Shape{Known: true, StatusSubresource: v.Subresources != nil && v.Subresources.Status != nil}
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			s.Status = true // no schema: anything is kept
			return s, nil
		}
		root := v.Schema.OpenAPIV3Schema
		status, ok := root.Properties["status"]
		if !ok {
			// Only a schema that keeps unknown fields keeps a status it does not declare.
			s.Status = preserves(root)
			if !s.Status {
				s.ConditionFields = []string{}
			}
			return s, nil
		}
		s.Status = true
		if len(status.Required) > 0 {
			s.RequiredStatus = map[string]any{}
		}
		for _, name := range status.Required {
			s.RequiredStatus[name] = zeroOf(status.Properties[name])
		}
		conds, ok := status.Properties["conditions"]
		switch {
		case !ok && !preserves(&status):
			s.ConditionFields = []string{}
		case ok && conds.Items != nil && conds.Items.Schema != nil && !preserves(conds.Items.Schema) && len(conds.Items.Schema.Properties) > 0:
			for name := range conds.Items.Schema.Properties {
				s.ConditionFields = append(s.ConditionFields, name)
			}
			slices.Sort(s.ConditionFields)
		}
		return s, nil
	}
	return DefaultShape, fmt.Errorf("CRD %s does not serve version %s", crd.Name, version)
}

func preserves(p *apiextensionsv1.JSONSchemaProps) bool {
	return p.XPreserveUnknownFields != nil && *p.XPreserveUnknownFields
}

// zeroOf is the smallest value of a schema's type that validates.
func zeroOf(p apiextensionsv1.JSONSchemaProps) any {
	switch p.Type {
	case "array":
		return []any{}
	case "string":
		return ""
	case "integer", "number":
		return int64(0)
	case "boolean":
		return false
	default:
		out := map[string]any{}
		for _, name := range p.Required {
			out[name] = zeroOf(p.Properties[name])
		}
		return out
	}
}
