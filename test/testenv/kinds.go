package testenv

import (
	"testing"

	"github.com/clustershard/clustershard/internal/remotecopy"
	"github.com/clustershard/clustershard/tools/fleet"
)

// The example kinds of the test CRDs, as --replicate-kind takes them.
const (
	// ExampleKind has a status subresource and full conditions.
	ExampleKind = fleet.ExampleKind
	// StrictKind is shaped like Chaos Mesh's chaos kinds: no status
	// subresource, status.experiment required, minimal conditions.
	StrictKind = "StrictChaos.v1alpha1.example.clustershard.io/strictchaos"
)

// MustKind parses a --replicate-kind string and panics on a bad one: for
// the kinds tests declare.
func MustKind(s string) remotecopy.Kind {
	k, err := remotecopy.ParseKind(s)
	if err != nil {
		panic(err)
	}
	return k
}

// Learned returns k with the shape its CRD in the management cluster gives
// it, as a replica learns it at start-up.
func (e *Env) Learned(t testing.TB, k remotecopy.Kind) remotecopy.Kind {
	t.Helper()
	shape, err := remotecopy.LearnShape(t.Context(), e.Client, k)
	if err != nil {
		t.Fatal(err)
	}
	return k.WithShape(shape)
}
