package codemode

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm/runtime"
)

// As in the evaluator: expr charges its memory budget for arrays and maps
// but builds strings uncharged, so after type checking boundOps swaps each
// operation that builds a string for one that refuses, before allocating, a
// string over MaxStringLength.

const (
	addName     = reservedPrefix + "add"
	repeatName  = reservedPrefix + "repeat"
	joinName    = reservedPrefix + "join"
	replaceName = reservedPrefix + "replace"
	toJSONName  = reservedPrefix + "toJSON"
	stringName  = reservedPrefix + "string"
)

var boundedBuiltins = map[string]string{
	"repeat": repeatName, "join": joinName, "replace": replaceName,
	"toJSON": toJSONName, "string": stringName,
}

var variadicFunc = reflect.TypeOf(func(...any) (any, error) { return nil, nil })

// boundedFunctions defines the bounded operations for a string limit.
func boundedFunctions(limit int) []expr.Option {
	tooLong := func(what string) error {
		return budgetError(BudgetString, "%s would be over the limit of %d characters", what, limit)
	}
	fits := func(s string) bool { return len(s) <= limit || utf8.RuneCountInString(s) <= limit }
	return []expr.Option{
		expr.Function(addName, func(p ...any) (any, error) {
			if x, ok := p[0].(string); ok {
				if y, ok := p[1].(string); ok {
					if len(x)+len(y) > limit && utf8.RuneCountInString(x)+utf8.RuneCountInString(y) > limit {
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
			if chars := utf8.RuneCountInString(s); chars > 0 && n > limit/chars {
				return nil, tooLong("repeat")
			}
			return strings.Repeat(s, n), nil
		}),
		expr.Function(joinName, func(p ...any) (any, error) {
			glue := ""
			if len(p) == 2 {
				glue, _ = p[1].(string)
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
						return nil, fmt.Errorf("join: item %d is not a string", i)
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
			if n > limit*utf8.UTFMax {
				return nil, tooLong("join")
			}
			out := strings.Join(parts, glue)
			if !fits(out) {
				return nil, tooLong("join")
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
			if n := len(s) + hits*(len(repl)-len(old)); n > limit*utf8.UTFMax {
				return nil, tooLong("the replaced string")
			}
			out := strings.Replace(s, old, repl, count)
			if !fits(out) {
				return nil, tooLong("the replaced string")
			}
			return out, nil
		}),
		expr.Function(toJSONName, func(p ...any) (any, error) {
			v, err := jsonValue(p[0], limit*utf8.UTFMax)
			if err != nil {
				return nil, err
			}
			out, err := json.MarshalIndent(v, "", "  ")
			if err != nil {
				return nil, err
			}
			if !fits(string(out)) {
				return nil, tooLong("toJSON")
			}
			return string(out), nil
		}),
		expr.Function(stringName, func(p ...any) (any, error) {
			if s, ok := p[0].(string); ok {
				return s, nil
			}
			// A value of shared parts may print far larger than it is in
			// memory: measure it first.
			if _, err := jsonValue(p[0], limit*utf8.UTFMax); err != nil {
				return nil, err
			}
			out := fmt.Sprintf("%v", p[0])
			if !fits(out) {
				return nil, tooLong("string")
			}
			return out, nil
		}),
	}
}

// boundOps swaps + of strings (or of values typed only at run time) and
// the builtins that build strings for the bounded operations.
type boundOps struct{}

func (boundOps) Visit(node *ast.Node) {
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
