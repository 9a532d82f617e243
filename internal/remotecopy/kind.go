package remotecopy

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"unicode"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/clustershard/clustershard/api/v1alpha1"
)

// Kind is one replicated kind.
type Kind struct {
	// GVK of the kind, served by the management cluster's API.
	GVK schema.GroupVersionKind
	// Field is the path of the remote-cluster field (default spec.remoteCluster).
	Field []string
	// CRD is the name of the kind's CustomResourceDefinition, copied into
	// remote clusters by spec.install (plural.group).
	CRD string
	// Update is how copies take spec changes; empty means UpdateAuto.
	Update UpdateStrategy

	// shape is what the CRD says about status (LearnShape), shared by every
	// copy of the Kind value made after WithShape, so that a change of the
	// CRD (SetShape) reaches every controller of the kind at once.
	shape *atomic.Pointer[Shape]
}

// WithShape returns k with a shape of its own, set to s.
func (k Kind) WithShape(s Shape) Kind {
	k.shape = new(atomic.Pointer[Shape])
	k.shape.Store(&s)
	return k
}

// SetShape replaces the shape of k and of every copy of it made after
// WithShape, and reports whether it changed. A Kind without WithShape keeps
// DefaultShape.
func (k Kind) SetShape(s Shape) bool {
	if k.shape == nil {
		return false
	}
	old := k.shape.Swap(&s)
	return old == nil || !reflect.DeepEqual(*old, s)
}

// Shape returns the kind's shape, DefaultShape when none was learned.
func (k Kind) Shape() Shape {
	if k.shape == nil {
		return DefaultShape
	}
	if s := k.shape.Load(); s != nil && (s.Known || s.Status) {
		return *s
	}
	return DefaultShape
}

// ParseKind reads "Kind.version.group[/plural][:field.path][@strategy]": an
// optional plural after a slash, the remote-cluster field after a colon and
// the update strategy (Apply, Recreate, Auto) after an at sign, e.g.
// "PodChaos.v1alpha1.chaos-mesh.org/podchaos:spec.remoteCluster@Recreate".
func ParseKind(s string) (Kind, error) {
	rest, strategy, hasStrategy := strings.Cut(s, "@")
	spec, field, _ := strings.Cut(rest, ":")
	spec, plural, _ := strings.Cut(spec, "/")
	parts := strings.SplitN(spec, ".", 3)
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return Kind{}, fmt.Errorf("replicated kind %q: want Kind.version.group[/plural][:field.path][@Apply|Recreate|Auto]", s)
	}
	if err := validNames(parts[0], parts[1], parts[2], plural); err != nil {
		return Kind{}, fmt.Errorf("replicated kind %q: %w", s, err)
	}
	k := Kind{GVK: schema.GroupVersionKind{Kind: parts[0], Version: parts[1], Group: parts[2]}}
	if hasStrategy {
		u, err := ParseUpdateStrategy(strategy)
		if err != nil {
			return Kind{}, fmt.Errorf("replicated kind %q: %w", s, err)
		}
		k.Update = u
	}
	if plural == "" {
		plural = strings.ToLower(parts[0])
	}
	k.CRD = plural + "." + parts[2]
	if field == "" {
		field = "spec.remoteCluster"
	}
	k.Field = strings.Split(field, ".")
	for _, f := range k.Field {
		if f == "" || strings.ContainsFunc(f, unicode.IsSpace) {
			return Kind{}, fmt.Errorf("replicated kind %q: empty segment or white space in field path %q", s, field)
		}
	}
	return k, nil
}

// New returns an empty object of the kind.
func (k Kind) New() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(k.GVK)
	return u
}

// Cluster returns the remote cluster a source names, or "".
func (k Kind) Cluster(obj *unstructured.Unstructured) string {
	v, _, _ := unstructured.NestedString(obj.Object, k.Field...)
	return v
}

// Copy derives the remote copy of a source: same namespace and name, spec and
// the rest of the content except status, metadata reduced to labels and
// annotations (clustershard's own removed), the remote-cluster field cleared,
// and the copy's identity labels and annotations added.
func (k Kind) Copy(src *unstructured.Unstructured, cluster, writer string) *unstructured.Unstructured {
	out := &unstructured.Unstructured{Object: map[string]any{}}
	for key, v := range src.Object {
		if key != "metadata" && key != "status" {
			out.Object[key] = runtime.DeepCopyJSONValue(v)
		}
	}
	unstructured.RemoveNestedField(out.Object, k.Field...)
	out.SetNamespace(src.GetNamespace())
	out.SetName(src.GetName())
	labels := map[string]string{}
	for key, v := range src.GetLabels() {
		if !strings.HasPrefix(key, "clustershard.io/") {
			labels[key] = v
		}
	}
	labels[v1alpha1.ControlledByLabel] = v1alpha1.ControlledByValue
	labels[v1alpha1.CopyClusterLabel] = cluster
	out.SetLabels(labels)
	ann := map[string]string{}
	for key, v := range src.GetAnnotations() {
		if !strings.HasPrefix(key, "clustershard.io/") && key != "kubectl.kubernetes.io/last-applied-configuration" {
			ann[key] = v
		}
	}
	ann[v1alpha1.WrittenByAnnotation] = writer
	ann[v1alpha1.SourceUIDAnnotation] = string(src.GetUID())
	ann[v1alpha1.SpecHashAnnotation] = SpecHash(src)
	out.SetAnnotations(ann)
	return out
}

// SkipRemoteBound is the predicate local controllers use to skip objects
// bound for a remote cluster: it passes only objects whose remote-cluster
// field (default spec.remoteCluster) is empty.
func SkipRemoteBound(field ...string) predicate.Predicate {
	if len(field) == 0 {
		field = []string{"spec", "remoteCluster"}
	}
	return predicate.NewPredicateFuncs(func(o client.Object) bool {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			m, err := toUnstructured(o)
			if err != nil {
				return true
			}
			u = m
		}
		v, _, _ := unstructured.NestedString(u.Object, field...)
		return v == ""
	})
}

// validNames checks the names of a kind as the API server checks a CRD's:
// the kind and plural (when given) as DNS-1035 labels (the kind in lower
// case), the version as a DNS-1035 label, the group as a DNS subdomain.
func validNames(kind, version, group, plural string) error {
	var errs []string
	check := func(what, v string, msgs []string) {
		if len(msgs) > 0 {
			errs = append(errs, fmt.Sprintf("%s %q: %s", what, v, strings.Join(msgs, "; ")))
		}
	}
	check("kind", kind, validation.IsDNS1035Label(strings.ToLower(kind)))
	check("version", version, validation.IsDNS1035Label(version))
	check("group", group, validation.IsDNS1123Subdomain(group))
	if plural != "" {
		check("plural", plural, validation.IsDNS1035Label(plural))
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, ", "))
	}
	return nil
}
