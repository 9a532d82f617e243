package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version of this API.
var GroupVersion = schema.GroupVersion{Group: "clustershard.io", Version: "v1alpha1"}

var (
	// SchemeBuilder registers the types of this API into a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the types of this API to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &RemoteCluster{}, &RemoteClusterList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
