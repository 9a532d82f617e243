package remotecopy_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/clustershard/clustershard/internal/remotecopy"
)

// Any --replicate-kind value: never a panic, and an accepted one names a
// kind, version, group, plural and field path the API server could serve,
// so a bad flag fails at start-up with the flag's syntax, not later.
func FuzzParseKind(f *testing.F) {
	for _, s := range []string{
		"ExampleChaos.v1alpha1.example.clustershard.io/examplechaos",
		"PodChaos.v1alpha1.chaos-mesh.org/podchaos:spec.remoteCluster@Recreate",
		"NetworkChaos.v1alpha1.chaos-mesh.org@auto",
		"A.v1.b:x.y.z",
		"Pod Chaos.v1.chaos-mesh.org",
		"X.v1.g/p:spec..x",
		"X.v1.g@Sideways",
		"..",
		":@/",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := remotecopy.ParseKind(s)
		if err != nil {
			if !strings.Contains(err.Error(), "replicated kind") {
				t.Fatalf("error %q does not say what it is about", err)
			}
			return
		}
		if msgs := validation.IsDNS1035Label(strings.ToLower(k.GVK.Kind)); len(msgs) > 0 {
			t.Fatalf("%q accepted with kind %q: %v", s, k.GVK.Kind, msgs)
		}
		if msgs := validation.IsDNS1035Label(k.GVK.Version); len(msgs) > 0 {
			t.Fatalf("%q accepted with version %q: %v", s, k.GVK.Version, msgs)
		}
		if msgs := validation.IsDNS1123Subdomain(k.CRD); len(msgs) > 0 || !strings.HasSuffix(k.CRD, "."+k.GVK.Group) {
			t.Fatalf("%q accepted with CRD name %q: %v", s, k.CRD, msgs)
		}
		if len(k.Field) == 0 {
			t.Fatalf("%q accepted with no field path", s)
		}
		for _, seg := range k.Field {
			if seg == "" || strings.ContainsAny(seg, " \t\n") {
				t.Fatalf("%q accepted with field path %q", s, k.Field)
			}
		}
		switch k.UpdateStrategy() {
		case remotecopy.UpdateApply, remotecopy.UpdateRecreate, remotecopy.UpdateAuto:
		default:
			t.Fatalf("%q accepted with strategy %q", s, k.UpdateStrategy())
		}
	})
}
