package remotecopy

import (
	"fmt"
	"strings"
)

// UpdateStrategy says how a remote copy takes a change of its source's spec.
type UpdateStrategy string

const (
	// UpdateApply writes every change with server-side apply.
	UpdateApply UpdateStrategy = "Apply"
	// UpdateRecreate deletes a copy whose spec must change, waits until the
	// remote's finalizers let it go, and creates it anew: for kinds whose
	// remote webhook refuses spec changes, like Chaos Mesh's.
	UpdateRecreate UpdateStrategy = "Recreate"
	// UpdateAuto applies, and re-creates the copy when an admission webhook
	// of the remote denies the update of an existing copy whose spec changed.
	// The default.
	UpdateAuto UpdateStrategy = "Auto"
)

// ParseUpdateStrategy accepts Apply, Recreate or Auto, in any case.
func ParseUpdateStrategy(s string) (UpdateStrategy, error) {
	for _, u := range []UpdateStrategy{UpdateApply, UpdateRecreate, UpdateAuto} {
		if strings.EqualFold(s, string(u)) {
			return u, nil
		}
	}
	return "", fmt.Errorf("update strategy %q: want Apply, Recreate or Auto", s)
}

// UpdateStrategy returns the kind's strategy, UpdateAuto when none was set.
func (k Kind) UpdateStrategy() UpdateStrategy {
	if k.Update == "" {
		return UpdateAuto
	}
	return k.Update
}
