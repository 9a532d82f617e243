package shard

import (
	"fmt"
	"strings"

	"github.com/cespare/xxhash/v2"
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
	// RoleLabel tells membership and cluster Leases apart.
	RoleLabel = "clustershard.io/lease-role"

	maxLeaseName = 253
)

// MemberLeaseName is the name of the membership Lease of a replica.
func MemberLeaseName(identity string) string { return MemberLeasePrefix + identity }

// ClusterLeaseName is the name of the Lease of a RemoteCluster. Names that
// would exceed the Lease name limit are cut and suffixed with a hash of the
// full name, so they stay unique.
func ClusterLeaseName(cluster string) string {
	name := ClusterLeasePrefix + cluster
	if len(name) <= maxLeaseName {
		return name
	}
	sum := fmt.Sprintf("%016x", xxhash.Sum64String(cluster))
	return strings.TrimRight(name[:maxLeaseName-len(sum)-1], ".-") + "-" + sum
}
