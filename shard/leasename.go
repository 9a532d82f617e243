package shard

import (
	"crypto/sha256"
	"encoding/hex"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/clustershard/clustershard/api/v1alpha1"
)

const (
	// MemberLeasePrefix starts the name of every membership Lease.
	MemberLeasePrefix = "clustershard-member-"
	// ClusterLeasePrefix starts the name of every cluster Lease.
	ClusterLeasePrefix = "clustershard-cluster-"

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
// v1alpha1.ClusterAnnotation when that name maps to this Lease, and "" otherwise (a
// Lease made by hand, or one whose annotation was edited), which no cluster
// may be judged held by.
func LeaseCluster(l *coordinationv1.Lease) string {
	if l == nil {
		return ""
	}
	c := l.Annotations[v1alpha1.ClusterAnnotation]
	if c == "" || ClusterLeaseName(c) != l.Name {
		return ""
	}
	return c
}
