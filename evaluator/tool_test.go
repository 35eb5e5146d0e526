package evaluator_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/exprd/exprd/evaluator"
	"github.com/exprd/exprd/evaluator/evaltest"
)

func TestNewToolErrors(t *testing.T) {
	t.Parallel()
	echo := catalogue("echo")[0]
	named := func(name string) evaluator.Function { f := echo; f.Name = name; return f }
	withInput := func(schema string) evaluator.Function {
		f := echo
		f.InputSchema = json.RawMessage(schema)
		return f
	}
	withOutput := func(schema string) evaluator.Function {
		f := echo
		f.OutputSchema = json.RawMessage(schema)
		return f
	}
	tests := []struct {
		name string
		s    evaluator.Settings
		// want are parts of the error message: where, and what.
		want []string
	}{
		{"empty name", evaluator.Settings{Functions: []evaluator.Function{named("")}}, []string{"functions[0]", "identifier"}},
		{"name starting with a digit", evaluator.Settings{Functions: []evaluator.Function{echo, named("1abc")}}, []string{"functions[1]", `"1abc"`, "identifier"}},
		{"name with a dash", evaluator.Settings{Functions: []evaluator.Function{named("a-b")}}, []string{"functions[0]", "identifier"}},
		{"name with a space", evaluator.Settings{Functions: []evaluator.Function{named("a b")}}, []string{"identifier"}},
		{"name with a non-ASCII letter", evaluator.Settings{Functions: []evaluator.Function{named("café")}}, []string{"identifier"}},
		{"reserved name", evaluator.Settings{Functions: []evaluator.Function{named("__tick")}}, []string{"functions[0]", "reserved"}},
		{"builtin len", evaluator.Settings{Functions: []evaluator.Function{named("len")}}, []string{"functions[0]", `"len"`, "builtin"}},
		{"builtin filter", evaluator.Settings{Functions: []evaluator.Function{named("filter")}}, []string{"builtin"}},
		{"builtin now", evaluator.Settings{Functions: []evaluator.Function{named("now")}}, []string{"builtin"}},
		{"scopes", evaluator.Settings{Functions: []evaluator.Function{named("scopes")}}, []string{`"scopes"`}},
		{"duplicate session function", evaluator.Settings{Functions: []evaluator.Function{echo, echo}}, []string{"functions[1]", `"echo"`, "twice"}},
		{"duplicate tool function", evaluator.Settings{Functions: []evaluator.Function{echo}, HasToolFunctions: true,
			ToolFunctions: []evaluator.Function{{Name: "echo"}, {Name: "echo"}}}, []string{"tool_functions[1]", "twice"}},
		{"input schema not JSON", evaluator.Settings{Functions: []evaluator.Function{withInput(`{"type":`)}}, []string{"functions[0].input_schema", "not valid JSON"}},
		{"input schema invalid", evaluator.Settings{Functions: []evaluator.Function{withInput(`{"type":5}`)}}, []string{"functions[0].input_schema", "not a valid JSON Schema"}},
		{"input schema with a remote $ref", evaluator.Settings{Functions: []evaluator.Function{withInput(`{"$ref":"https://example.com/s.json"}`)}}, []string{"functions[0].input_schema"}},
		{"output schema invalid", evaluator.Settings{Functions: []evaluator.Function{withOutput(`{"minimum":"x"}`)}}, []string{"functions[0].output_schema"}},
		{"no runner", evaluator.Settings{Functions: []evaluator.Function{{Name: "f", Description: "d"}}}, []string{"functions[0]", "runner"}},
		{"server function without an implementation", evaluator.Settings{Functions: []evaluator.Function{{Name: "f", Runner: evaluator.RunServer}}}, []string{"functions[0]", `"f"`}},
		{"reference to a missing session function", evaluator.Settings{Functions: []evaluator.Function{echo}, HasToolFunctions: true,
			ToolFunctions: []evaluator.Function{{Name: "echo"}, {Name: "nope"}}}, []string{"tool_functions[1]", `"nope"`, "not a session function"}},
		{"reference with no session functions", evaluator.Settings{HasToolFunctions: true,
			ToolFunctions: []evaluator.Function{{Name: "echo"}}}, []string{"tool_functions[0]", "not a session function"}},
		{"bad tool-only function", evaluator.Settings{HasToolFunctions: true,
			ToolFunctions: []evaluator.Function{withInput(`{"type":5}`)}}, []string{"tool_functions[0].input_schema"}},
		{"tool-only builtin name", evaluator.Settings{HasToolFunctions: true,
			ToolFunctions: []evaluator.Function{named("map")}}, []string{"tool_functions[0]", "builtin"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := evaluator.NewTool(tt.s, evaluator.DefaultBudgets())
			if err == nil {
				t.Fatalf("NewTool: got no error, want one containing %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("NewTool: got error %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestNewToolAccepts(t *testing.T) {
	t.Parallel()
	all := catalogue("echo", "fail", "sleep", "total", "badOutput", "downloadCsv", "clientFail", "clientSlow")
	tests := []struct {
		name string
		s    evaluator.Settings
	}{
		{"no functions", evaluator.Settings{}},
		{"the whole catalogue", evaluator.Settings{Functions: all}},
		{"empty tool_functions", evaluator.Settings{Functions: all, HasToolFunctions: true}},
		{"a tool function with the name of a session function", evaluator.Settings{Functions: catalogue("echo"), HasToolFunctions: true,
			ToolFunctions: []evaluator.Function{{Name: "echo", Description: "The tool's own echo.", Runner: evaluator.RunClient}}}},
		{"a local $ref", evaluator.Settings{Functions: catalogue("total")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := evaluator.NewTool(tt.s, evaluator.DefaultBudgets()); err != nil {
				t.Errorf("NewTool: got error %v, want none", err)
			}
		})
	}
}

// TestClientUnreachable checks the unary Call's tool: client-run functions
// are refused before anything runs, and server-run ones still run.
func TestClientUnreachable(t *testing.T) {
	t.Parallel()
	e := newEvaluator(t)
	tool := newTool(t, evaluator.Settings{Read: true, Functions: catalogue("echo", "downloadCsv")}, evaluator.ClientUnreachable())
	st := evaluator.NewState()
	a := e.Run(context.Background(), tool, st, []byte(`{"steps":[{"set":"scopes.root.a","expr":"1"},{"expr":"downloadCsv({rows: []})"}]}`), evaltest.NewHost(nil))
	if a.Reason() != evaluator.UnknownReference || !strings.Contains(a.Err.Message, "unary Call") {
		t.Errorf("calling a client function: got %s, want unknown-reference naming the unary Call", a.JSON())
	}
	if got := mustMarshal(t, st.Snapshot()); got != `{}` {
		t.Errorf("state: got %s, want {} (nothing ran)", got)
	}
	a = e.Run(context.Background(), tool, st, readInput(`echo({a: 1}).a`), evaltest.NewHost(nil))
	if got, want := string(a.JSON()), `{"value":1}`; got != want {
		t.Errorf("calling a server function: got %s, want %s", got, want)
	}
}
