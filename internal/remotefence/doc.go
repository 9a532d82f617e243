// Package remotefence makes a remote API server enforce who may write for
// a cluster, with a fencing token it checks on receipt.
//
// The replicas' own fence (registry.FencedConfig) stops a write from being
// sent once authority has ended and bounds it by a server-side timeout, but
// a timeout counts from when the server receives the request. A write sent
// in time and held on the way (a proxy or load balancer that buffers, a
// network that stalls and heals) can still land after its writer lost the
// cluster and another replica took it. Only the remote server can refuse
// it, so it is told the current ownership epoch:
//
//   - a ValidatingAdmissionPolicy (Policy) refuses every create, update
//     and delete that carries a cluster and an epoch (the user extras
//     ClusterKey and ExtraKey, sent by impersonating the kubeconfig's own
//     user) lower than that cluster's epoch in a ConfigMap
//     (Namespace/ConfigMapName, one key per RemoteCluster: several
//     RemoteClusters, owned by different replicas, may name one API server);
//   - each time a replica starts working on a cluster (Raise), before its
//     first write of that epoch, it raises the cluster's epoch (to one more
//     than the current one, and never below the clock in milliseconds) by a
//     write that conflicts only with another raise of the same cluster, and
//     checks with a dry run that the server already refuses the previous
//     epoch;
//   - every request of that epoch carries the new epoch (Epoch.Config).
//
// So a write of an earlier epoch that arrives after the next owner raised
// the epoch is refused by the remote API server before anything is stored,
// however late it arrives. Requests without the extra (other users, and
// clusters where the fence is unavailable) are not affected.
package remotefence
