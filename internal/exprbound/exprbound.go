// The bounded string operations: the builtins that build strings, swapped
// by opsPass for versions that refuse a string over the limit before
// allocating it, and that measure a value before toJSON or string renders
// it.

package exprbound

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm/runtime"
)

// The names of the bounded operations called by name; reserved, so
// expressions cannot reach them.
const (
	repeatName  = "__repeat"
	joinName    = "__join"
	replaceName = "__replace"
	toJSONName  = "__toJSON"
	stringName  = "__string"
)

// boundedBuiltins maps the builtins that build strings to their bounded
// versions.
var boundedBuiltins = map[string]string{
	"repeat": repeatName, "join": joinName, "replace": replaceName,
	"toJSON": toJSONName, "string": stringName,
}

var (
	variadicFunc = reflect.TypeOf(func(...any) (any, error) { return nil, nil })
	anyType      = reflect.TypeOf((*any)(nil)).Elem()
)

// Limits configure the bounded operations.
type Limits struct {
	// MaxString bounds a built string, in characters.
	MaxString int
	// TooLong is the error for a string over MaxString; what names it.
	TooLong func(what string) error
	// TooCostly is the error for an operation refused because of what it
	// would cost to run (a match past MaxMatchCost); nil: a plain error.
	TooCostly func(msg string) error
	// Normalize turns a value into JSON types, refusing one too large to
	// render: toJSON and string call it first.
	Normalize func(v any) (any, error)
}

// Functions returns the expr options that define the operations called by
// name: the bounded builtins that build strings, and the stable sort.
func Functions(l Limits) []expr.Option {
	b := bounds{l}
	return []expr.Option{
		expr.Function(sortByName, sortBy),
		expr.Function(uniqName, b.uniq),
		expr.Function(matchesName, b.matchDynamic),
		expr.Function(repeatName, func(p ...any) (any, error) {
			s, n := p[0].(string), runtime.ToInt(p[1])
			if n < 0 {
				return nil, fmt.Errorf("invalid argument for repeat (expected positive integer, got %d)", n)
			}
			if chars := utf8.RuneCountInString(s); chars > 0 && n > b.MaxString/chars {
				// chars*n counts the characters of s's copies apart: bytes
				// of no character at the end of one may make one with the
				// start of the next. Past 4 bytes a character it is over.
				if len(s) > b.maxBytes()/n {
					if n <= math.MaxInt32 {
						return nil, b.tooLong(fmt.Sprintf("repeat would make a string of %d characters, which", chars*n))
					}
					return nil, b.tooLong(fmt.Sprintf("repeat of %d characters %d times", chars, n))
				}
				out := strings.Repeat(s, n)
				if chars := utf8.RuneCountInString(out); chars > b.MaxString {
					return nil, b.tooLong(fmt.Sprintf("repeat would make a string of %d characters, which", chars))
				}
				return out, nil
			}
			return strings.Repeat(s, n), nil
		}),
		expr.Function(joinName, func(p ...any) (any, error) {
			glue := ""
			if len(p) == 2 {
				glue = p[1].(string)
			}
			var parts []string
			switch a := p[0].(type) {
			case []string:
				parts = a
			case []any:
				parts = make([]string, len(a))
				for i, x := range a {
					s, ok := x.(string)
					if !ok {
						return nil, fmt.Errorf("join: item %d is %T, not a string", i, x)
					}
					parts[i] = s
				}
			default:
				return nil, fmt.Errorf("invalid argument for join (type %T)", p[0])
			}
			n := len(glue) * max(len(parts)-1, 0)
			for _, s := range parts {
				n += len(s)
			}
			if n > b.maxBytes() {
				return nil, b.tooLong(fmt.Sprintf("join of %d strings", len(parts)))
			}
			out := strings.Join(parts, glue)
			if !b.fits(len(out), out) {
				return nil, b.tooLong(fmt.Sprintf("join of %d strings", len(parts)))
			}
			return out, nil
		}),
		expr.Function(replaceName, func(p ...any) (any, error) {
			s, old, repl := p[0].(string), p[1].(string), p[2].(string)
			count := -1
			if len(p) == 4 {
				count = runtime.ToInt(p[3])
			}
			hits := strings.Count(s, old)
			if count >= 0 && count < hits {
				hits = count
			}
			if n := len(s) + hits*(len(repl)-len(old)); n > b.maxBytes() {
				return nil, b.tooLong("the replaced string")
			}
			out := strings.Replace(s, old, repl, count)
			if !b.fits(len(out), out) {
				return nil, b.tooLong("the replaced string")
			}
			return out, nil
		}),
		expr.Function(toJSONName, func(p ...any) (any, error) {
			v, err := b.Normalize(p[0])
			if err != nil {
				return nil, err
			}
			out, err := json.MarshalIndent(v, "", "  ")
			if err != nil {
				return nil, err
			}
			if !b.fits(len(out), string(out)) {
				return nil, b.tooLong("toJSON")
			}
			return string(out), nil
		}),
		expr.Function(stringName, func(p ...any) (any, error) {
			if s, ok := p[0].(string); ok {
				return s, nil
			}
			// A value of shared parts may print exponentially larger than it
			// is in memory: bound it first.
			if _, err := b.Normalize(p[0]); err != nil {
				return nil, err
			}
			out := fmt.Sprintf("%v", p[0])
			if !b.fits(len(out), out) {
				return nil, b.tooLong("string")
			}
			return out, nil
		}),
	}
}

// bounds are the string limits.
type bounds struct{ Limits }

func (b bounds) tooLong(what string) error {
	return b.TooLong(fmt.Sprintf("%s would be over the limit of %d characters", what, b.MaxString))
}

// maxBytes is the most bytes a string within MaxString characters has.
func (b bounds) maxBytes() int {
	if b.MaxString > math.MaxInt/utf8.UTFMax {
		return math.MaxInt
	}
	return utf8.UTFMax * b.MaxString
}

// fits reports whether parts joined, of bytes bytes, stay within
// MaxString characters, counting characters only when the bytes are over.
// A string has at least a character every 4 bytes, and its parts'
// characters counted apart are at least its own (bytes of no character at
// the end of one part may make a character with the start of the next:
// "\xcc" + "\x94" is one), so only the parts' count over and the bytes
// under 4 a character build the string to count it.
func (b bounds) fits(bytes int, parts ...string) bool {
	if bytes <= b.MaxString {
		return true
	}
	if bytes > b.maxBytes() {
		return false
	}
	chars := 0
	for _, p := range parts {
		chars += utf8.RuneCountInString(p)
	}
	if chars <= b.MaxString || len(parts) == 1 {
		return chars <= b.MaxString
	}
	return utf8.RuneCountInString(strings.Join(parts, "")) <= b.MaxString
}

// add is + of strings, bounded, and of numbers, checked.
func (b bounds) add(x, y any) any {
	if s, ok := x.(string); ok {
		if t, ok := y.(string); ok {
			if !b.fits(len(s)+len(t), s, t) {
				panic(b.tooLong("the sum of two strings"))
			}
			return s + t
		}
	}
	return add(x, y)
}
