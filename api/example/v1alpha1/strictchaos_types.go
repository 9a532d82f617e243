package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StrictChaosSpec is shaped like a Chaos Mesh chaos spec.
type StrictChaosSpec struct {
	// RemoteCluster names the RemoteCluster the object is bound for.
	// +optional
	RemoteCluster string `json:"remoteCluster,omitempty"`

	// Action is the kind of fault.
	// +optional
	Action string `json:"action,omitempty"`

	// Duration of the fault, such as "30s".
	// +optional
	Duration string `json:"duration,omitempty"`
}

// StrictChaosCondition keeps only what a Chaos Mesh chaos condition keeps:
// anything else written into status.conditions is pruned.
type StrictChaosCondition struct {
	// Type of the condition.
	Type string `json:"type"`
	// Status of the condition: True, False or Unknown.
	Status string `json:"status"`
	// Reason of the condition.
	// +optional
	Reason string `json:"reason"`
}

// StrictChaosExperiment is shaped like Chaos Mesh's ExperimentStatus.
type StrictChaosExperiment struct {
	// DesiredPhase is Run or Stop.
	// +optional
	DesiredPhase string `json:"desiredPhase,omitempty"`
	// Records of the targets.
	// +optional
	Records []StrictChaosRecord `json:"containerRecords,omitempty"`
}

// StrictChaosRecord is one target's record.
type StrictChaosRecord struct {
	// ID of the target.
	ID string `json:"id"`
	// Phase of the target.
	// +optional
	Phase string `json:"phase,omitempty"`
}

// StrictChaosStatus is shaped like a Chaos Mesh chaos status: experiment is
// required, conditions keep type, status and reason only.
type StrictChaosStatus struct {
	// Conditions of the object.
	// +optional
	Conditions []StrictChaosCondition `json:"conditions,omitempty"`
	// Experiment is the state of the experiment.
	Experiment StrictChaosExperiment `json:"experiment"`
}

// StrictChaos is a test kind shaped like Chaos Mesh's chaos kinds: no status
// subresource (status is written with the object, and every status change
// bumps metadata.generation), status.experiment required, minimal conditions.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,categories=clustershard-example
// +kubebuilder:printcolumn:name="Remote",type=string,JSONPath=`.spec.remoteCluster`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type StrictChaos struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state.
	Spec StrictChaosSpec `json:"spec"`
	// Status is the observed state.
	// +optional
	Status StrictChaosStatus `json:"status,omitempty"`
}

// StrictChaosList is a list of StrictChaos.
//
// +kubebuilder:object:root=true
type StrictChaosList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the objects.
	Items []StrictChaos `json:"items"`
}
