package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exprd/exprd/agent"
	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/model/scripted"
)

func TestAnswerWithoutToolCallEndsTurn(t *testing.T) {
	t.Parallel()
	srv := serve(t, scripted.Turn{Text: "Two lamps are cheap.", Usage: &scripted.Usage{PromptTokens: 7, CompletionTokens: 5, TotalTokens: 12}})
	cfg := config(t, srv, agent.Tool{Name: "search", Exec: fixed(`{}`)})
	cfg.System = "Be brief."
	var (
		mu     sync.Mutex
		deltas []string
		events []string
	)
	cfg.Events = agent.Events{
		StepStarted: func(int) { mu.Lock(); events = append(events, "started"); mu.Unlock() },
		TextDelta:   func(_ int, s string) { mu.Lock(); deltas = append(deltas, s); mu.Unlock() },
		StepFinished: func(s agent.Step) {
			mu.Lock()
			events = append(events, "finished "+string(s.FinishReason))
			mu.Unlock()
		},
	}
	out := run(t, cfg)
	if out.StopReason != agent.StopCompleted || out.Text != "Two lamps are cheap." || len(out.Steps) != 1 {
		t.Fatalf("got %+v, want one completed step", out)
	}
	if out.Usage.TotalTokens != 12 {
		t.Errorf("got usage %+v, want 12 tokens", out.Usage)
	}
	if got, want := deltas, []string{"Two ", "lamps ", "are ", "cheap."}; !slices.Equal(got, want) {
		t.Errorf("got deltas %q, want %q", got, want)
	}
	if got, want := events, []string{"started", "finished stop"}; !slices.Equal(got, want) {
		t.Errorf("got events %q, want %q", got, want)
	}
	req := srv.Requests()[0].Chat
	if len(req.Messages) != 2 || req.Messages[0].Role != "system" || req.Messages[0].Content != "Be brief." || req.Messages[1].Content != "question" {
		t.Errorf("got messages %+v, want the system prompt then the question", req.Messages)
	}
	if len(req.Tools) != 1 || req.Tools[0].Function.Name != "search" {
		t.Errorf("got tools %+v, want search", req.Tools)
	}
}

// The calls of one step run at the same time; results go back in call order.
func TestToolCallsRunConcurrentlyResultsInOrder(t *testing.T) {
	t.Parallel()
	srv := serve(t,
		scripted.Turn{ToolCalls: []scripted.ToolCall{callID("a", "slow", `{}`), callID("b", "fast", `{}`)}},
		scripted.Turn{Text: "done"})
	fastDone := make(chan struct{})
	slow := agent.ExecutorFunc(func(ctx context.Context, _ agent.ToolCall) (agent.Result, error) {
		select { // finishes only once fast has: both run at once, slow ends last
		case <-fastDone:
		case <-ctx.Done():
			return agent.Result{}, ctx.Err()
		}
		return agent.Result{Content: json.RawMessage(`"slow"`)}, nil
	})
	cfg := config(t, srv, agent.Tool{Name: "slow", Exec: slow}, agent.Tool{Name: "fast", Exec: fixed(`"fast"`)})
	cfg.Events.ToolResult = func(_ int, c agent.ToolCall, _ agent.Result) {
		if c.Name == "fast" {
			close(fastDone)
		}
	}
	cfg.ToolTimeout = 5 * time.Second
	out := run(t, cfg)
	if got := out.Steps[0].Results; len(got) != 2 || string(got[0].Content) != `"slow"` || string(got[1].Content) != `"fast"` {
		t.Fatalf("got results %+v, want slow then fast", got)
	}
	msgs := toolMessages(t, srv, 1)
	if len(msgs) != 2 || msgs[0].ToolCallID != "a" || msgs[0].Content != `"slow"` || msgs[1].ToolCallID != "b" {
		t.Errorf("got tool messages %+v, want a (slow) then b (fast)", msgs)
	}
	if out.StopReason != agent.StopCompleted || out.Text != "done" {
		t.Errorf("got %s %q, want completed \"done\"", out.StopReason, out.Text)
	}
}

func TestParallelismBoundsRunningCalls(t *testing.T) {
	t.Parallel()
	calls := make([]scripted.ToolCall, 6)
	for i := range calls {
		calls[i] = call("work", `{}`)
	}
	srv := serve(t, scripted.Turn{ToolCalls: calls}, scripted.Turn{Text: "done"})
	// The first call waits until a second runs beside it: two run at once
	// whatever the scheduling, and no more may.
	var running, peak atomic.Int32
	two := make(chan struct{})
	var once sync.Once
	work := agent.ExecutorFunc(func(ctx context.Context, _ agent.ToolCall) (agent.Result, error) {
		defer running.Add(-1)
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		if n == 2 {
			once.Do(func() { close(two) })
		}
		select {
		case <-two:
		case <-ctx.Done():
			return agent.Result{}, ctx.Err()
		}
		return agent.Result{Content: json.RawMessage(`1`)}, nil
	})
	cfg := config(t, srv, agent.Tool{Name: "work", Exec: work})
	cfg.Parallelism = 2
	cfg.ToolTimeout = 10 * time.Second
	run(t, cfg)
	if got := peak.Load(); got != 2 {
		t.Errorf("got %d calls running at once, want 2", got)
	}
}

// Each way a call can fail is an is_error result, and the loop goes on.
func TestFailedCallsBecomeErrorResults(t *testing.T) {
	t.Parallel()
	failing := agent.ExecutorFunc(func(context.Context, agent.ToolCall) (agent.Result, error) {
		return agent.Result{}, errors.New("disk on fire")
	})
	reported := agent.ExecutorFunc(func(context.Context, agent.ToolCall) (agent.Result, error) {
		return agent.Result{Content: json.RawMessage(`{"error":"no such lamp"}`), IsError: true}, nil
	})
	hanging := agent.ExecutorFunc(func(ctx context.Context, _ agent.ToolCall) (agent.Result, error) {
		<-ctx.Done()
		return agent.Result{}, ctx.Err()
	})
	notJSON := agent.ExecutorFunc(func(context.Context, agent.ToolCall) (agent.Result, error) {
		return agent.Result{Content: json.RawMessage(`lamps`)}, nil
	})
	tests := []struct {
		name string
		call scripted.ToolCall
		want string
	}{
		{"missing tool lists the tools", call("nope", `{}`), `there is no tool "nope"; the tools are: search, fails, reports, hangs, describes, garbles`},
		{"arguments not JSON", call("search", `"{\"q\": "`), "are not valid JSON"},
		{"arguments not an object", call("search", `[1, 2]`), "not an object"},
		{"arguments fail the schema", call("search", `{"q": 3}`), "at /q: got number, want string"},
		{"argument missing", call("search", `{}`), "missing property 'q'"},
		{"number past float64", call("search", `{"q": 1e400}`), "at /q: got number, want string"},
		{"arguments null", call("search", `null`), "not an object"},
		{"unknown argument", call("search", `{"q": "x", "r": 1}`), "additional properties 'r' not allowed"},
		{"tool fails", call("fails", `{}`), "disk on fire"},
		{"tool reports an error", call("reports", `{}`), "no such lamp"},
		{"tool times out", call("hangs", `{}`), `tool "hangs" timed out after 50ms`},
		{"no executor", call("describes", `{}`), `tool "describes" only describes itself`},
		{"content not JSON", call("garbles", `{}`), "not JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := serve(t, scripted.Turn{ToolCalls: []scripted.ToolCall{tc.call}}, scripted.Turn{Text: "sorry"})
			search := &counting{}
			cfg := config(t, srv,
				agent.Tool{Name: "search", Parameters: json.RawMessage(objectSchema), Exec: search},
				agent.Tool{Name: "fails", Exec: failing},
				agent.Tool{Name: "reports", Exec: reported},
				agent.Tool{Name: "hangs", Exec: hanging, Timeout: 50 * time.Millisecond},
				agent.Tool{Name: "describes"},
				agent.Tool{Name: "garbles", Exec: notJSON})
			var posts atomic.Int32
			cfg.Hooks.PostToolCall = func(_ context.Context, _ int, _ agent.ToolCall, r agent.Result) (agent.Result, error) {
				posts.Add(1)
				return r, nil
			}
			out := run(t, cfg)
			if len(out.Steps) != 2 || out.Text != "sorry" {
				t.Fatalf("got %d steps, text %q; want the loop to go on to the answer", len(out.Steps), out.Text)
			}
			wantError(t, out.Steps[0].Results[0], tc.want)
			if search.n() != 0 {
				t.Errorf("search ran %d times, want 0", search.n())
			}
			msgs := toolMessages(t, srv, 1)
			if len(msgs) != 1 || !strings.Contains(msgs[0].Content, `"error"`) {
				t.Errorf("got tool messages %+v, want the error result", msgs)
			}
			// Post-tool-call sees results of tools that ran, failed or not.
			ran := tc.call.Name == "fails" || tc.call.Name == "reports" || tc.call.Name == "hangs" || tc.call.Name == "garbles"
			if got := posts.Load(); (got == 1) != ran {
				t.Errorf("post-tool-call ran %d times, want it to run: %v", got, ran)
			}
		})
	}
}

// A step cut off at its length limit sends error results and runs nothing.
func TestLengthStopSendsErrorResults(t *testing.T) {
	t.Parallel()
	srv := serve(t, scripted.Turn{ToolCalls: []scripted.ToolCall{call("search", `{"q": "lamps"}`)}, FinishReason: "length"},
		scripted.Turn{Text: "ok"})
	search := &counting{}
	cfg := config(t, srv, agent.Tool{Name: "search", Exec: search})
	cfg.Hooks.PreToolCall = func(context.Context, int, agent.ToolCall) (agent.PreToolCall, error) {
		t.Error("pre-tool-call ran for a call cut off at the length limit")
		return agent.PreToolCall{}, nil
	}
	out := run(t, cfg)
	if out.Steps[0].FinishReason != model.FinishLength {
		t.Fatalf("got finish reason %q, want length", out.Steps[0].FinishReason)
	}
	wantError(t, out.Steps[0].Results[0], "length limit")
	if search.n() != 0 {
		t.Errorf("search ran %d times, want 0", search.n())
	}
	if out.Text != "ok" {
		t.Errorf("got text %q, want the loop to go on", out.Text)
	}
}

func TestStopConditions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		stop      agent.StopCondition
		wantSteps int
		want      agent.StopReason
	}{
		{"default is max steps 10", nil, agent.DefaultMaxSteps, agent.StopConditionMet},
		{"max steps 3", agent.MaxSteps(3), 3, agent.StopConditionMet},
		{"has tool call final", agent.HasToolCall("final"), 3, agent.StopConditionMet},
		{"has any tool call", agent.HasToolCall(), 1, agent.StopConditionMet},
		{"and", agent.And(agent.MaxSteps(2), agent.HasToolCall("final")), 3, agent.StopConditionMet},
		{"or", agent.Or(agent.MaxSteps(2), agent.HasToolCall("final")), 2, agent.StopConditionMet},
		{"not", agent.Not(agent.HasToolCall("search")), 3, agent.StopConditionMet},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// search, search, final, then search forever.
			srv := serveScript(t, scripted.Script{Turns: []scripted.Turn{
				{ToolCalls: []scripted.ToolCall{call("search", `{}`)}},
				{ToolCalls: []scripted.ToolCall{call("search", `{}`)}},
				{ToolCalls: []scripted.ToolCall{call("final", `{}`)}},
				{ToolCalls: []scripted.ToolCall{call("search", `{}`)}},
			}, Loop: true})
			final := &counting{}
			cfg := config(t, srv, agent.Tool{Name: "search", Exec: fixed(`[]`)}, agent.Tool{Name: "final", Exec: final})
			cfg.Stop = tc.stop
			out := run(t, cfg)
			if len(out.Steps) != tc.wantSteps || out.StopReason != tc.want {
				t.Errorf("got %d steps, %s; want %d, %s", len(out.Steps), out.StopReason, tc.wantSteps, tc.want)
			}
			// The step that matched ran its tools.
			if last := out.Steps[len(out.Steps)-1]; len(last.Results) != len(last.ToolCalls) || last.Results[0].IsError {
				t.Errorf("got last step results %+v, want its tools run", last.Results)
			}
		})
	}
}

func TestStopConditionCombinators(t *testing.T) {
	t.Parallel()
	steps := []agent.Step{{ToolCalls: []agent.ToolCall{{Name: "a"}}}, {ToolCalls: []agent.ToolCall{{Name: "b"}}}}
	yes, no := agent.MaxSteps(2), agent.MaxSteps(3)
	tests := []struct {
		name string
		c    agent.StopCondition
		want bool
	}{
		{"max steps at the limit", agent.MaxSteps(2), true},
		{"max steps one past", agent.MaxSteps(3), false},
		{"has tool call of the last step", agent.HasToolCall("b"), true},
		{"has tool call of an earlier step", agent.HasToolCall("a"), false},
		{"has tool call, any of names", agent.HasToolCall("x", "b"), true},
		{"has any tool call", agent.HasToolCall(), true},
		{"and both", agent.And(yes, yes), true},
		{"and one", agent.And(yes, no), false},
		{"and none", agent.And(), true},
		{"or one", agent.Or(no, yes), true},
		{"or neither", agent.Or(no, no), false},
		{"or none", agent.Or(), false},
		{"not yes", agent.Not(yes), false},
		{"not no", agent.Not(no), true},
	}
	for _, tc := range tests {
		if got := tc.c.Stop(steps); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	if agent.HasToolCall().Stop(nil) {
		t.Error("has tool call of no steps: got true, want false")
	}
}
