package utcp

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// VariableLoader is a source of variables between the configured ones and
// the environment (the SDK's `load_variables_from`). Lookup gets the
// namespaced key.
type VariableLoader interface {
	Lookup(key string) (string, bool)
}

// VariableLoaderFunc adapts a function to VariableLoader.
type VariableLoaderFunc func(key string) (string, bool)

// Lookup calls f.
func (f VariableLoaderFunc) Lookup(key string) (string, bool) { return f(key) }

// DotEnv holds the variables of a .env file.
type DotEnv map[string]string

// Lookup returns a non-empty value of key.
func (d DotEnv) Lookup(key string) (string, bool) {
	v, ok := d[key]
	return v, ok && v != ""
}

// MaxDotEnvBytes bounds a .env file.
const MaxDotEnvBytes = 1 << 20

// LoadDotEnv reads a .env file (see ParseDotEnv).
func LoadDotEnv(path string) (DotEnv, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseDotEnv(io.LimitReader(f, MaxDotEnvBytes+1))
}

// ParseDotEnv reads `KEY=value` lines: `export ` before the key is allowed,
// `#` starts a comment (outside quotes), values may be 'single quoted'
// (taken literally) or "double quoted" (with \n, \t, \", \\ escapes and
// spanning lines). A line without `=` is an error naming its number.
func ParseDotEnv(r io.Reader) (DotEnv, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if len(data) > MaxDotEnvBytes {
		return nil, fmt.Errorf(".env: over %d bytes", MaxDotEnvBytes)
	}
	out := DotEnv{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), MaxDotEnvBytes)
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := strings.TrimSpace(strings.TrimSuffix(sc.Text(), "\r"))
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		key, rest, ok := strings.Cut(line, "=")
		key = strings.TrimSpace(key)
		if !ok || !validVarName(key) {
			return nil, fmt.Errorf(".env line %d: want KEY=value", lineNo)
		}
		rest = strings.TrimLeft(rest, " \t")
		var val string
		switch {
		case strings.HasPrefix(rest, `"`):
			body := rest[1:]
			for !closedDoubleQuote(body) {
				if !sc.Scan() {
					return nil, fmt.Errorf(".env line %d: unterminated double quote", lineNo)
				}
				lineNo++
				body += "\n" + strings.TrimSuffix(sc.Text(), "\r")
			}
			val = unescapeDouble(body[:closingQuote(body)])
		case strings.HasPrefix(rest, "'"):
			end := strings.IndexByte(rest[1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf(".env line %d: unterminated single quote", lineNo)
			}
			val = rest[1 : 1+end]
		default:
			if i := strings.Index(rest, " #"); i >= 0 {
				rest = rest[:i]
			}
			val = strings.TrimSpace(rest)
		}
		out[key] = val
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

func closedDoubleQuote(s string) bool { return closingQuote(s) >= 0 }

func closingQuote(s string) int {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

func unescapeDouble(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

func validVarName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// varPattern is the SDK's: ${NAME} or $NAME, NAME of letters, digits and _.
var varPattern = regexp.MustCompile(`\$\{([a-zA-Z0-9_]+)\}|\$([a-zA-Z0-9_]+)`)

// NamespacedKey is the key a variable is looked up under for a manual: the
// manual's name with each `_` doubled, then `_`, then the variable
// (`demo_shop` + `API_TOKEN` → `demo__shop_API_TOKEN`).
func NamespacedKey(manual, name string) string {
	if manual == "" {
		return name
	}
	return strings.ReplaceAll(manual, "_", "__") + "_" + name
}

// variables resolves ${VAR} references: configured variables, then loaders
// in order, then the environment, each under the namespaced key. There is no
// fallback to the bare name.
type variables struct {
	configured map[string]string
	loaders    []VariableLoader
	lookupEnv  func(string) (string, bool)
}

func (v *variables) lookup(key string) (string, bool) {
	if val, ok := v.configured[key]; ok {
		return val, true
	}
	for _, l := range v.loaders {
		if val, ok := l.Lookup(key); ok && val != "" {
			return val, true
		}
	}
	if v.lookupEnv != nil {
		if val, ok := v.lookupEnv(key); ok && val != "" {
			return val, true
		}
	}
	return "", false
}

// substitute returns a copy of a decoded JSON value with every variable in
// its strings replaced; strings containing `$ref` are left alone.
func (v *variables) substitute(x any, manual string) (any, error) {
	switch t := x.(type) {
	case string:
		return v.substituteString(t, manual)
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			r, err := v.substitute(e, manual)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			r, err := v.substitute(e, manual)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	default:
		return x, nil
	}
}

func (v *variables) substituteString(s, manual string) (string, error) {
	if !strings.Contains(s, "$") || strings.Contains(s, "$ref") {
		return s, nil
	}
	var firstErr error
	out := varPattern.ReplaceAllStringFunc(s, func(m string) string {
		if firstErr != nil {
			return m
		}
		name := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(m, "${"), "$"), "}")
		key := NamespacedKey(manual, name)
		val, ok := v.lookup(key)
		if !ok {
			firstErr = &VariableNotFoundError{Key: key}
			return m
		}
		return val
	})
	if firstErr != nil {
		return "", firstErr
	}
	return out, nil
}

// containsVariables reports whether any string of x has a reference that
// substitute would replace.
func containsVariables(x any) bool {
	switch t := x.(type) {
	case string:
		return !strings.Contains(t, "$ref") && varPattern.MatchString(t)
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
