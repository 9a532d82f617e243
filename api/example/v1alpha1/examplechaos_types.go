package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ExampleChaosSpec mirrors the shape of a Chaos Mesh chaos spec.
type ExampleChaosSpec struct {
	// RemoteCluster names the RemoteCluster the object is bound for; empty
	// means the management cluster itself.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	RemoteCluster string `json:"remoteCluster,omitempty"`

	// Action is the kind of fault.
	// +kubebuilder:validation:Enum=pod-kill;pod-failure;network-delay
	// +kubebuilder:default=pod-kill
	// +optional
	Action string `json:"action,omitempty"`

	// Duration of the fault, such as "30s".
	// +optional
	Duration string `json:"duration,omitempty"`

	// Selector chooses the target pods by label.
	// +optional
	Selector map[string]string `json:"selector,omitempty"`
}

// ExampleChaosStatus mirrors the shape of a Chaos Mesh chaos status.
type ExampleChaosStatus struct {
	// Phase is a one-word summary.
	// +optional
	Phase string `json:"phase,omitempty"`

	// ObservedGeneration is the generation last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions of the object.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ExampleChaos is an example chaos-like kind for tests and the demo.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories=clustershard-example
// +kubebuilder:printcolumn:name="Remote",type=string,JSONPath=`.spec.remoteCluster`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ExampleChaos struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state.
	Spec ExampleChaosSpec `json:"spec,omitempty"`
	// Status is the observed state.
	// +optional
	Status ExampleChaosStatus `json:"status,omitempty"`
}

// ExampleChaosList is a list of ExampleChaos.
//
// +kubebuilder:object:root=true
type ExampleChaosList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the objects.
	Items []ExampleChaos `json:"items"`
}
