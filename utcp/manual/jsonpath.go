package manual

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

func checkKeys(obj map[string]any, allowed []string, path string) error {
	var unknown []string
	for k := range obj {
		if !slices.Contains(allowed, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	return &Error{Path: JoinPath(path, unknown[0]), Msg: "unknown key (allowed: " + strings.Join(allowed, ", ") + ")"}
}

func optString(obj map[string]any, key, path string) (string, bool, error) {
	v, ok := obj[key]
	if !ok || v == nil {
		return "", false, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", false, &Error{Path: JoinPath(path, key), Msg: "must be a string, got " + JSONKind(v)}
	}
	return s, true, nil
}

func optStrings(obj map[string]any, key, path string) ([]string, error) {
	v, ok := obj[key]
	if !ok || v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, &Error{Path: JoinPath(path, key), Msg: "must be an array of strings, got " + JSONKind(v)}
	}
	out := make([]string, 0, len(list))
	for i, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil, &Error{Path: fmt.Sprintf("%s[%d]", JoinPath(path, key), i), Msg: "must be a string, got " + JSONKind(e)}
		}
		out = append(out, s)
	}
	return out, nil
}

// JSONKind names the JSON type of a decoded value ("string", "number",
// "object", …) for an error that says what a field holds.
func JSONKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number, float64, float32, int, int64, int32, uint, uint64, uint32:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// JoinPath appends key to a JSON path as the registry's errors write
// paths, quoting keys that are not plain identifiers:
// tools[0].headers["X-Api-Key"].
func JoinPath(path, key string) string {
	if key == "" {
		return path
	}
	if strings.HasPrefix(key, "[") || strings.HasPrefix(key, ".") {
		return path + key
	}
	plain := utf8.ValidString(key)
	for _, r := range key {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			plain = false
			break
		}
	}
	if plain && strings.Contains(key, ".") {
		plain = false
	}
	if !plain {
		if path == "" {
			return "[" + strconv.Quote(key) + "]"
		}
		return path + "[" + strconv.Quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}
