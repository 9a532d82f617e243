package helmrelease

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

// Any spec.install.helm values: never a panic; accepted values are an
// object whose hash is stable through a JSON round trip (what a release
// stores and gives back), so an unchanged spec never looks changed.
func FuzzParseValues(f *testing.F) {
	for _, s := range []string{
		`{}`, `null`, ``, `{"a":1,"b":{"c":[1,2,{"d":null}]}}`, `[1,2]`, `"str"`, `{"a":1e400}`,
		`{"a":1.0000000000000002,"b":18446744073709551615}`, `{"\u00e9":"\ud800"}`, `{"a":`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		vals, err := ParseValues(&runtime.RawExtension{Raw: raw})
		if err != nil {
			return
		}
		if vals == nil {
			t.Fatal("accepted values are nil")
		}
		h := HashValues(vals)
		data, err := json.Marshal(vals)
		if err != nil {
			t.Fatalf("accepted values do not encode: %v", err)
		}
		again, err := ParseValues(&runtime.RawExtension{Raw: data})
		if err != nil {
			t.Fatalf("values %s do not parse again: %v", data, err)
		}
		if h2 := HashValues(again); h2 != h {
			t.Fatalf("hash %s, %s after a round trip of %s", h, h2, data)
		}
	})
}
