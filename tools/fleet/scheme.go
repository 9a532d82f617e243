package fleet

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	examplev1alpha1 "github.com/clustershard/clustershard/api/example/v1alpha1"
	"github.com/clustershard/clustershard/internal/scheme"
)

// Scheme is the clustershard scheme with the example kind, for the tools
// and tests that read and write ExampleChaos objects typed.
func Scheme() *runtime.Scheme {
	s := scheme.New()
	utilruntime.Must(examplev1alpha1.AddToScheme(s))
	return s
}
