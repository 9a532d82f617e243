package helmrelease

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

func TestRefKindAndValidate(t *testing.T) {
	for _, tc := range []struct {
		ref   Ref
		kind  Kind
		valid bool
	}{
		{Ref{Chart: "/charts/tiny"}, KindLocal, true},
		{Ref{Chart: "charts/tiny.tgz", Version: "1.2.3"}, KindLocal, true},
		{Ref{Chart: "oci://registry.example/charts/tiny", Version: "~1.2"}, KindOCI, true},
		{Ref{Chart: "https://example.com/charts/tiny-1.2.3.tgz"}, KindArchive, true},
		{Ref{Chart: "https://example.com/charts/tiny", Version: ">=1.0.0 <2.0.0"}, KindRepository, true},
		{Ref{Chart: "https://example.com/charts/tiny", Version: "not a version!"}, KindRepository, false},
		{Ref{Chart: "https:///tiny"}, KindRepository, false},
		{Ref{Chart: ""}, KindLocal, false},
	} {
		if got := tc.ref.Kind(); got != tc.kind {
			t.Errorf("%s: kind %s, want %s", tc.ref, got, tc.kind)
		}
		if err := tc.ref.Validate(); (err == nil) != tc.valid {
			t.Errorf("%s: Validate() = %v, want valid=%v", tc.ref, err, tc.valid)
		}
	}
	repoURL, name, err := Ref{Chart: "https://example.com/a/b/tiny"}.repository()
	if err != nil || repoURL != "https://example.com/a/b" || name != "tiny" {
		t.Fatalf("repository() = %q %q %v", repoURL, name, err)
	}
	if !(Ref{Version: "1.2.3"}).Exact() || (Ref{Version: "~1.2"}).Exact() || (Ref{}).Exact() {
		t.Fatal("Exact")
	}
}

func TestValuesParseAndHash(t *testing.T) {
	empty, err := ParseValues(nil)
	if err != nil || len(empty) != 0 {
		t.Fatalf("nil values: %v %v", empty, err)
	}
	a, err := ParseValues(&runtime.RawExtension{Raw: []byte(`{"b":1,"a":{"x":[1,2]}}`)})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := ParseValues(&runtime.RawExtension{Raw: []byte(`{"a":{"x":[1,2]},"b":1}`)})
	c, _ := ParseValues(&runtime.RawExtension{Raw: []byte(`{"a":{"x":[2,1]},"b":1}`)})
	if HashValues(a) != HashValues(b) {
		t.Fatal("key order changed the hash")
	}
	if HashValues(a) == HashValues(c) {
		t.Fatal("different values hash equal")
	}
	if HashValues(nil) != HashValues(map[string]any{}) {
		t.Fatal("nil and empty values hash differently")
	}
	if _, err := ParseValues(&runtime.RawExtension{Raw: []byte(`[1]`)}); err == nil {
		t.Fatal("a list was accepted as values")
	}
}
