package codemode_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/exprd/exprd/codemode"
	"github.com/exprd/exprd/model/openaicompat"
	"github.com/exprd/exprd/model/scripted"
)

// planText is a model's answer holding plan.
func planText(t *testing.T, plan any) string {
	t.Helper()
	b, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// startModel serves turns on loopback and returns a provider pointed at it.
func startModel(t *testing.T, turns ...scripted.Turn) (*scripted.Server, *openaicompat.Provider) {
	t.Helper()
	srv, err := scripted.Start(scripted.Script{Turns: turns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	p, err := openaicompat.New("scripted", openaicompat.ProviderConfig{BaseURL: srv.BaseURL(), Model: "scripted"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return srv, p
}

var chain = codemode.Plan{Tools: []string{"math.add", "math.multiply"}, Code: `let r1 = codemode.CallTool("math.add", {"a": 5, "b": 7});
let sum = codemode.Get(r1, "result");
codemode.CallTool("math.multiply", {"a": sum, "b": 3})`}

func TestOrchestrate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	srv, p := startModel(t, scripted.Turn{Text: "```json\n" + planText(t, chain) + "\n```"})
	var planned codemode.Plan
	out, err := e.rt.Orchestrate(context.Background(), "math: add 5 and 7, then multiply the sum by 3", p, codemode.OrchestrateOptions{
		CandidateLimit: 4, OnPlan: func(pl codemode.Plan) { planned = pl },
	})
	if err != nil {
		t.Fatal(err)
	}
	if !out.Handled || string(out.Result.ValueJSON) != `{"result":36}` || planned.Code != chain.Code || len(out.Candidates) != 4 {
		t.Errorf("got %+v, want handled, 36, the plan reported and 4 candidates", out)
	}
	sys := srv.Requests()[0].Chat.Messages[0].Content
	for _, want := range append(out.Candidates, `"tools"`, "Input schema", `"required":["a","b"]`, "Output schema", "no others") {
		if !strings.Contains(sys, want) {
			t.Errorf("the system prompt lacks %q", want)
		}
	}
	if strings.Contains(sys, "## "+allTools[len(allTools)-1]+"\n") && len(out.Candidates) < len(allTools) {
		t.Error("the system prompt lists a tool outside the candidates")
	}
}

func TestOrchestrateRepair(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	undeclared := codemode.Plan{Tools: []string{"math.add"}, Code: chain.Code}
	streams := codemode.Plan{Tools: []string{"local.ticks"}, Code: `codemode.CallToolStream("local.ticks", {"n": 1})`}
	tests := []struct {
		name   string
		turns  []string
		want   string // the value, or the reason
		reason codemode.Reason
	}{
		{"a repair that succeeds", []string{planText(t, undeclared), planText(t, chain)}, `{"result":36}`, ""},
		{"a stream flag fixed", []string{planText(t, streams), planText(t, map[string]any{"tools": streams.Tools, "code": streams.Code, "stream": true})}, `[{"tick":1}]`, ""},
		{"a repair that fails", []string{planText(t, undeclared), `{"tools": ["math.add"], "code": "codemode.CallTool("}`}, "", codemode.InvalidPlan},
		{"not JSON twice", []string{"I would add them.", "Sure!"}, "", codemode.InvalidPlan},
		{"an uncompilable plan twice", []string{planText(t, codemode.Plan{Code: `foo(1)`}), planText(t, codemode.Plan{Tools: []string{"shell.exec"}, Code: `codemode.CallTool("shell.exec", {})`})}, "", codemode.InvalidPlan},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var turns []scripted.Turn
			for _, s := range tt.turns {
				turns = append(turns, scripted.Turn{Text: s})
			}
			srv, p := startModel(t, turns...)
			out, err := e.rt.Orchestrate(context.Background(), "add 5 and 7 then multiply by 3, and tick", p, codemode.OrchestrateOptions{})
			if tt.reason != "" {
				if ce := codeError(t, err); ce.Reason != tt.reason {
					t.Errorf("got %v, want %s", err, tt.reason)
				}
			} else if err != nil || string(out.Result.ValueJSON) != tt.want {
				t.Errorf("got %s, %v, want %s", out.Result.ValueJSON, err, tt.want)
			}
			reqs := srv.Requests()
			if len(reqs) != 2 {
				t.Fatalf("got %d model requests, want 2", len(reqs))
			}
			if last := reqs[1].Chat.LastUser(); !strings.Contains(last, "refused") {
				t.Errorf("the repair round said %q, want the error", last)
			}
		})
	}
}

func TestNotHandled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, text := range []string{`{"handled": false, "tools": [], "code": ""}`, `{"tools": [], "code": ""}`} {
		_, p := startModel(t, scripted.Turn{Text: text})
		call := e.rt.ToolHandler(p, codemode.OrchestrateOptions{})
		handled, v, err := call(context.Background(), "hello there")
		if handled || v != nil || err != nil {
			t.Errorf("%s: got %v, %v, %v, want not handled", text, handled, v, err)
		}
	}
}

// ToolHandler's CallTool(ctx, prompt) (handled, value, err), go-utcp
// CodeMode's shape, with the tool handler's timeout.
func TestToolHandler(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, p := startModel(t, scripted.Turn{Text: planText(t, chain)}, scripted.Turn{Text: planText(t, codemode.Plan{Tools: []string{"local.slow"}, Code: `codemode.CallTool("local.slow", {})`})})
	call := e.rt.ToolHandler(p, codemode.OrchestrateOptions{})
	handled, v, err := call(context.Background(), "add 5 and 7, then multiply by 3")
	if res, _ := v.(map[string]any); !handled || err != nil || res["result"] != 36.0 {
		t.Errorf("got %v, %v, %v, want handled with result 36", handled, v, err)
	}
	handled, _, err = call(context.Background(), "call the slow tool")
	if ce := codeError(t, err); !handled || ce.Budget != codemode.BudgetTime || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(ce.Message, "3s") {
		t.Errorf("got %v, want the 3s tool handler timeout", err)
	}
	waitFor(t, e.local.cancelled, "the provider to see the cancel")
}

// CandidateLimit is how many ranked tools the model is offered; the
// environment is not read per request (exprd reads go-utcp's variable at
// its start), and a negative limit is refused.
func TestCandidateLimit(t *testing.T) {
	e := newEnv(t)
	t.Setenv(codemode.CandidateLimitEnv, "zero") // read by nobody here
	_, p := startModel(t, scripted.Turn{Text: `{"handled": false, "tools": [], "code": ""}`})
	out, err := e.rt.Orchestrate(context.Background(), "math arithmetic", p, codemode.OrchestrateOptions{CandidateLimit: 2})
	if err != nil || len(out.Candidates) != 2 {
		t.Errorf("got %v candidates, %v, want 2", out.Candidates, err)
	}
	if _, err := e.rt.Orchestrate(context.Background(), "add", p, codemode.OrchestrateOptions{CandidateLimit: -1}); !errors.Is(err, codemode.ErrInvalidOptions) {
		t.Errorf("got %v, want ErrInvalidOptions", err)
	}
}
