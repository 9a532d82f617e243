// Package remote holds what every part of clustershard needs to talk to a
// remote cluster, and nothing that decides anything: it turns the
// kubeconfig stored in a RemoteCluster's Secret into a rest.Config safely
// (it refuses credentials that would run commands inside the controller,
// exec and auth-provider plugins, unless allowed, never puts secret
// material into errors, and hashes the content so a rotation can be
// detected); it names the process and cluster of every remote request in
// its User-Agent; and it probes a remote API server's /version.
package remote
