package shard

import (
	"crypto/sha256"
	"encoding/hex"

	coordinationv1 "k8s.io/api/coordination/v1"
)

const (
	// MemberLeasePrefix starts the name of every membership Lease.
	MemberLeasePrefix = "clustershard-member-"
	// ClusterLeasePrefix starts the name of every cluster Lease.
	ClusterLeasePrefix = "clustershard-cluster-"
	// ClusterAnnotation on a cluster Lease holds the full cluster name.
	ClusterAnnotation = "clustershard.io/cluster"
	// LeavingAnnotation on a membership Lease marks a replica that is handing
	// over its clusters before it exits: alive, but out of the ring.
	LeavingAnnotation = "clustershard.io/leaving"
	// AbandonedAnnotation on a cluster Lease marks one whose holder could not
	// confirm its manager stopped: others take it once they have seen it
	// unchanged for a lease duration.
	AbandonedAnnotation = "clustershard.io/abandoned"
	// ReleasedByAnnotation on a cluster Lease names the replica that
	// released it (holder cleared). A Lease cleared by anyone else, or
	// deleted, while a live replica held it is free only after a lease
	// duration unchanged: that replica may still run the cluster.
	ReleasedByAnnotation = "clustershard.io/released-by"
	// IncarnationAnnotation on a held cluster Lease names the holder's
	// incarnation; spec.holderIdentity keeps the bare replica name, which
	// replicas of versions without incarnations read as a live holder.
	IncarnationAnnotation = "clustershard.io/holder-incarnation"
	// RoleLabel tells membership and cluster Leases apart.
	RoleLabel = "clustershard.io/lease-role"
	// LeaseDurationLabel and RenewDeadlineLabel on a membership Lease
	// publish its holder's timings (Go durations, "15s"), written with every
	// renewal: an observer judges the holder expired only after the longer
	// of its own and the holder's lease duration, so replicas started with
	// different timing flags never overlap.
	LeaseDurationLabel = "clustershard.io/lease-duration"
	// RenewDeadlineLabel publishes the renew deadline; see LeaseDurationLabel.
	RenewDeadlineLabel = "clustershard.io/renew-deadline"

	maxLeaseName = 253
	// hashChars of a SHA-256 (160 bits) end a cut Lease name.
	hashChars = 40
)

// MemberLeaseName is the name of the membership Lease of a replica.
func MemberLeaseName(identity string) string { return MemberLeasePrefix + identity }

// ClusterLeaseName is the name of the Lease of a cluster. It is the prefix
// and the cluster name when that is at most 252 characters long (every
// RemoteCluster: their names are at most 63); a longer one is cut to
// exactly 253 characters, ending with "h" and 160 bits of the SHA-256 of the
// full name. The two forms never meet (they differ in length), and two cut
// names share a Lease only if their hashes collide.
func ClusterLeaseName(cluster string) string {
	name := ClusterLeasePrefix + cluster
	if len(name) < maxLeaseName {
		return name
	}
	sum := sha256.Sum256([]byte(cluster))
	// "h" keeps the name valid after a cut that ends in "." or "-".
	return name[:maxLeaseName-hashChars-1] + "h" + hex.EncodeToString(sum[:])[:hashChars]
}

// LeaseCluster is the cluster a cluster Lease stands for: the name in its
// ClusterAnnotation when that name maps to this Lease, and "" otherwise (a
// Lease made by hand, or one whose annotation was edited), which no cluster
// may be judged held by.
func LeaseCluster(l *coordinationv1.Lease) string {
	if l == nil {
		return ""
	}
	c := l.Annotations[ClusterAnnotation]
	if c == "" || ClusterLeaseName(c) != l.Name {
		return ""
	}
	return c
}
