// Package scheme builds the runtime.Scheme of the clustershard binary: the
// built-in kinds, apiextensions and the clustershard API. Replicated kinds
// are configured at start-up and handled as unstructured, so none is here;
// the example kind of the demo, the drill and the tests is added by
// tools/fleet.
package scheme

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/clustershard/clustershard/api/v1alpha1"
)

// New returns a new scheme with every kind clustershard reads or writes.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}
