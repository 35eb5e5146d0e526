package codemode_test

import (
	"context"
	"strings"
	"testing"

	"github.com/exprd/exprd/codemode"
)

func TestRunValues(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		name, code, want string
	}{
		{"arithmetic", `1 + 2 * 3`, `7`},
		{"a sequence", `let a = 2; let b = a * 5; b - 1`, `9`},
		{"builtins", `let xs = map(1..4, # * 2); sum(xs)`, `20`},
		{"a call", `codemode.CallTool("math.add", {"a": 5, "b": 7})`, `{"result":12}`},
		{"the design's chain", `let r1 = codemode.CallTool("math.add", {"a": 5, "b": 7});
let sum = codemode.Get(r1, "result");
codemode.CallTool("math.multiply", {"a": sum, "b": 3})`, `{"result":36}`},
		{"Get of a non-object", `codemode.Get(3, "x")`, `null`},
		{"Get of an absent key", `codemode.Get({"a": 1}, "b")`, `null`},
		{"over gRPC", `codemode.Get(codemode.CallTool("catalog.get", {"id": "p01"}), "id")`, `"p01"`},
		{"a stream over HTTP", `codemode.CallToolStream("local.ticks", {"n": 3})`, `[{"tick":1},{"tick":2},{"tick":3}]`},
		{"a stream over gRPC", `len(codemode.CallToolStream("catalog.restock", {"id": "p01", "times": 2}))`, `2`},
		{"a computed name", `let n = "math." + "sqrt"; codemode.CallTool(n, {"a": 16}).result`, `4`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := e.rt.Run(context.Background(), tt.code, codemode.RunOptions{Tools: allTools})
			if err != nil {
				t.Fatalf("got error %v, want %s", err, tt.want)
			}
			if got := string(res.ValueJSON); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

// A Go panic inside an operation reaches the program's caller worded for
// the model, never as Go's text (issue: `reflect: call of
// reflect.Value.Type on zero Value` reached the model).
func TestRunGoPanicsAreWorded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, code := range []string{
		`int(codemode.Get({}, "missing"))`,
		`map(codemode.Get({}, "missing"), #)`,
		`upper(codemode.Get({}, "missing"))`,
		`9223372036854775807 + len("a")`,
	} {
		t.Run(code, func(t *testing.T) {
			t.Parallel()
			_, err := e.rt.Run(context.Background(), code, codemode.RunOptions{Tools: allTools})
			ce := codeError(t, err)
			if ce.Reason != codemode.ExpressionRuntime {
				t.Errorf("reason %s, want expression-runtime", ce.Reason)
			}
			for _, goText := range []string{"reflect:", "interface conversion", "runtime error"} {
				if strings.Contains(ce.Message, goText) {
					t.Errorf("message %q holds Go's %q", ce.Message, goText)
				}
			}
		})
	}
}
