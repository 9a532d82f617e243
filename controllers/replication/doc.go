// Package replication holds what the replicate (management side) and monitor
// (remote side) controllers share: the replicated kinds, the remote-cluster
// field, the labels that mark a remote copy, how a copy is derived from its
// source, and the predicate local controllers use to skip objects bound for a
// remote cluster.
package replication
