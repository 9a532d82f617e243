//go:build !drillbreak

package remotefence

// carryNoEpoch is false in every real build; see break_on.go.
const carryNoEpoch = false
