package evaluator

import (
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/exprd/exprd/internal/exprbound"
)

// rootPrefix starts every set address: only scopes.root is reachable.
const rootPrefix = "scopes.root"

// Limits of a set address, checked before any step runs
// (guardrail-violation). A write costs time and memory in proportion to
// its address; without them an address of 40 KB of ".a" took a quarter of
// a second outside the time budget and left the state deeper than it can
// be read.
const (
	// MaxPathLength bounds a set address, in bytes.
	MaxPathLength = 1024
	// MaxPathSegments bounds the keys and indexes of a set address after
	// scopes.root.
	MaxPathSegments = 64
)

// refusedKeys are the keys a set address may not name: a JavaScript client
// that mirrors each write by assigning along its path (o[k1][k2] = v) would
// reach an object's prototype through them and change every object of its
// program (prototype pollution).
var refusedKeys = map[string]bool{"__proto__": true, "constructor": true, "prototype": true}

// Path is a parsed set address under scopes.root, such as
// scopes.root.items[3].name or scopes.root["odd key"].
type Path struct {
	text  string
	elems []pathElem
}

type pathElem struct {
	key     string
	index   int // used when isIndex
	isIndex bool
}

func (p Path) String() string { return p.text }

// ParsePath parses a set address. Errors are guardrail-violation.
func ParsePath(s string) (Path, error) {
	rest, ok := strings.CutPrefix(s, rootPrefix)
	if !ok {
		return Path{}, errorf(GuardrailViolation, "set address %q is outside scopes.root: addresses start with %q", s, rootPrefix)
	}
	if rest == "" {
		return Path{}, errorf(GuardrailViolation, "set address %q names scopes.root itself: set a key under it, like scopes.root.selected", s)
	}
	if len(s) > MaxPathLength {
		return Path{}, errorf(GuardrailViolation, "set address %.40q… is %d bytes long, over the limit of %d", s, len(s), MaxPathLength)
	}
	p := Path{text: s}
	for rest != "" {
		if len(p.elems) == MaxPathSegments {
			return Path{}, errorf(GuardrailViolation, "set address %.40q… has more than %d keys and indexes after scopes.root", s, MaxPathSegments)
		}
		start := rest
		var e pathElem
		var err error
		switch rest[0] {
		case '.':
			e.key, rest, err = cutIdent(rest[1:])
		case '[':
			e, rest, err = cutBracket(rest[1:])
		default:
			err = fmt.Errorf("unexpected %q", rest[0])
		}
		if err != nil {
			return Path{}, errorf(GuardrailViolation, "set address %q is malformed at %q: %v", s, start, err)
		}
		if !e.isIndex && refusedKeys[e.key] {
			return Path{}, errorf(GuardrailViolation, "set address %q names the key %q, which is refused: a JavaScript client mirroring the write along its path would change an object prototype (prototype pollution); choose another key", s, e.key)
		}
		p.elems = append(p.elems, e)
	}
	return p, nil
}

func cutIdent(s string) (string, string, error) {
	i := 0
	for i < len(s) && (s[i] == '_' || s[i] == '$' || isLetter(s[i]) || (i > 0 && isDigit(s[i]))) {
		i++
	}
	if i == 0 {
		return "", s, fmt.Errorf("want a name after '.'")
	}
	return s[:i], s[i:], nil
}

func cutBracket(s string) (pathElem, string, error) {
	end := strings.IndexByte(s, ']')
	if strings.HasPrefix(s, `"`) {
		// A JSON string may hold ']': find the closing quote first.
		dec := json.NewDecoder(strings.NewReader(s))
		var key string
		if err := dec.Decode(&key); err != nil {
			return pathElem{}, s, fmt.Errorf("want a JSON string key in [...]")
		}
		n := int(dec.InputOffset())
		if n >= len(s) || s[n] != ']' {
			return pathElem{}, s, fmt.Errorf("want ']' after the key")
		}
		return pathElem{key: key}, s[n+1:], nil
	}
	if end <= 0 {
		return pathElem{}, s, fmt.Errorf("want an index or a quoted key and ']'")
	}
	digits := s[:end]
	if len(digits) > 1 && digits[0] == '0' {
		return pathElem{}, s, fmt.Errorf("index %q has a leading zero", digits)
	}
	for i := 0; i < len(digits); i++ {
		if !isDigit(digits[i]) {
			return pathElem{}, s, fmt.Errorf("index %q is not a non-negative integer", digits)
		}
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n > DefaultMaxArrayLength {
		return pathElem{}, s, fmt.Errorf("index %q is out of range", digits)
	}
	return pathElem{index: n, isIndex: true}, s[end+1:], nil
}

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }

// set returns root with v at p, copying only the maps and slices on the path.
// A missing object on the way is created; an index may be at most the
// array's length (which appends).
func (p Path) set(root map[string]any, v any) (map[string]any, error) {
	out, err := p.setIn(root, 0, v)
	if err != nil {
		return nil, err
	}
	return out.(map[string]any), nil
}

// setIn sets v at p's elements from i on, under node. Only an error names
// where it happened (at), so a write is linear in the address's length.
func (p Path) setIn(node any, i int, v any) (any, error) {
	if i == len(p.elems) {
		return v, nil
	}
	e := p.elems[i]
	if e.isIndex {
		arr, ok := node.([]any)
		if !ok {
			return nil, errorf(ExpressionRuntime, "cannot set [%d] of %s: it is %s, not an array", e.index, p.at(i), exprbound.Kind(node))
		}
		if e.index > len(arr) {
			return nil, errorf(ExpressionRuntime, "cannot set %s[%d]: the array has %d items", p.at(i), e.index, len(arr))
		}
		var old any
		if e.index < len(arr) {
			old = arr[e.index]
		}
		child, err := p.setIn(old, i+1, v)
		if err != nil {
			return nil, err
		}
		out := make([]any, len(arr), max(len(arr), e.index+1))
		copy(out, arr)
		if e.index == len(arr) {
			return append(out, child), nil
		}
		out[e.index] = child
		return out, nil
	}
	var m map[string]any
	switch n := node.(type) {
	case map[string]any:
		m = n
	case nil:
	default:
		return nil, errorf(ExpressionRuntime, "cannot set %q of %s: it is %s, not an object", e.key, p.at(i), exprbound.Kind(node))
	}
	child, err := p.setIn(m[e.key], i+1, v)
	if err != nil {
		return nil, err
	}
	out := maps.Clone(m) // copies the table wholesale, faster than inserting
	if out == nil {
		out = make(map[string]any, 1)
	}
	out[e.key] = child
	return out, nil
}

// at names the address up to (not including) element i, for errors:
// scopes.root.items[3].
func (p Path) at(i int) string {
	var b strings.Builder
	b.WriteString(rootPrefix)
	for _, e := range p.elems[:i] {
		if e.isIndex {
			fmt.Fprintf(&b, "[%d]", e.index)
		} else {
			b.WriteString("." + e.key)
		}
	}
	return b.String()
}
