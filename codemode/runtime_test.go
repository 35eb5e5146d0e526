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

// Every tool call a program names runs as many times as the program says:
// expr's optimiser, which keeps a value but would skip a map's body under
// len or stop a count or a first at one item, is off for a program that
// calls tools. any, all and none stop at their answer, as the language
// says.
func TestToolCallsRunAsWritten(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const add = `codemode.CallTool("math.add", {"a": #, "b": 1})`
	tests := []struct {
		code, want string
		calls      int
	}{
		{`len(map(filter([1, 2, 3], true), ` + add + `))`, `3`, 3},
		{`map(filter([1, 2, 3], true), ` + add + `)[0]`, `{"result":2}`, 3},
		{`last(map(filter([1, 2, 3], true), ` + add + `))`, `{"result":4}`, 3},
		{`filter([1, 2, 3], ` + add + `.result > 0)[0]`, `1`, 3},
		{`len(filter([1, 2, 3], ` + add + `.result > 0))`, `3`, 3},
		{`count([1, 2, 3], ` + add + `.result > 0) > 0`, `true`, 3},
		{`sum(map([1, 2, 3], ` + add + `.result))`, `9`, 3},
		{`any([1, 2, 3], ` + add + `.result > 0)`, `true`, 1},
		{`len(map(filter([1, 2, 3], true), codemode.Get({"a": #}, "a")))`, `3`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			t.Parallel()
			res, err := e.rt.Run(context.Background(), tt.code, codemode.RunOptions{Tools: allTools})
			if err != nil {
				t.Fatal(err)
			}
			if got := string(res.ValueJSON); got != tt.want || len(res.Trace) != tt.calls {
				t.Errorf("got %s after %d calls, want %s after %d", got, len(res.Trace), tt.want, tt.calls)
			}
		})
	}
}
