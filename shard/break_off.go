//go:build !drillbreak

package shard

// brokenHandOver is false in every real build; see break_on.go.
const brokenHandOver = false
