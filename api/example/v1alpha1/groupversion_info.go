package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version of the example API.
var GroupVersion = schema.GroupVersion{Group: "example.clustershard.io", Version: "v1alpha1"}

var (
	// SchemeBuilder registers the example types into a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the example types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &ExampleChaos{}, &ExampleChaosList{}, &StrictChaos{}, &StrictChaosList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
