// Package kubeconfig turns the kubeconfig stored in a RemoteCluster's Secret
// into a rest.Config safely: it refuses credentials that would run commands
// inside the controller (exec and auth-provider plugins) unless allowed,
// never puts secret material into errors, and hashes the content so a
// rotation can be detected.
package kubeconfig
