package vars

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/exprd/exprd/utcp/manual"
)

// ErrNotFound: a ${VAR} of a call template has no value (NotFoundError).
var ErrNotFound = errors.New("utcp: variable not found")

// NotFoundError is a ${VAR} with no value bound to its manual in the
// operator's sources. Registration refuses it (Path says where it
// appears in the manual); a call never sends it.
type NotFoundError struct {
	Key    string // the namespaced key the operator binds it under
	Manual string
	Name   string // the variable as the template writes it
	Path   string // where it appears (`tools[0].tool_call_template.url`), when known
}

func (e *NotFoundError) Error() string {
	var b strings.Builder
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	fmt.Fprintf(&b, "variable %q has no value bound to manual %q (the operator binds it as %q; an empty value counts as none)", e.Name, e.Manual, e.Key)
	return b.String()
}

// Is reports whether target is ErrNotFound.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

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

// IsKey reports whether key is a namespaced key of a (manual, variable)
// pair (ParseNamespacedKey) of letters, digits and _ only.
func IsKey(key string) bool {
	_, _, ok := ParseNamespacedKey(key)
	return ok && validVarName(key)
}

// Resolver resolves ${VAR} references from the operator's sources only:
// configured variables, then loaders in order (.env files, a secrets
// directory), then the environment variables the operator listed, each
// under the namespaced key of the (manual, variable) pair. There is no
// fallback to the bare name, and the process environment is read only for
// the keys listed (utcp.WithEnv).
type Resolver struct {
	configured map[string]string
	loaders    []Loader

	secrets sync.Map // manual → *Secrets: what its provider's messages may not show
}

// NewResolver resolves variables from configured (namespaced key →
// value), then from each of loaders in order.
func NewResolver(configured map[string]string, loaders []Loader) *Resolver {
	return &Resolver{configured: configured, loaders: loaders}
}

// lookup returns the value bound to a manual's variable, and makes it one
// of the manual's Secrets.
func (v *Resolver) lookup(manualName, name string) (string, bool) {
	key := NamespacedKey(manualName, name)
	if m, n, ok := ParseNamespacedKey(key); !ok || m != manualName || n != name {
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
		v.SecretsOf(manualName).Add("", val)
	}
	return val, ok
}

// SecretsOf is a manual's Secrets, made the first time the manual's name
// is asked for with every value the operator's sources bind to it (the
// configured variables and the loaders that list their keys, as a .env
// file, a secrets directory and the listed environment keys do); a value
// a loader gives only when asked is added when it is (lookup).
func (v *Resolver) SecretsOf(manualName string) *Secrets {
	if s, ok := v.secrets.Load(manualName); ok {
		return s.(*Secrets)
	}
	s := &Secrets{}
	bound := func(key string) bool {
		m, _, ok := ParseNamespacedKey(key)
		return ok && m == manualName
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
	s.Add("", vals...)
	got, _ := v.secrets.LoadOrStore(manualName, s)
	return got.(*Secrets)
}

// SubstituteTemplate returns a copy of a call template's fields with each
// variable replaced by its value bound to the manual (a *NotFoundError for
// one with none): strings holding `$ref` are left alone, and the url is a
// URL template (substituteURL).
func (v *Resolver) SubstituteTemplate(fields map[string]any, manualName string) (map[string]any, error) {
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
func (v *Resolver) substituteURL(s, manualName string) (string, error) {
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
func (v *Resolver) substitute(x any, manualName string) (any, error) {
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

// value is lookup's value, or the *NotFoundError of a variable
// with none.
func (v *Resolver) value(manualName, name string) (string, error) {
	val, ok := v.lookup(manualName, name)
	if !ok {
		return "", &NotFoundError{Key: NamespacedKey(manualName, name), Manual: manualName, Name: name}
	}
	return val, nil
}

// CheckBound returns a *NotFoundError, with Path set to where it
// appears under path, for the first variable of x (in key order) that has
// no value bound to the manual: a template is refused when it is
// registered, not when it is first called.
func (v *Resolver) CheckBound(x any, manualName, path string) error {
	switch t := x.(type) {
	case string:
		for _, name := range manual.Variables(t) {
			if _, ok := v.lookup(manualName, name); !ok {
				return &NotFoundError{Key: NamespacedKey(manualName, name), Manual: manualName, Name: name, Path: path}
			}
		}
	case []any:
		for i, e := range t {
			if err := v.CheckBound(e, manualName, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			if err := v.CheckBound(t[k], manualName, manual.JoinPath(path, k)); err != nil {
				return err
			}
		}
	}
	return nil
}
