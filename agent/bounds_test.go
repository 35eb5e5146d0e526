package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exprd/exprd/agent"
	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/model/scripted"
)

// calls is n calls of tool name, the model leaving their ids out.
func calls(n int, name string) []scripted.ToolCall {
	out := make([]scripted.ToolCall, n)
	for i := range out {
		out[i] = call(name, `{}`)
	}
	return out
}

// errorText is the text of an error result.
func errorText(t *testing.T, r agent.Result) string {
	t.Helper()
	var body struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(r.Content, &body); err != nil || !r.IsError {
		t.Fatalf("got result %s (is_error %v), want an error result", r.Content, r.IsError)
	}
	return body.Error
}

// A step runs at most MaxCallsPerStep calls: at the limit every call runs;
// past it the first MaxCallsPerStep run, the next is one error result
// saying how many the reply made, and the others are in neither the step
// nor the history the next request carries.
func TestCallsPerStepBounded(t *testing.T) {
	t.Parallel()
	const most = 3
	tests := []struct {
		name      string
		calls     int
		wantKept  int    // calls in the step and the history
		wantError string // the last kept call's error, "" for none
	}{
		{"under the limit", most - 1, most - 1, ""},
		{"at the limit", most, most, ""},
		{"one past the limit", most + 1, most + 1, "the reply made 4 tool calls, over the limit of 3 a step: the first 3 ran, this one and the 0 after it did not"},
		{"far past the limit", 600, most + 1, "the reply made 600 tool calls, over the limit of 3 a step: the first 3 ran, this one and the 596 after it did not"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := serve(t, scripted.Turn{ToolCalls: calls(tc.calls, "search")}, scripted.Turn{Text: "done"})
			search := &counting{}
			cfg := config(t, srv, agent.Tool{Name: "search", Exec: search})
			cfg.MaxCallsPerStep = most
			var mu sync.Mutex
			var announced, answered int
			cfg.Events.ToolCallRequested = func(int, agent.ToolCall) { mu.Lock(); announced++; mu.Unlock() }
			cfg.Events.ToolResult = func(int, agent.ToolCall, agent.Result) { mu.Lock(); answered++; mu.Unlock() }
			out := run(t, cfg)
			if got := search.n(); got != min(tc.calls, most) {
				t.Errorf("search ran %d times, want %d", got, min(tc.calls, most))
			}
			s := out.Steps[0]
			if len(s.ToolCalls) != tc.wantKept || len(s.Results) != tc.wantKept || announced != tc.wantKept || answered != tc.wantKept {
				t.Fatalf("got %d calls, %d results, %d announced, %d answered; want %d each", len(s.ToolCalls), len(s.Results), announced, answered, tc.wantKept)
			}
			last := s.Results[tc.wantKept-1]
			if tc.wantError == "" {
				if last.IsError {
					t.Errorf("got %s, want every call to run", last.Content)
				}
			} else if got := errorText(t, last); !strings.HasPrefix(got, tc.wantError) {
				t.Errorf("got %q, want %q", got, tc.wantError)
			}
			// The next request answers each call the history keeps.
			req := srv.Requests()[1].Chat
			assistant := req.Messages[1]
			if len(assistant.ToolCalls) != tc.wantKept || len(toolMessages(t, srv, 1)) != tc.wantKept {
				t.Errorf("the history holds %d calls and %d results, want %d each", len(assistant.ToolCalls), len(toolMessages(t, srv, 1)), tc.wantKept)
			}
		})
	}
}

// A stop condition that never matches still ends: StepLimit bounds the
// steps whatever Stop says, at the limit and one past it.
func TestStepLimitBoundsEveryCondition(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		stop      agent.StopCondition
		limit     int
		wantSteps int
	}{
		{"never stops", agent.HasToolCall("never"), 3, 3},
		{"not of a condition", agent.Not(agent.HasToolCall()), 2, 2},
		{"max steps at the limit", agent.MaxSteps(3), 3, 3},
		{"max steps past the limit", agent.MaxSteps(4), 3, 3},
		{"max steps under the limit", agent.MaxSteps(2), 3, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := serveScript(t, scripted.Script{Loop: true, Turns: []scripted.Turn{{ToolCalls: calls(1, "search")}}})
			cfg := config(t, srv, agent.Tool{Name: "search", Exec: &counting{}})
			cfg.Stop, cfg.StepLimit = tc.stop, tc.limit
			cfg.TurnTimeout = 10 * time.Second // without the limit, the turn ends here, failing
			out := run(t, cfg)
			if len(out.Steps) != tc.wantSteps || out.StopReason != agent.StopConditionMet {
				t.Errorf("got %d steps (%s), want %d (%s)", len(out.Steps), out.StopReason, tc.wantSteps, agent.StopConditionMet)
			}
			if got := len(srv.Requests()); got != tc.wantSteps {
				t.Errorf("the model got %d requests, want %d", got, tc.wantSteps)
			}
		})
	}
}

// wireBytes is the JSON of a request's messages and tools as the model
// server received them.
func wireBytes(t *testing.T, r scripted.Request) int64 {
	t.Helper()
	var body struct {
		Messages json.RawMessage `json:"messages"`
		Tools    json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	return int64(len(body.Messages) + len(body.Tools))
}

// The history's limit holds by construction: a Config over it fails
// before anything is sent, at the limit the first request is sent, and a
// model that keeps calling tools ends the turn with a *HistoryError before
// the first request that would be over it; the steps before it finished.
// No request the model got is over it, as the model server received it.
func TestHistoryBounded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		room      int64 // the limit less the first request's counted size
		wantStart bool  // the Config itself is over it
		wantReqs  int
	}{
		{"the first request one byte over", -1, true, 0},
		{"the first request at the limit", 0, false, 1},
		{"room for two steps", 4 << 10, false, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			result := fmt.Sprintf(`{"page":%q}`, strings.Repeat("x", 500))
			srv := serveScript(t, scripted.Script{Loop: true, Turns: []scripted.Turn{{Text: "more", ToolCalls: calls(2, "search")}}})
			// Text that JSON escapes: the count must hold for it too.
			cfg := config(t, srv, agent.Tool{Name: "search", Description: "Finds <things> & \u2028 more", Exec: &counting{reply: result}})
			cfg.System = "be \"brief\"\n\x01"
			cfg.Stop = agent.HasToolCall("never")
			cfg.MaxHistoryBytes = counted(t, cfg) + tc.room
			var reserved []int64
			cfg.ReserveHistory = func(_ context.Context, n int64) error { reserved = append(reserved, n); return nil }
			out, err := agent.Run(context.Background(), cfg)
			var he *agent.HistoryError
			if !errors.As(err, &he) || !errors.Is(err, agent.ErrHistoryTooLarge) || out.StopReason != agent.StopHistoryLimit {
				t.Fatalf("got %v (%s), want a *HistoryError (%s)", err, out.StopReason, agent.StopHistoryLimit)
			}
			if he.Start != tc.wantStart || he.Bytes <= he.Limit || he.Limit != cfg.MaxHistoryBytes {
				t.Errorf("got %+v, want start %v, bytes over the limit %d", he, tc.wantStart, cfg.MaxHistoryBytes)
			}
			reqs := srv.Requests()
			if len(reqs) != tc.wantReqs || len(out.Steps) != tc.wantReqs {
				t.Fatalf("got %d requests and %d steps, want %d and a step finished for each: the turn ends before the request over the limit", len(reqs), len(out.Steps), tc.wantReqs)
			}
			if !tc.wantStart && he.Step != tc.wantReqs {
				t.Errorf("got the error of step %d, want step %d, whose request was not sent", he.Step, tc.wantReqs)
			}
			for i, r := range reqs {
				if n := wireBytes(t, r); n > cfg.MaxHistoryBytes {
					t.Errorf("request %d carried %d bytes, over the limit %d", i, n, cfg.MaxHistoryBytes)
				}
			}
			if tc.wantStart {
				if len(reserved) != 0 {
					t.Errorf("reserved %v, want nothing", reserved)
				}
				return
			}
			if len(reserved) == 0 || reserved[0] < wireBytes(t, reqs[0]) {
				t.Errorf("reserved %v, want the first request's %d bytes first", reserved, wireBytes(t, reqs[0]))
			}
			// Reserved as it grew, up to the history the turn ended with
			// (past the limit by the last step's growth), and no more.
			for i := 1; i < len(reserved); i++ {
				if reserved[i] <= reserved[i-1] {
					t.Errorf("reserved %v, want a growing size", reserved)
				}
			}
			// The request's size counts the model's name too: "", 2 bytes.
			if last := reserved[len(reserved)-1]; last != he.Bytes-2 {
				t.Errorf("reserved %v, want the last to be the history the turn ended with, %d", reserved, he.Bytes-2)
			}
		})
	}
}

// counted is the size the loop counts of cfg's first request, from the
// error of a limit of 1.
func counted(t *testing.T, cfg agent.Config) int64 {
	t.Helper()
	cfg.MaxHistoryBytes = 1
	cfg.Provider = model.ProviderFunc(func(context.Context, model.Request) (model.Stream, error) {
		return nil, errors.New("the model must not be asked")
	})
	_, err := agent.Run(context.Background(), cfg)
	var he *agent.HistoryError
	if !errors.As(err, &he) || !he.Start {
		t.Fatalf("got %v, want a *HistoryError at the start", err)
	}
	return he.Bytes
}

// ReserveHistory is asked before the history grows; its refusal ends the
// turn with a *HistoryError wrapping it, and no request is sent past it.
func TestReserveHistoryRefusal(t *testing.T) {
	t.Parallel()
	spent := errors.New("the budget is spent")
	tests := []struct {
		name      string
		refuseAt  int // the reservation refused, from 0
		wantSteps int
		wantReqs  int
	}{
		{"at the start", 0, 0, 0},
		{"the first reply", 1, 0, 1},
		{"the first results", 2, 0, 1},
		{"the second reply", 3, 1, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := serveScript(t, scripted.Script{Loop: true, Turns: []scripted.Turn{{ToolCalls: calls(1, "search")}}})
			cfg := config(t, srv, agent.Tool{Name: "search", Exec: &counting{}})
			cfg.Stop = agent.MaxSteps(5)
			n := 0
			cfg.ReserveHistory = func(context.Context, int64) error {
				defer func() { n++ }()
				if n == tc.refuseAt {
					return spent
				}
				return nil
			}
			out, err := agent.Run(context.Background(), cfg)
			var he *agent.HistoryError
			if !errors.As(err, &he) || !errors.Is(err, spent) || out.StopReason != agent.StopHistoryLimit {
				t.Fatalf("got %v (%s), want a *HistoryError wrapping the refusal", err, out.StopReason)
			}
			if len(out.Steps) != tc.wantSteps || len(srv.Requests()) != tc.wantReqs {
				t.Errorf("got %d steps and %d requests, want %d and %d", len(out.Steps), len(srv.Requests()), tc.wantSteps, tc.wantReqs)
			}
		})
	}
}

// The messages a PrepareStep hook gives a step are within the limit too.
func TestPreparedMessagesBounded(t *testing.T) {
	t.Parallel()
	for _, over := range []bool{false, true} {
		t.Run(fmt.Sprintf("over %v", over), func(t *testing.T) {
			t.Parallel()
			srv := serve(t, scripted.Turn{Text: "done"})
			cfg := config(t, srv)
			big := strings.Repeat("y", 10<<10)
			cfg.MaxHistoryBytes = 10<<10 + 200
			if over {
				big += strings.Repeat("y", 200)
			}
			cfg.Hooks.PrepareStep = func(_ context.Context, p agent.PrepareStep) (agent.PrepareStep, error) {
				p.Messages = []model.Message{model.User(big)}
				return p, nil
			}
			out, err := agent.Run(context.Background(), cfg)
			var he *agent.HistoryError
			switch {
			case !over && err != nil:
				t.Fatalf("got %v, want the turn to run", err)
			case over && (!errors.As(err, &he) || !he.Prepared || he.Step != 0):
				t.Fatalf("got %v, want a *HistoryError of the prepared messages", err)
			case over && len(srv.Requests()) != 0:
				t.Errorf("the model got %d requests, want none", len(srv.Requests()))
			case !over && out.Text != "done":
				t.Errorf("got %q, want done", out.Text)
			}
		})
	}
}

// A missing tool's error result names at most MaxToolsNamed tools, the
// closest first, and stays small whatever the tools' number and names.
func TestMissingToolNamesFewTools(t *testing.T) {
	t.Parallel()
	many := func(n, size int) []agent.Tool {
		out := make([]agent.Tool, n)
		for i := range out {
			name := fmt.Sprintf("tool_%04d_", i)
			out[i] = agent.Tool{Name: name + strings.Repeat("n", max(0, size-len(name)))}
		}
		return out
	}
	named := func(names ...string) []agent.Tool {
		var out []agent.Tool
		for _, n := range names {
			out = append(out, agent.Tool{Name: n})
		}
		return out
	}
	tests := []struct {
		name   string
		tools  []agent.Tool
		called string
		want   string
	}{
		{"at most MaxToolsNamed: all", named("a", "b", "c", "d", "e", "f", "g", "h"), "x",
			`there is no tool "x"; the tools are: a, b, c, d, e, f, g, h`},
		{"one more: the first and how many more", named("a", "b", "c", "d", "e", "f", "g", "h", "i"), "xyzzy",
			`there is no tool "xyzzy"; the tools are: a, b, c, d, e, f, g, h and 1 more`},
		{"the closest first", append(many(100, 0), named("search", "research", "Serac", "searches")...), "serach",
			`there is no tool "serach"; the closest of the 104 tools: Serac, search`},
		{"a prefix is close", append(many(20, 0), named("math_add", "math_multiply", "mathematics")...), "math",
			`there is no tool "math"; the closest of the 23 tools: math_add, math_multiply, mathematics`},
		{"case is ignored", append(many(20, 0), named("Lookup")...), "lookup",
			`there is no tool "lookup"; the closest of the 21 tools: Lookup`},
		{"long names are cut", many(4000, 1000), strings.Repeat("z", 5000),
			`there is no tool "` + strings.Repeat("z", agent.MaxNameBytes) + `…"; the tools are: tool_0000_` + strings.Repeat("n", agent.MaxNameBytes-10) + "…, "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := serve(t, scripted.Turn{ToolCalls: calls(3, tc.called)}, scripted.Turn{Text: "sorry"})
			cfg := config(t, srv, tc.tools...)
			out := run(t, cfg)
			for _, r := range out.Steps[0].Results {
				got := errorText(t, r)
				if got != tc.want && !(tc.name == "long names are cut" && strings.HasPrefix(got, tc.want)) {
					t.Errorf("got %q, want %q", got, tc.want)
				}
				if len(got) > agent.MaxErrorBytes || len(r.Content) > 2*agent.MaxErrorBytes {
					t.Errorf("got %d bytes of text, %d of JSON; want at most %d", len(got), len(r.Content), agent.MaxErrorBytes)
				}
			}
		})
	}
}

// An error result's text is at most MaxErrorBytes: at the limit it is as
// it was, one past it is cut and says how much was left out.
func TestErrorResultBounded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		msg  string
		cut  bool
	}{
		{"at the limit", strings.Repeat("e", agent.MaxErrorBytes), false},
		{"one past it", strings.Repeat("e", agent.MaxErrorBytes+1), true},
		{"far past it, runes", strings.Repeat("é", agent.MaxErrorBytes), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := errorText(t, agent.ErrorResult(tc.msg))
			switch {
			case len(got) > agent.MaxErrorBytes:
				t.Errorf("got %d bytes, want at most %d", len(got), agent.MaxErrorBytes)
			case !tc.cut && got != tc.msg:
				t.Errorf("got %d bytes, want the text as it was", len(got))
			case tc.cut && !strings.HasSuffix(got, " more bytes)"):
				t.Errorf("got %q, want it to say how much was cut", got[len(got)-40:])
			case tc.cut && !strings.HasPrefix(tc.msg, got[:max(strings.LastIndex(got, " … ("), 0)]):
				t.Errorf("got %q, want a prefix of the text", got[:40])
			}
			// An executor's long error is cut the same way.
			srv := serve(t, scripted.Turn{ToolCalls: calls(1, "fails")}, scripted.Turn{Text: "sorry"})
			cfg := config(t, srv, agent.Tool{Name: "fails", Exec: agent.ExecutorFunc(func(context.Context, agent.ToolCall) (agent.Result, error) {
				return agent.Result{}, errors.New(tc.msg)
			})})
			if r := errorText(t, run(t, cfg).Steps[0].Results[0]); r != got {
				t.Errorf("the executor's error became %d bytes, want %d", len(r), len(got))
			}
		})
	}
}

// The model's name is sent with every request, and counted with it: the
// Config's, and the one a PrepareStep hook gives a step.
func TestModelNameCountsInTheRequest(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("m", 20<<10)
	for _, fromHook := range []bool{false, true} {
		t.Run(fmt.Sprintf("from the hook %v", fromHook), func(t *testing.T) {
			t.Parallel()
			srv := serve(t, scripted.Turn{Text: "done"})
			cfg := config(t, srv)
			cfg.MaxHistoryBytes = 10 << 10
			if fromHook {
				cfg.Hooks.PrepareStep = func(_ context.Context, p agent.PrepareStep) (agent.PrepareStep, error) {
					p.Model = long
					return p, nil
				}
			} else {
				cfg.Model = long
			}
			_, err := agent.Run(context.Background(), cfg)
			var he *agent.HistoryError
			if !errors.As(err, &he) || he.Start == fromHook || he.Bytes < 20<<10 {
				t.Fatalf("got %v, want a *HistoryError counting the name", err)
			}
			if n := len(srv.Requests()); n != 0 {
				t.Errorf("the model got %d requests, want none", n)
			}
		})
	}
}
