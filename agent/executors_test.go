package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/exprd/exprd/agent"
	"github.com/exprd/exprd/codemode"
	"github.com/exprd/exprd/demo"
	"github.com/exprd/exprd/demo/providers"
	"github.com/exprd/exprd/evaluator"
	"github.com/exprd/exprd/internal/egress"
	"github.com/exprd/exprd/model/scripted"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/utcpall"
)

// mathRegistry registers the demo's math provider until the test ends.
func mathRegistry(t testing.TB) *utcp.Registry {
	t.Helper()
	m, err := providers.StartMath()
	if err != nil {
		t.Fatalf("StartMath: %v", err)
	}
	t.Cleanup(func() { _ = m.Close() })
	reg, err := utcpall.New(utcp.WithEgress(egress.MustParse("loopback")), utcp.WithProviderMessages())
	if err != nil {
		t.Fatalf("utcp.New: %v", err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	if _, err := reg.Register(context.Background(), "math", utcp.FromURL(m.URL()+"/utcp")); err != nil {
		t.Fatalf("Register: %v", err)
	}
	return reg
}

// exprTool is the built-in expr tool on the demo's products.
func exprTool(t testing.TB, host evaluator.Host) agent.Tool {
	t.Helper()
	ev, err := evaluator.New()
	if err != nil {
		t.Fatal(err)
	}
	tool, err := evaluator.NewTool(evaluator.Settings{Read: true}, evaluator.DefaultBudgets())
	if err != nil {
		t.Fatal(err)
	}
	st := evaluator.NewState()
	if err := st.Replace(demo.Products); err != nil {
		t.Fatal(err)
	}
	d := tool.Describe()
	return agent.Tool{Name: d.Name, Description: d.Description, Parameters: d.InputSchema, Exec: agent.ExprExecutor(ev, tool, st, host)}
}

type recordingHost struct {
	mu     sync.Mutex
	writes []string
}

func (h *recordingHost) Write(_ context.Context, w evaluator.Write) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.writes = append(h.writes, w.Path+"="+string(w.ValueJSON))
	return nil
}

func (*recordingHost) Confirm(context.Context, int, string) (bool, error) { return true, nil }

func (*recordingHost) CallClient(context.Context, string, map[string]any) (any, error) {
	return nil, nil
}

// One turn uses all four executors: a client-run tool, a UTCP tool, the
// built-in expr tool on the session's state, and codemode.
func TestTurnWithAllFourExecutors(t *testing.T) {
	t.Parallel()
	reg := mathRegistry(t)
	rt, err := codemode.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	add, err := reg.Tool("math.add")
	if err != nil {
		t.Fatal(err)
	}
	host := &recordingHost{}
	client := agent.ExecutorFunc(func(_ context.Context, c agent.ToolCall) (agent.Result, error) {
		return agent.Result{Content: json.RawMessage(`{"budget": 30}`)}, nil
	})
	srv := serve(t,
		scripted.Turn{Text: "Let me check.", ToolCalls: []scripted.ToolCall{
			callID("c1", "ask_budget", `{}`),
			callID("c2", "math_add", `{"a": 12, "b": 30}`),
		}},
		scripted.Turn{ToolCalls: []scripted.ToolCall{
			callID("c3", "expr", `{"steps": [{"set": "scopes.root.cheap", "expr": "map(filter(scopes.root.products.items, .price < 30), .id)"}], "read": "len(scopes.root.cheap)"}`),
			callID("c4", "codemode", `{"code": "let r = codemode.CallTool(\"math.multiply\", {\"a\": 6, \"b\": 7}); codemode.Get(r, \"result\")"}`),
			callID("c5", "math_add", `{"a": "x"}`),
		}},
		scripted.Turn{Match: &scripted.Match{LastRole: "tool"}, Text: "Done."})
	cfg := config(t, srv,
		agent.Tool{Name: "ask_budget", Description: "Asks the user's budget.", Exec: client},
		agent.Tool{Name: "math_add", Description: add.Description, Parameters: add.Inputs, Exec: agent.UTCPExecutor(reg, "math.add")},
		exprTool(t, host),
		agent.Tool{Name: "codemode", Parameters: json.RawMessage(agent.CodeModeParameters),
			Exec: agent.CodeModeExecutor(rt, []string{"math.multiply"}, nil)})
	out := run(t, cfg)
	if out.StopReason != agent.StopCompleted || len(out.Steps) != 3 || out.Text != "Done." {
		t.Fatalf("got %s after %d steps, %q; want completed after 3, Done.", out.StopReason, len(out.Steps), out.Text)
	}
	want := [][]string{
		{`{"budget": 30}`, `{"result":42}`},
		{`{"value":`, `{"value":42}`, `at /a: got string, want number`},
	}
	for s, results := range want {
		for j, w := range results {
			r := out.Steps[s].Results[j]
			if !strings.Contains(string(r.Content), w) {
				t.Errorf("step %d result %d: got %s, want it to contain %s", s, j, r.Content, w)
			}
		}
	}
	if r := out.Steps[1].Results[2]; !r.IsError {
		t.Errorf("got %s, want the schema failure to be an error result", r.Content)
	}
	if len(host.writes) != 1 || !strings.HasPrefix(host.writes[0], "scopes.root.cheap=") {
		t.Errorf("got writes %q, want scopes.root.cheap", host.writes)
	}
	msgs := toolMessages(t, srv, 2)
	if len(msgs) != 5 || msgs[4].ToolCallID != "c5" || msgs[3].Content != `{"value":42}` {
		t.Errorf("got tool messages %+v, want all five results in call order", msgs)
	}
}

func TestExecutorsErrorResults(t *testing.T) {
	t.Parallel()
	reg := mathRegistry(t)
	rt, err := codemode.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tests := []struct {
		name string
		exec agent.Executor
		args string
		want string // in the error, or the content when ok
		ok   bool
	}{
		{"utcp tool fails", agent.UTCPExecutor(reg, "math.divide"), `{"a": 1, "b": 0}`, `provider answered 422 Unprocessable Entity: {"code":"division_by_zero"}`, false},
		{"utcp unknown tool", agent.UTCPExecutor(reg, "math.nope"), `{}`, "not found", false},
		{"codemode without code", agent.CodeModeExecutor(rt, nil, nil), `{}`, `{"code": "<program>"}`, false},
		{"codemode tool not on the whitelist", agent.CodeModeExecutor(rt, nil, nil), `{"code": "codemode.CallTool(\"math.add\", {\"a\": 1, \"b\": 2})"}`, "math.add", false},
		{"expr error answer", exprTool(t, nil).Exec, `{"steps": [{"set": "scopes.evt.x", "expr": "1"}]}`, "guardrail-violation", false},
		{"expr read", exprTool(t, nil).Exec, `{"read": "len(scopes.root.products.items)"}`, `{"value":20}`, true},
	}
	for _, tc := range tests {
		r, err := tc.exec.Execute(ctx, agent.ToolCall{ID: "c", Name: "t", Arguments: json.RawMessage(tc.args)})
		switch {
		case tc.ok && (err != nil || r.IsError || string(r.Content) != tc.want):
			t.Errorf("%s: got %s, %v; want %s", tc.name, r.Content, err, tc.want)
		case !tc.ok && err == nil && !r.IsError:
			t.Errorf("%s: got %s, want an error", tc.name, r.Content)
		case !tc.ok && err != nil && !strings.Contains(err.Error(), tc.want):
			t.Errorf("%s: got error %v, want it to contain %q", tc.name, err, tc.want)
		case !tc.ok && err == nil && !strings.Contains(string(r.Content), tc.want):
			t.Errorf("%s: got %s, want it to contain %q", tc.name, r.Content, tc.want)
		}
	}
}

// An executor's context carries the step of the call it runs.
func TestCallStep(t *testing.T) {
	t.Parallel()
	srv := serve(t, scripted.Turn{ToolCalls: []scripted.ToolCall{call("a", `{}`)}},
		scripted.Turn{ToolCalls: []scripted.ToolCall{call("a", `{}`)}}, scripted.Turn{Text: "done"})
	var (
		mu    sync.Mutex
		steps []int
	)
	a := agent.ExecutorFunc(func(ctx context.Context, _ agent.ToolCall) (agent.Result, error) {
		step, ok := agent.CallStep(ctx)
		if !ok {
			t.Error("CallStep: got no step, want one")
		}
		mu.Lock()
		steps = append(steps, step)
		mu.Unlock()
		return agent.Result{}, nil
	})
	run(t, config(t, srv, agent.Tool{Name: "a", Exec: a}))
	if len(steps) != 2 || steps[0] != 0 || steps[1] != 1 {
		t.Errorf("got steps %v, want [0 1]", steps)
	}
	if _, ok := agent.CallStep(context.Background()); ok {
		t.Error("CallStep of a context outside a call: got a step, want none")
	}
}
