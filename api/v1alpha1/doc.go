// Package v1alpha1 holds the clustershard.io/v1alpha1 API: the cluster-scoped
// RemoteCluster kind, which names a remote Kubernetes cluster by a kubeconfig
// Secret and says what to install there before a replica manages it.
//
// +kubebuilder:object:generate=true
// +groupName=clustershard.io
package v1alpha1
