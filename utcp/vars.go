package utcp

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/exprd/exprd/utcp/manual"
)

// VariableLoader is a source of variables after the configured ones (the
// SDK's `load_variables_from`). Lookup gets the namespaced key. A loader is
// an operator's source: never one a client can write to.
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
//
// As python-dotenv (the reference client's loader) does, `${NAME}` and
// `${NAME:-default}` in an unquoted or double-quoted value are expanded:
// from a key earlier in the file, else from the process environment (the
// operator named it in the file), else the default. A reference with
// none of these is an error naming its line: it would otherwise be sent
// literally. `$NAME` without braces is kept as written.
func ParseDotEnv(r io.Reader) (DotEnv, error) {
	return parseDotEnv(r, os.LookupEnv)
}

func parseDotEnv(r io.Reader, lookupEnv func(string) (string, bool)) (DotEnv, error) {
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
			var err error
			if val, err = expandDotEnv(unescapeDouble(body[:closingQuote(body)]), out, lookupEnv); err != nil {
				return nil, fmt.Errorf(".env line %d: %v", lineNo, err)
			}
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
			var err error
			if val, err = expandDotEnv(strings.TrimSpace(rest), out, lookupEnv); err != nil {
				return nil, fmt.Errorf(".env line %d: %v", lineNo, err)
			}
		}
		out[key] = val
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// dotEnvRef is python-dotenv's expansion: ${NAME} or ${NAME:-default}.
var dotEnvRef = regexp.MustCompile(`\$\{([A-Za-z0-9_]+)(?::-([^}]*))?\}`)

// expandDotEnv expands a value's ${NAME} references (see ParseDotEnv).
func expandDotEnv(val string, earlier DotEnv, lookupEnv func(string) (string, bool)) (string, error) {
	if !strings.Contains(val, "${") {
		return val, nil
	}
	var missing string
	out := dotEnvRef.ReplaceAllStringFunc(val, func(m string) string {
		sub := dotEnvRef.FindStringSubmatch(m)
		name := sub[1]
		if v, ok := earlier[name]; ok {
			return v
		}
		if v, ok := lookupEnv(name); ok {
			return v
		}
		if strings.Contains(m, ":-") {
			return sub[2]
		}
		if missing == "" {
			missing = name
		}
		return m
	})
	if missing != "" {
		return "", fmt.Errorf("${%s} names no earlier key and no environment variable (give it a value, or a default: ${%s:-value})", missing, missing)
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

// NamespacedKey is the key a variable is looked up under for a manual: the
// manual's name with each `_` doubled, then `_`, then the variable
// (`demo_shop` + `API_TOKEN` → `demo__shop_API_TOKEN`).
func NamespacedKey(manual, name string) string {
	if manual == "" {
		return name
	}
	return strings.ReplaceAll(manual, "_", "__") + "_" + name
}

// ParseNamespacedKey splits a namespaced key into the manual and the
// variable it binds: `__` is an `_` of the manual's name, the first single
// `_` ends it (`demo__shop_API_TOKEN` → `demo_shop`, `API_TOKEN`). ok is
// false for a key with no single `_` or nothing on either side of it.
//
// Two pairs can share a key (`a` + `_b_C` and `a_b` + `C` are both
// `a__b_C`); a key binds only the pair this returns, so a manual can
// never reach another manual's variable by choosing its variable names.
func ParseNamespacedKey(key string) (manual, name string, ok bool) {
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		if key[i] != '_' {
			b.WriteByte(key[i])
			continue
		}
		if i+1 < len(key) && key[i+1] == '_' {
			b.WriteByte('_')
			i++
			continue
		}
		manual, name = b.String(), key[i+1:]
		if manual == "" || name == "" {
			return "", "", false
		}
		return manual, name, true
	}
	return "", "", false
}

// variables resolves ${VAR} references from the operator's sources only:
// configured variables, then loaders in order (.env files, a secrets
// directory), then the environment variables the operator listed, each
// under the namespaced key of the (manual, variable) pair. There is no
// fallback to the bare name, and the process environment is read only for
// the keys listed (WithEnv).
type variables struct {
	configured map[string]string
	loaders    []VariableLoader

	secrets sync.Map // manual → *Secrets: what its provider's messages may not show
}

// lookup returns the value bound to a manual's variable, and makes it one
// of the manual's Secrets.
func (v *variables) lookup(manual, name string) (string, bool) {
	key := NamespacedKey(manual, name)
	if m, n, ok := ParseNamespacedKey(key); !ok || m != manual || n != name {
		return "", false // the key binds another pair
	}
	val, ok := v.configured[key]
	if !ok {
		for _, l := range v.loaders {
			if lv, found := l.Lookup(key); found && lv != "" {
				val, ok = lv, true
				break
			}
		}
	}
	if ok {
		v.secretsOf(manual).add("", val)
	}
	return val, ok
}

// secretsOf is a manual's Secrets, made the first time the manual's name
// is asked for with every value the operator's sources bind to it (the
// configured variables and the loaders that list their keys, as a .env
// file, a secrets directory and the listed environment keys do); a value
// a loader gives only when asked is added when it is (lookup).
func (v *variables) secretsOf(manual string) *Secrets {
	if s, ok := v.secrets.Load(manual); ok {
		return s.(*Secrets)
	}
	s := &Secrets{}
	bound := func(key string) bool {
		m, _, ok := ParseNamespacedKey(key)
		return ok && m == manual
	}
	var vals []string
	for k, val := range v.configured {
		if bound(k) {
			vals = append(vals, val)
		}
	}
	for _, l := range v.loaders {
		if d, ok := l.(DotEnv); ok {
			for k, val := range d {
				if bound(k) {
					vals = append(vals, val)
				}
			}
		}
	}
	s.add("", vals...)
	got, _ := v.secrets.LoadOrStore(manual, s)
	return got.(*Secrets)
}

// substituteTemplate is substitute of a call template's fields: its url
// is a URL template (substituteURL).
func (v *variables) substituteTemplate(fields map[string]any, manualName string) (map[string]any, error) {
	out := make(map[string]any, len(fields))
	for k, e := range fields {
		var r any
		var err error
		if s, isStr := e.(string); isStr && k == "url" {
			r, err = v.substituteURL(s, manualName)
		} else {
			r, err = v.substitute(e, manualName)
		}
		if err != nil {
			return nil, err
		}
		out[k] = r
	}
	return out, nil
}

// substituteURL fills a URL template's variables so that a value is never
// read as the template's syntax: a { or } of a value is written %7B or
// %7D (the same URL once decoded), so that the {name} path parameters of
// the result are the template's own, as written. A variable inside a
// path parameter's braces is refused (the registration refused it first:
// manual.PathParameterVariable), without the value.
func (v *variables) substituteURL(s, manualName string) (string, error) {
	if !manual.HasVariables(s) {
		return s, nil
	}
	if param, ok := manual.PathParameterVariable(s); ok {
		return "", &manual.Error{Manual: manualName, Path: "tool_call_template.url", Msg: pathParameterVariableMsg(param)}
	}
	return manual.ReplaceVariables(s, func(name string) (string, error) {
		val, err := v.value(manualName, name)
		return urlBraces.Replace(val), err
	})
}

// urlBraces writes a value's braces as a URL's escapes of them.
var urlBraces = strings.NewReplacer("{", "%7B", "}", "%7D")

func pathParameterVariableMsg(param string) string {
	return fmt.Sprintf("the path parameter %s holds a variable: a path parameter is named by the template and filled from the call's argument of that name, never from a variable", param)
}

// substitute returns a copy of a decoded JSON value with every variable in
// its strings replaced; strings containing `$ref` are left alone.
func (v *variables) substitute(x any, manualName string) (any, error) {
	switch t := x.(type) {
	case string:
		if !strings.Contains(t, "$") {
			return t, nil // without making the closure below
		}
		return manual.ReplaceVariables(t, func(name string) (string, error) { return v.value(manualName, name) })
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			r, err := v.substitute(e, manualName)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			r, err := v.substitute(e, manualName)
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

// value is lookup's value, or the *VariableNotFoundError of a variable
// with none.
func (v *variables) value(manualName, name string) (string, error) {
	val, ok := v.lookup(manualName, name)
	if !ok {
		return "", &VariableNotFoundError{Key: NamespacedKey(manualName, name), Manual: manualName, Name: name}
	}
	return val, nil
}

// checkBound returns a *VariableNotFoundError, with Path set to where it
// appears under path, for the first variable of x (in key order) that has
// no value bound to the manual: a template is refused when it is
// registered, not when it is first called.
func (v *variables) checkBound(x any, manualName, path string) error {
	switch t := x.(type) {
	case string:
		for _, name := range manual.Variables(t) {
			if _, ok := v.lookup(manualName, name); !ok {
				return &VariableNotFoundError{Key: NamespacedKey(manualName, name), Manual: manualName, Name: name, Path: path}
			}
		}
	case []any:
		for i, e := range t {
			if err := v.checkBound(e, manualName, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			if err := v.checkBound(t[k], manualName, manual.JoinPath(path, k)); err != nil {
				return err
			}
		}
	}
	return nil
}

// MaxSecretFiles and MaxSecretBytes bound a secrets directory
// (WithSecretDir): the files read, and the bytes of each.
const (
	MaxSecretFiles = 1000
	MaxSecretBytes = 64 << 10
)

// loadSecretDir reads a directory of files, each a variable: the file's
// name is the namespaced key, its content the value (one trailing newline
// dropped), as Kubernetes mounts a Secret. Names starting with "." (the
// mount's own `..data` links) and directories are skipped.
func loadSecretDir(dir string) (DotEnv, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := DotEnv{}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		if !validVarName(name) {
			return nil, fmt.Errorf("%s: %q is not a variable's key (letters, digits and _ only)", dir, name)
		}
		if len(out) == MaxSecretFiles {
			return nil, fmt.Errorf("%s: more than %d files", dir, MaxSecretFiles)
		}
		path := filepath.Join(dir, name)
		fi, err := os.Stat(path) // follows the mount's symlinks
		if err != nil {
			return nil, err
		}
		if fi.IsDir() {
			continue
		}
		if fi.Size() > MaxSecretBytes {
			return nil, fmt.Errorf("%s: over %d bytes", path, MaxSecretBytes)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		v := strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
		out[name] = v
	}
	return out, nil
}
