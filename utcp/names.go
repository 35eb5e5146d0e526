package utcp

import "strings"

// SanitizeManualName is the reference clients' rule: every character that is
// not an ASCII letter, digit or underscore becomes `_` (per UTF-16 unit, as
// JavaScript counts them).
func SanitizeManualName(name string) string {
	if sanitized(name) {
		return name
	}
	var b strings.Builder
	b.Grow(len(name))
	for _, r := range name {
		switch {
		case r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		case r > 0xFFFF:
			b.WriteString("__")
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// FullToolName prefixes a tool's name with its manual's, unless it already
// starts with `<manual>.`.
func FullToolName(manual, tool string) string {
	if strings.HasPrefix(tool, manual+".") {
		return tool
	}
	return manual + "." + tool
}

// NormalizeToolName is a full tool name with its manual part (before the
// first `.`) sanitised as Register sanitises a manual's name: `my-api.get`
// becomes `my_api.get`, the name the registry knows the tool by. A name
// without a `.` is returned as it is.
func NormalizeToolName(name string) string {
	manual, tool, ok := strings.Cut(name, ".")
	if !ok || sanitized(manual) {
		return name // as it is, without allocating: the usual case
	}
	return SanitizeManualName(manual) + "." + tool
}

// sanitized reports whether SanitizeManualName would leave name as it is.
func sanitized(name string) bool {
	for i := 0; i < len(name); i++ {
		if c := name[i]; !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
