//go:build drillbreak

package shard

// brokenHandOver breaks rule 3 on purpose in binaries built with the
// drillbreak tag: the Lease is released a second before the replica gives up
// its authority and stops the manager. It exists only to prove that the
// drill's invariant checker catches double ownership.
const brokenHandOver = true
