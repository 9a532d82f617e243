//go:build drillbreak

package remotefence

// carryNoEpoch breaks the fence on purpose in binaries built with the
// drillbreak tag: a remote manager's writes carry no epoch, so the remote
// API server cannot refuse those of an earlier owner. Together with the
// shard's broken hand-over it lets a double ownership reach the remote
// clusters, to prove that the drill's checker sees it in their audit logs.
const carryNoEpoch = true
