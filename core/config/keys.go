package config

import (
	"fmt"
	"maps"
	"strconv"
)

// stringKeys returns v, a value decoded from YAML, with every mapping's
// keys as strings, as Kubernetes reads YAML (sigs.k8s.io/yaml turns
// `8080:` into the JSON key "8080"). A YAML decoder gives a mapping
// with a non-string key (PeerAuthentication portLevelMtls written as in
// Istio's documentation, `8080: {mode: DISABLE}`) as map[any]any, which
// JSON cannot encode. v is not altered; parts without such a mapping are
// shared, not copied.
func stringKeys(v any) any {
	out, _ := stringKeysOf(v)
	return out
}

// stringKeysOf is stringKeys, also reporting whether anything changed.
func stringKeysOf(v any) (any, bool) {
	switch t := v.(type) {
	case map[string]any:
		var out map[string]any
		for k, val := range t {
			nv, changed := stringKeysOf(val)
			if !changed {
				continue
			}
			if out == nil {
				out = maps.Clone(t)
			}
			out[k] = nv
		}
		if out == nil {
			return t, false
		}
		return out, true
	case map[any]any:
		out := make(map[string]any, len(t))
		for k, val := range t {
			nv, _ := stringKeysOf(val)
			out[keyString(k)] = nv
		}
		return out, true
	case []any:
		var out []any
		for i, val := range t {
			nv, changed := stringKeysOf(val)
			if !changed {
				continue
			}
			if out == nil {
				out = append([]any(nil), t...)
			}
			out[i] = nv
		}
		if out == nil {
			return t, false
		}
		return out, true
	}
	return v, false
}

// keyString formats a mapping key as sigs.k8s.io/yaml does.
func keyString(k any) string {
	switch t := k.(type) {
	case string:
		return t
	case int:
		return strconv.Itoa(t)
	case int64:
		return strconv.FormatInt(t, 10)
	case uint64:
		return strconv.FormatUint(t, 10)
	case float64:
		return strconv.FormatFloat(t, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(t)
	case nil:
		return "null"
	}
	return fmt.Sprint(k)
}
