package replicate

import (
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/clustershard/clustershard/api/v1alpha1"
)

// bookkeeping are the source's annotations only this controller and the
// monitor write to report, never to ask for anything.
var bookkeeping = []string{v1alpha1.OutcomeAnnotation, v1alpha1.RemoteFinalizersAnnotation}

// onlyBookkeeping reports whether an update of a source changed nothing but
// what replication itself writes to report: its status (the outcome
// condition, the mirrored remote status), the outcome and remote-finalizer
// annotations, and the bookkeeping of the API server (resourceVersion,
// managedFields, and the generation a kind without a status subresource
// bumps on a status write). Such an update asks for nothing new: each sync
// used to run again once per report it wrote, with a remote read each
// time. Anything else, the finalizer and the replicated-to annotation
// included, is reconciled.
func onlyBookkeeping(old, cur *unstructured.Unstructured) bool {
	if old == nil || cur == nil {
		return false
	}
	return equality.Semantic.DeepEqual(stripBookkeeping(old), stripBookkeeping(cur))
}

func stripBookkeeping(u *unstructured.Unstructured) map[string]any {
	c := u.DeepCopy()
	delete(c.Object, "status")
	unstructured.RemoveNestedField(c.Object, "metadata", "resourceVersion")
	unstructured.RemoveNestedField(c.Object, "metadata", "managedFields")
	unstructured.RemoveNestedField(c.Object, "metadata", "generation")
	if ann := c.GetAnnotations(); len(ann) > 0 {
		for _, k := range bookkeeping {
			delete(ann, k)
		}
		c.SetAnnotations(ann)
	}
	return c.Object
}

// skipBookkeeping drops the update events onlyBookkeeping describes.
func skipBookkeeping() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		old, ok1 := e.ObjectOld.(*unstructured.Unstructured)
		cur, ok2 := e.ObjectNew.(*unstructured.Unstructured)
		return !ok1 || !ok2 || !onlyBookkeeping(old, cur)
	}}
}
