package manual

import (
	"bytes"
	"regexp"
	"strings"
)

// varPattern is the SDK's: ${NAME} or $NAME, NAME of letters, digits and _.
var varPattern = regexp.MustCompile(`\$\{([a-zA-Z0-9_]+)\}|\$([a-zA-Z0-9_]+)`)

func varName(ref string) string {
	return strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(ref, "${"), "$"), "}")
}

// HasVariables reports whether s refers to a variable that
// ReplaceVariables replaces: a ${NAME} or $NAME in a string that does not
// hold `$ref` (a JSON Schema's reference, left alone).
func HasVariables(s string) bool {
	return strings.Contains(s, "$") && !strings.Contains(s, "$ref") && varPattern.MatchString(s)
}

// Variables are the names of the variables s refers to, in order: none
// when s holds `$ref`.
func Variables(s string) []string {
	if strings.Contains(s, "$ref") {
		return nil
	}
	refs := varPattern.FindAllString(s, -1)
	names := make([]string, len(refs))
	for i, m := range refs {
		names[i] = varName(m)
	}
	return names
}

// ReplaceVariables is s with each variable it refers to (HasVariables)
// replaced by value(name); the first error of value is returned instead.
// A string without `$`, or holding `$ref`, is s itself.
func ReplaceVariables(s string, value func(name string) (string, error)) (string, error) {
	if !strings.Contains(s, "$") || strings.Contains(s, "$ref") {
		return s, nil
	}
	var firstErr error
	out := varPattern.ReplaceAllStringFunc(s, func(m string) string {
		if firstErr != nil {
			return m
		}
		val, err := value(varName(m))
		if err != nil {
			firstErr = err
			return m
		}
		return val
	})
	if firstErr != nil {
		return "", firstErr
	}
	return out, nil
}

// pathParamGroup is a {name} path parameter of a URL template, as the
// http transport reads one.
var pathParamGroup = regexp.MustCompile(`\{[^{}]+\}`)

// PathParameterVariable returns the first {name} path parameter of a URL
// template, as written, whose name holds a variable (`{${ID}}`,
// `{a$ID}`); ok is false when none does. A path parameter is named by the
// template and filled from the call's argument of that name: never from a
// variable, whose value would become the parameter's name (and be quoted
// back to the caller when the argument is missing).
func PathParameterVariable(url string) (param string, ok bool) {
	if !strings.Contains(url, "$") {
		return "", false
	}
	// The template's braces, with each variable replaced by a byte a
	// name cannot hold: ${ID}'s own braces are the variable's, not a
	// parameter's. at[i] is where skeleton[i] was in url.
	locs := varPattern.FindAllStringIndex(url, -1)
	if len(locs) == 0 {
		return "", false
	}
	var skeleton []byte
	var at []int
	next := 0
	for _, l := range locs {
		for i := next; i < l[0]; i++ {
			skeleton, at = append(skeleton, url[i]), append(at, i)
		}
		skeleton, at = append(skeleton, 0), append(at, l[0])
		next = l[1]
	}
	for i := next; i < len(url); i++ {
		skeleton, at = append(skeleton, url[i]), append(at, i)
	}
	at = append(at, len(url))
	for _, g := range pathParamGroup.FindAllIndex(skeleton, -1) {
		if bytes.IndexByte(skeleton[g[0]:g[1]], 0) >= 0 {
			return url[at[g[0]] : at[g[1]-1]+1], true
		}
	}
	return "", false
}

// containsVariables reports whether any string of x has a reference that
// ReplaceVariables would replace.
func containsVariables(x any) bool {
	switch t := x.(type) {
	case string:
		return HasVariables(t)
	case []any:
		for _, e := range t {
			if containsVariables(e) {
				return true
			}
		}
	case map[string]any:
		for _, e := range t {
			if containsVariables(e) {
				return true
			}
		}
	}
	return false
}
