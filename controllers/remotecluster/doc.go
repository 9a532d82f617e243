// Package remotecluster is the management-side RemoteCluster controller: on
// the replica that owns a cluster it reads the kubeconfig Secret, probes the
// remote API server, installs what spec.install asks for, spawns the remote
// manager in the registry (restarting it when the kubeconfig changes or the
// manager failed), keeps status and conditions true, and cleans up on
// deletion. Chaos Mesh's remotecluster controller, sharded.
package remotecluster
