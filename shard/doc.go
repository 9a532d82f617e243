// Package shard is the shard coordinator: membership Leases, the
// consistent-hash ring over live members and one Lease per RemoteCluster, so
// that at any instant at most one replica owns (runs a remote manager for, and
// writes to) each remote cluster.
package shard
