// Package exprbound bounds the strings an expr program builds. expr charges
// its memory budget for arrays and maps, but it builds strings uncharged
// (a + b, replace, join) or charges them only after building them (repeat):
// `reduce(1..40, #acc + #acc, "x")` would ask for a terabyte. After type
// checking, Ops swaps each such operation for a version from Functions that
// refuses, before allocating, a string over the limit, and measures a value
// before toJSON or string renders it.
//
// The operations are named with the prefix "__": a caller must keep
// expressions from naming (or declaring) such names.
package exprbound

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm/runtime"
)

// The names of the bounded operations; reserved, so expressions cannot reach
// them.
const (
	addName     = "__add"
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

var variadicFunc = reflect.TypeOf(func(...any) (any, error) { return nil, nil })

// Limits configure the bounded operations.
type Limits struct {
	// MaxString bounds a built string, in characters.
	MaxString int
	// TooLong is the error for a string over MaxString; what names it.
	TooLong func(what string) error
	// Normalize turns a value into JSON types, refusing one too large to
	// render: toJSON and string call it first.
	Normalize func(v any) (any, error)
}

// Functions returns the expr options that define the bounded operations.
func Functions(l Limits) []expr.Option {
	tooLong := func(what string) error {
		return l.TooLong(fmt.Sprintf("%s would be over the limit of %d characters", what, l.MaxString))
	}
	// fits reports whether parts joined stay within MaxStringLength
	// characters, counting characters only when the bytes are over.
	fits := func(bytes int, parts ...string) bool {
		if bytes <= l.MaxString {
			return true
		}
		chars := 0
		for _, p := range parts {
			chars += utf8.RuneCountInString(p)
		}
		return chars <= l.MaxString
	}
	return []expr.Option{
		expr.Function(addName, func(p ...any) (any, error) {
			if x, ok := p[0].(string); ok {
				if y, ok := p[1].(string); ok {
					if !fits(len(x)+len(y), x, y) {
						return nil, tooLong("the sum of two strings")
					}
					return x + y, nil
				}
			}
			return runtime.Add(p[0], p[1]), nil
		}),
		expr.Function(repeatName, func(p ...any) (any, error) {
			s, n := p[0].(string), runtime.ToInt(p[1])
			if n < 0 {
				return nil, fmt.Errorf("invalid argument for repeat (expected positive integer, got %d)", n)
			}
			if chars := utf8.RuneCountInString(s); chars > 0 && n > l.MaxString/chars {
				if n <= math.MaxInt32 {
					return nil, tooLong(fmt.Sprintf("repeat would make a string of %d characters, which", chars*n))
				}
				return nil, tooLong(fmt.Sprintf("repeat of %d characters %d times", chars, n))
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
			if n > l.MaxString {
				chars := utf8.RuneCountInString(glue) * max(len(parts)-1, 0)
				for _, s := range parts {
					chars += utf8.RuneCountInString(s)
				}
				if chars > l.MaxString {
					return nil, tooLong(fmt.Sprintf("join of %d strings", len(parts)))
				}
			}
			return strings.Join(parts, glue), nil
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
			if n := len(s) + hits*(len(repl)-len(old)); n > 4*l.MaxString {
				return nil, tooLong("the replaced string")
			}
			out := strings.Replace(s, old, repl, count)
			if !fits(len(out), out) {
				return nil, tooLong("the replaced string")
			}
			return out, nil
		}),
		expr.Function(toJSONName, func(p ...any) (any, error) {
			v, err := l.Normalize(p[0])
			if err != nil {
				return nil, err
			}
			out, err := json.MarshalIndent(v, "", "  ")
			if err != nil {
				return nil, err
			}
			if !fits(len(out), string(out)) {
				return nil, tooLong("toJSON")
			}
			return string(out), nil
		}),
		expr.Function(stringName, func(p ...any) (any, error) {
			if s, ok := p[0].(string); ok {
				return s, nil
			}
			// A value of shared parts may print exponentially larger than it
			// is in memory: bound it first.
			if _, err := l.Normalize(p[0]); err != nil {
				return nil, err
			}
			out := fmt.Sprintf("%v", p[0])
			if !fits(len(out), out) {
				return nil, tooLong("string")
			}
			return out, nil
		}),
	}
}

// Ops is the pass that swaps the unbounded operations of a checked
// tree for the bounded ones: + of strings or of values whose type is known
// only at run time, and the builtins that build strings. Numeric + keeps
// expr's opcode.
type Ops struct{}

// Visit swaps one node; use it with ast.Walk on a checked tree.
func (Ops) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.BinaryNode:
		if n.Operator != "+" {
			return
		}
		if k := n.Type().Kind(); k != reflect.String && k != reflect.Interface {
			return
		}
		replaceWithCall(node, addName, []ast.Node{n.Left, n.Right})
	case *ast.BuiltinNode:
		if name, ok := boundedBuiltins[n.Name]; ok {
			replaceWithCall(node, name, n.Arguments)
		}
	}
}

func replaceWithCall(node *ast.Node, name string, args []ast.Node) {
	callee := &ast.IdentifierNode{Value: name}
	callee.SetType(variadicFunc)
	call := &ast.CallNode{Callee: callee, Arguments: args}
	call.SetType((*node).Type())
	ast.Patch(node, call)
}
