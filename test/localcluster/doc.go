// Package localcluster starts a real local control plane for tests, the demo and
// the drills: one management kube-apiserver and any number of remote
// kube-apiservers, all built from Go modules into bin/ by `make controlplane` and
// driven through controller-runtime's envtest. The remotes share the
// management cluster's etcd, each under its own key prefix, which saves one etcd
// process per remote while keeping every remote its own API server.
package localcluster
