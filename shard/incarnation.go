package shard

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
)

// incarnationSeparator joins a replica's name and its incarnation in a
// holder identity. Replica names are DNS labels, so it never occurs in one.
const incarnationSeparator = "@"

// HolderIdentity is what one process of a replica writes as holder of its
// membership and cluster Leases: its name and its incarnation,
// "name@incarnation". Two processes started with one name (a force-deleted
// pod whose node heals, a --replica-id typed twice) are two holders: each
// sees the other's Leases as foreign, and the second joins only once the
// first's membership Lease has expired or was released.
func HolderIdentity(name, incarnation string) string {
	return name + incarnationSeparator + incarnation
}

// HolderName returns the replica name of a holder identity: the ring member
// and the membership Lease it stands for. A holder written by a version
// without incarnations is its own name.
func HolderName(holder string) string {
	name, _, _ := strings.Cut(holder, incarnationSeparator)
	return name
}

// NewIncarnation returns a random incarnation: 10 hex characters from
// crypto/rand, for a process that has no pod UID to use.
func NewIncarnation() string {
	b := make([]byte, 5)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // never fails on supported platforms
	}
	return hex.EncodeToString(b)
}

// ValidateIncarnation checks an incarnation given by the caller: at most 64
// characters of letters, digits, "-" and "_" (a pod UID fits).
func ValidateIncarnation(s string) error {
	if len(s) > 64 {
		return fmt.Errorf("incarnation %q is longer than 64 characters", s)
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_'
		if !ok {
			return fmt.Errorf("incarnation %q may hold only letters, digits, '-' and '_'", s)
		}
	}
	return nil
}
