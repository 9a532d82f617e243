// Package v1alpha1 holds ExampleChaos, an EXAMPLE kind used only by tests and
// the demo. It is not part of the clustershard API: it is shaped like a Chaos
// Mesh chaos kind (namespaced, spec.remoteCluster, a status subresource) so the
// replication controllers can be exercised without installing Chaos Mesh.
//
// +kubebuilder:object:generate=true
// +groupName=example.clustershard.io
package v1alpha1
