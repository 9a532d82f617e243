package helmrelease

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
)

// ParseValues decodes spec values (a JSON object) into Helm's values; nil or
// empty gives an empty map.
func ParseValues(raw *runtime.RawExtension) (map[string]any, error) {
	vals := map[string]any{}
	if raw == nil || len(raw.Raw) == 0 {
		return vals, nil
	}
	if err := json.Unmarshal(raw.Raw, &vals); err != nil {
		return nil, fmt.Errorf("values must be an object: %w", err)
	}
	if vals == nil { // "null"
		vals = map[string]any{}
	}
	return vals, nil
}

// HashValues is a short stable hash of values: equal values (as JSON, keys
// sorted; nil and empty alike) hash equal.
func HashValues(vals map[string]any) string {
	if vals == nil {
		vals = map[string]any{}
	}
	b, err := json.Marshal(vals)
	if err != nil {
		// Values come from JSON or from a release Helm decoded from JSON.
		b = fmt.Appendf(nil, "%v", vals)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
