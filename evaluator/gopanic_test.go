package evaluator_test

import (
	"context"
	"strings"
	"testing"

	"github.com/exprd/exprd/evaluator"
	"github.com/exprd/exprd/evaluator/evaltest"
)

// goInternals are texts of Go's runtime and reflect packages that must never
// reach the model.
var goInternals = []string{"reflect:", "zero Value", "interface conversion", "runtime error", "goroutine"}

// TestMessagesHoldNoGoInternals calls every builtin with null, an object
// and a string in each argument, and applies the operators to them: a Go
// panic inside expr (reflect on a nil value, a failed type assertion) must
// come out worded for the model, never in Go's words.
func TestMessagesHoldNoGoInternals(t *testing.T) {
	t.Parallel()
	builtins := []string{
		"all", "none", "any", "one", "filter", "map", "find", "findIndex", "findLast", "findLastIndex", "count", "sum", "groupBy", "sortBy", "reduce",
		"len", "type", "abs", "ceil", "floor", "round", "int", "float", "string", "trim", "trimPrefix", "trimSuffix", "upper", "lower",
		"split", "splitAfter", "replace", "repeat", "join", "indexOf", "lastIndexOf", "hasPrefix", "hasSuffix", "max", "min", "mean", "median",
		"toJSON", "fromJSON", "duration", "date", "timezone", "first", "last", "get", "take", "keys", "values", "toPairs", "fromPairs",
		"reverse", "uniq", "concat", "flatten", "sort", "bitnot", "bitand", "bitshl",
	}
	odd := []string{"scopes.root.missing", "scopes.root.products", `"x"`}
	var srcs []string
	for _, b := range builtins {
		for _, v := range odd {
			srcs = append(srcs, b+"("+v+")", b+"("+v+", #)", b+"([1], "+v+")", b+"("+v+", "+v+")", b+"("+v+", 1, "+v+")")
		}
	}
	for _, op := range []string{"+", "-", "*", "/", "%", "**", "<", "..", "in", "contains", "matches", "and", "??"} {
		for _, v := range odd {
			srcs = append(srcs, v+" "+op+" 1", "1 "+op+" "+v, v+" "+op+" "+v)
		}
	}
	for _, v := range odd {
		srcs = append(srcs, "-"+v, "!"+v, v+" ? 1 : 2", "{("+v+"): 1}", "[1]["+v+"]", v+"[1:2]", v+".x", "[1, "+v+"] | sort()")
	}
	e := newEvaluator(t)
	tool := newTool(t, evaluator.Settings{Read: true})
	st := newState(t, `{"products": {"a": 1}}`)
	failed := 0
	for _, src := range srcs {
		a := e.Run(context.Background(), tool, st, readInput(src), evaltest.NewHost(nil))
		if a.Err == nil {
			continue
		}
		failed++
		for _, g := range goInternals {
			if strings.Contains(a.Err.Message, g) {
				t.Errorf("%s: got message %q, want none of Go's words (%q)", src, a.Err.Message, g)
			}
		}
	}
	if failed < len(srcs)/2 {
		t.Errorf("only %d of %d calls failed: the inputs no longer reach the runtime errors", failed, len(srcs))
	}
}
