package evaltest_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/exprd/exprd/evaluator"
	"github.com/exprd/exprd/evaluator/evaltest"
)

func writeCases(t *testing.T, data string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cases.json")
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadCasesIsStrict(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, data, want string }{
		{"unknown field", `[{"name":"a","input":{},"want":{"answer":{}},"wants":1}]`, "wants"},
		{"unknown settings field", `[{"name":"a","settings":{"reads":true},"input":{},"want":{"answer":{}}}]`, "reads"},
		{"unknown function", `[{"name":"a","settings":{"functions":["nope"]},"input":{},"want":{"answer":{}}}]`, "nope"},
		{"unknown tool function", `[{"name":"a","settings":{"tool_functions":["nope"]},"input":{},"want":{"answer":{}}}]`, "nope"},
		{"no name", `[{"input":{},"want":{"answer":{}}}]`, "name"},
		{"duplicate name", `[{"name":"a","input":{},"want":{"answer":{}}},{"name":"a","input":{},"want":{"answer":{}}}]`, "twice"},
		{"no input", `[{"name":"a","want":{"answer":{}}}]`, "input"},
		{"both inputs", `[{"name":"a","input":{},"input_raw":"{}","want":{"answer":{}}}]`, "both"},
		{"no want", `[{"name":"a","input":{},"want":{}}]`, "want"},
		{"answer and reason", `[{"name":"a","input":{},"want":{"answer":{},"reason":"invalid-entry"}}]`, "want"},
		{"unknown reason", `[{"name":"a","input":{},"want":{"reason":"oops"}}]`, "oops"},
		{"message without reason", `[{"name":"a","input":{},"want":{"answer":{},"message_contains":"x"}}]`, "message_contains"},
		{"budget above the maximum", `[{"name":"a","budgets":{"max_steps":51},"input":{},"want":{"answer":{}}}]`, "max_steps"},
		{"unknown budget", `[{"name":"a","budgets":{"max_stepz":1},"input":{},"want":{"answer":{}}}]`, "max_stepz"},
		{"missing state file", `[{"name":"a","state":"nope","input":{},"want":{"answer":{}}}]`, "nope"},
		{"state name with a path", `[{"name":"a","state":"../go","input":{},"want":{"answer":{}}}]`, "../go"},
		{"state that is an array", `[{"name":"a","state":[],"input":{},"want":{"answer":{}}}]`, "state"},
		{"not an array", `{"name":"a"}`, "cannot unmarshal"},
		{"data after the array", `[] []`, "after"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := evaltest.LoadCases(writeCases(t, tt.data))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("LoadCases: got error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestLoadCases(t *testing.T) {
	t.Parallel()
	cases, err := evaltest.LoadCases(writeCases(t, `[
		{"name": "named state", "state": "products", "settings": {"read": true, "functions": ["echo", "downloadCsv"], "tool_functions": ["echo", "total"], "note": "n"},
		 "budgets": {"timeout_ms": 50, "max_iterations": 10, "function_timeout_ms": 20},
		 "input": {"steps": [{"expr": "echo({})"}]}, "want": {"answer": {}}},
		{"name": "inline state", "state": {"a": 1}, "settings": {"tool_functions": []}, "input_raw": "{x", "want": {"reason": "invalid-entry"}},
		{"name": "no state", "input": {"steps": []}, "want": {"answer": {}}}
	]`))
	if err != nil {
		t.Fatal(err)
	}
	named, inline, none := cases[0], cases[1], cases[2]
	if !strings.Contains(string(named.StateJSON()), `"products"`) {
		t.Errorf("StateJSON of products: got %.40s..., want demo/products.json", named.StateJSON())
	}
	if got := string(inline.StateJSON()); got != `{"a": 1}` {
		t.Errorf("StateJSON inline: got %s, want {\"a\": 1}", got)
	}
	if got := string(none.StateJSON()); got != `{}` {
		t.Errorf("StateJSON absent: got %s, want {}", got)
	}
	if got := string(inline.InputJSON()); got != `{x` {
		t.Errorf("InputJSON raw: got %s, want {x", got)
	}

	s := named.Settings()
	if !s.Read || s.Note != "n" || len(s.Functions) != 2 || !s.HasToolFunctions || len(s.ToolFunctions) != 2 {
		t.Fatalf("Settings: got %+v, want read, note, 2 functions, 2 tool functions", s)
	}
	if f := s.ToolFunctions[0]; f.Name != "echo" || f.Runner != 0 || f.Impl != nil {
		t.Errorf("Settings: got tool function %+v, want a reference to the session's echo", f)
	}
	if f := s.ToolFunctions[1]; f.Name != "total" || f.Runner != evaluator.RunServer {
		t.Errorf("Settings: got tool function %+v, want the catalogue's total", f)
	}
	if s := inline.Settings(); !s.HasToolFunctions || len(s.ToolFunctions) != 0 {
		t.Errorf("Settings with tool_functions []: got %+v, want set and empty", s)
	}
	if s := none.Settings(); s.HasToolFunctions {
		t.Errorf("Settings without tool_functions: got %+v, want unset", s)
	}
	if _, err := evaluator.NewTool(named.Settings(), named.Budgets()); err != nil {
		t.Errorf("NewTool: %v", err)
	}

	b, d := named.Budgets(), evaluator.DefaultBudgets()
	if b.Timeout != 50*time.Millisecond || b.MaxIterations != 10 || b.FunctionTimeout != 20*time.Millisecond || b.MaxSteps != d.MaxSteps {
		t.Errorf("Budgets: got %+v, want timeout 50ms, 10 iterations, function timeout 20ms, the rest at the maxima", b)
	}
}

func TestUnary(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, c string
		want    bool
	}{
		{"plain", `{"name":"a","input":{"steps":[{"expr":"1"}]},"want":{"answer":{}}}`, true},
		{"confirm", `{"name":"a","input":{"steps":[{"expr":"1","confirm":"ok?"}]},"want":{"answer":{}}}`, false},
		{"server function", `{"name":"a","settings":{"functions":["echo"]},"input":{"steps":[{"expr":"echo({})"}]},"want":{"answer":{}}}`, true},
		{"client function declared, not used", `{"name":"a","settings":{"functions":["downloadCsv"]},"input":{"steps":[{"expr":"1"}]},"want":{"answer":{}}}`, true},
		{"client function in a step", `{"name":"a","settings":{"functions":["downloadCsv"]},"input":{"steps":[{"expr":"downloadCsv({rows: []})"}]},"want":{"answer":{}}}`, false},
		{"client function in the read", `{"name":"a","settings":{"read":true,"functions":["clientFail"]},"input":{"read":"clientFail({})"},"want":{"answer":{}}}`, false},
		{"tool-only client function", `{"name":"a","settings":{"tool_functions":["clientSlow"]},"input":{"steps":[{"expr":"clientSlow({})"}]},"want":{"answer":{}}}`, false},
		{"client function in client_calls", `{"name":"a","settings":{"functions":["clientFail"]},"input":{"steps":[]},"want":{"answer":{}},"client_calls":[{"name":"clientFail","args":{}}]}`, false},
		{"client function in raw input", `{"name":"a","settings":{"functions":["clientFail"]},"input_raw":"{clientFail(","want":{"reason":"invalid-entry"}}`, false},
		{"a longer name is another name", `{"name":"a","settings":{"functions":["clientFail"]},"input":{"steps":[{"expr":"clientFailure"}]},"want":{"answer":{}}}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cases, err := evaltest.LoadCases(writeCases(t, "["+tt.c+"]"))
			if err != nil {
				t.Fatal(err)
			}
			if got := cases[0].Unary(); got != tt.want {
				t.Errorf("Unary: got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	cases, err := evaltest.LoadCases(writeCases(t, `[
		{"name": "exact", "input": {"steps": []}, "want": {"answer": {"value": {"a": [1, 2.5]}}},
		 "writes": [{"step": 0, "path": "scopes.root.a", "value": {"b": 1}}],
		 "client_calls": [{"name": "downloadCsv", "args": {"rows": []}}],
		 "state_after": {"a": {"b": 1}}},
		{"name": "reason", "input": {"steps": []}, "want": {"reason": "host-function", "message_contains": "boom"}, "writes": [], "client_calls": []}
	]`))
	if err != nil {
		t.Fatal(err)
	}
	exact, reason := cases[0], cases[1]
	good := []evaluator.Write{{Step: 0, Path: "scopes.root.a", ValueJSON: []byte(`{"b":1}`)}}
	calls := []evaltest.ClientCall{{Name: "downloadCsv", Args: map[string]any{"rows": []any{}}}}
	state := map[string]any{"a": map[string]any{"b": 1}}
	value := evaluator.Answer{ValueJSON: []byte(`{"a":[1,2.5]}`)}
	if err := evaltest.Check(exact, value, good, calls, state); err != nil {
		t.Errorf("Check of a matching run: got %v, want nil", err)
	}
	// A write's Value serves when it has no ValueJSON.
	if err := evaltest.Check(exact, value, []evaluator.Write{{Path: "scopes.root.a", Value: map[string]any{"b": 1}}}, calls, state); err != nil {
		t.Errorf("Check with Write.Value: got %v, want nil", err)
	}
	mismatches := []struct {
		name  string
		err   error
		wants []string
	}{
		{"answer", evaltest.Check(exact, evaluator.Answer{}, good, calls, state), []string{"answer: got {}, want {\"value\":{\"a\":[1,2.5]}}"}},
		{"write value", evaltest.Check(exact, value, []evaluator.Write{{Path: "scopes.root.a", ValueJSON: []byte(`2`)}}, calls, state), []string{"write 0: got", "= 2, want"}},
		{"write count", evaltest.Check(exact, value, nil, calls, state), []string{"writes: got 0"}},
		{"client calls", evaltest.Check(exact, value, good, nil, state), []string{"client calls: got"}},
		{"state", evaltest.Check(exact, value, good, calls, map[string]any{}), []string{"state after: got {}"}},
		{"reason", evaltest.Check(reason, evaluator.Answer{Err: &evaluator.Error{Reason: evaluator.InvalidEntry, Message: "m"}}, nil, nil, nil), []string{`got reason "invalid-entry"`, `want "host-function"`}},
		{"message", evaltest.Check(reason, evaluator.Answer{Err: &evaluator.Error{Reason: evaluator.HostFunction, Message: "m"}}, nil, nil, nil), []string{`got message "m"`, `"boom"`}},
		{"no error", evaltest.Check(reason, evaluator.Answer{}, nil, nil, nil), []string{`want an error "host-function"`}},
		{"unexpected write", evaltest.Check(reason, evaluator.Answer{Err: &evaluator.Error{Reason: evaluator.HostFunction, Message: "boom"}}, good, nil, nil), []string{"writes: got 1"}},
	}
	for _, m := range mismatches {
		if m.err == nil {
			t.Errorf("Check (%s): got nil, want an error", m.name)
			continue
		}
		for _, w := range m.wants {
			if !strings.Contains(m.err.Error(), w) {
				t.Errorf("Check (%s): got %q, want it to contain %q", m.name, m.err, w)
			}
		}
	}
}

func TestParseAnswer(t *testing.T) {
	t.Parallel()
	for _, a := range []evaluator.Answer{
		{},
		{ValueJSON: []byte(`[1,"x",null]`)},
		{ValueJSON: []byte(`null`)},
		{Declined: true},
		{Err: &evaluator.Error{Reason: evaluator.HostFunction, Message: "step 0: boom"}},
	} {
		got, err := evaltest.ParseAnswer(a.JSON())
		if err != nil {
			t.Errorf("ParseAnswer(%s): %v", a.JSON(), err)
			continue
		}
		if string(got.JSON()) != string(a.JSON()) {
			t.Errorf("ParseAnswer(%s): got %s back, want the same", a.JSON(), got.JSON())
		}
	}
	for _, bad := range []string{`[]`, `{"value":1,"declined":true}`, `{"declined":false}`, `{"other":1}`, `{"error":1}`, `x`} {
		if _, err := evaltest.ParseAnswer([]byte(bad)); err == nil {
			t.Errorf("ParseAnswer(%s): got no error, want one", bad)
		}
	}
}

func TestHost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := evaltest.NewHost([]bool{false, true})
	for i, want := range []bool{false, true, true} {
		if got, err := h.Confirm(ctx, i, "ok?"); got != want || err != nil {
			t.Errorf("Confirm %d: got %v, %v, want %v, nil", i, got, err, want)
		}
	}
	if got := h.Confirms(); len(got) != 3 || got[2] != (evaltest.Confirm{Step: 2, Text: "ok?"}) {
		t.Errorf("Confirms: got %+v, want 3 ending with step 2", got)
	}

	res, err := h.CallClient(ctx, "downloadCsv", map[string]any{"rows": []any{1, 2}})
	if m, _ := res.(map[string]any); err != nil || m["rows"] != 2 || m["file"] != "products.csv" {
		t.Errorf("CallClient(downloadCsv): got %v, %v, want {rows: 2, file: products.csv}", res, err)
	}
	if _, err := h.CallClient(ctx, "clientFail", map[string]any{}); err == nil || err.Error() != "disk full" {
		t.Errorf("CallClient(clientFail): got %v, want disk full", err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := h.CallClient(short, "clientSlow", map[string]any{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("CallClient(clientSlow): got %v, want it to wait for the context's end", err)
	}
	if got := h.ClientCalls(); len(got) != 3 || got[0].Name != "downloadCsv" || got[2].Name != "clientSlow" {
		t.Errorf("ClientCalls: got %+v, want downloadCsv, clientFail, clientSlow", got)
	}
	if err := h.Write(ctx, evaluator.Write{Path: "scopes.root.a"}); err != nil || len(h.Writes()) != 1 {
		t.Errorf("Write: got %v and %d writes, want nil and 1", err, len(h.Writes()))
	}
}

func TestFunctions(t *testing.T) {
	t.Parallel()
	fns := evaltest.Functions()
	var all []evaluator.Function
	for _, f := range fns {
		all = append(all, f)
	}
	if _, err := evaluator.NewTool(evaluator.Settings{Functions: all}, evaluator.DefaultBudgets()); err != nil {
		t.Fatalf("NewTool with the catalogue: %v", err)
	}
	ctx := context.Background()
	if res, err := fns["total"].Impl(ctx, map[string]any{"rows": []any{map[string]any{"price": 1.5}, map[string]any{"price": 2}}}); err != nil || res.(map[string]any)["total"] != 3.5 {
		t.Errorf("total: got %v, %v, want {total: 3.5}", res, err)
	}
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := fns["sleep"].Impl(short, map[string]any{"ms": 10_000}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("sleep past its context: got %v, want it to stop with the context", err)
	}
	if _, err := fns["fail"].Impl(ctx, nil); err == nil || err.Error() != "boom" {
		t.Errorf("fail: got %v, want boom", err)
	}
}

func TestOverTime(t *testing.T) {
	t.Parallel()
	cases, err := evaltest.LoadCases(writeCases(t, `[
		{"name": "any", "input": {"steps": []}, "want": {"answer": {}}},
		{"name": "iterations", "input": {"steps": []}, "want": {"reason": "budget-exceeded", "message_contains": "iterations"}},
		{"name": "time", "input": {"steps": []}, "want": {"reason": "budget-exceeded", "message_contains": "time budget"}}
	]`))
	if err != nil {
		t.Fatal(err)
	}
	overTime := evaluator.Answer{Err: &evaluator.Error{Reason: evaluator.BudgetExceeded, Message: "step 0: over the time budget of 100ms"}}
	overMemory := evaluator.Answer{Err: &evaluator.Error{Reason: evaluator.BudgetExceeded, Message: "step 0: over the memory budget"}}
	for i, want := range []bool{true, true, false} {
		if got := evaltest.OverTime(cases[i], overTime); got != want {
			t.Errorf("OverTime(%s, time): got %v, want %v", cases[i].Name, got, want)
		}
		if evaltest.OverTime(cases[i], overMemory) || evaltest.OverTime(cases[i], evaluator.Answer{}) {
			t.Errorf("OverTime(%s, not time): got true, want false", cases[i].Name)
		}
	}
}
