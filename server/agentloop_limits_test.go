package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/exprd/exprd/agent"
	"github.com/exprd/exprd/codemode"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/membudget"
	"github.com/exprd/exprd/model/scripted"
	"github.com/exprd/exprd/server"
	"github.com/exprd/exprd/turnstore"
)

// reasonOf is the reason of st's ErrorInfo, or "".
func reasonOf(st *status.Status) string {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return ""
}

// sameCalls is n calls of tool name, without ids.
func sameCalls(n int, name string) []scripted.ToolCall {
	out := make([]scripted.ToolCall, n)
	for i := range out {
		out[i] = scripted.ToolCall{Name: name}
	}
	return out
}

// declared is n tools without executors, each named with size bytes.
func declared(n, size int) []*exprdv1.AgentTool {
	out := make([]*exprdv1.AgentTool, n)
	for i := range out {
		name := fmt.Sprintf("t%05d_", i)
		out[i] = &exprdv1.AgentTool{Name: name + strings.Repeat("n", max(0, size-len(name)))}
	}
	return out
}

// A hostile model's reply of 600 calls of a tool that does not exist, in
// a turn that declares 2,000 tools of 200-byte names: the step runs
// DefaultAgentMaxCallsPerStep of them and answers one more saying how
// many the reply made; each error result names at most
// agent.MaxToolsNamed tools and is at most agent.MaxErrorBytes. Without
// the bounds each of the 600 results listed every name: 400 KB each, 240
// MB for the turn.
func TestAgentLoopMissingToolFlood(t *testing.T) {
	t.Parallel()
	const calls, tools = 600, 2000
	c := agentServer(t, scripted.Turn{ToolCalls: sameCalls(calls, "nope")}, scripted.Turn{Text: "sorry"})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	stream := startAgent(t, c, &exprdv1.AgentStart{Messages: userMsg("go"), Tools: declared(tools, 200)})
	var results, bytes, largest int
	var over string // the result of the first call past the limit
	_, err := drain(stream, func(m *exprdv1.AgentLoopRunResponse) {
		if r := m.GetToolResult(); r != nil {
			results++
			bytes += len(r.GetOutputJson())
			largest = max(largest, len(r.GetOutputJson()))
			if r.GetCallId() == fmt.Sprintf("call_0_%d", server.DefaultAgentMaxCallsPerStep) {
				over = r.GetOutputJson()
			}
		}
	})
	runtime.ReadMemStats(&after)
	t.Logf("%d calls of a missing tool among %d: %d results, %d bytes (largest %d); %d MB allocated in the test's process",
		calls, tools, results, bytes, largest, (after.TotalAlloc-before.TotalAlloc)>>20)
	if err != nil {
		t.Fatal(err)
	}
	if want := server.DefaultAgentMaxCallsPerStep + 1; results != want {
		t.Errorf("got %d results, want %d", results, want)
	}
	if largest > 2*agent.MaxErrorBytes {
		t.Errorf("the largest result is %d bytes, want at most %d", largest, 2*agent.MaxErrorBytes)
	}
	if want := fmt.Sprintf("the reply made %d tool calls, over the limit of %d a step", calls, server.DefaultAgentMaxCallsPerStep); !strings.Contains(over, want) {
		t.Errorf("the result past the limit is %s, want it to say %q", over, want)
	}
}

// agentEnd runs a turn to its end: the stream's error (nil after done),
// the steps done reports and the tool results sent.
func agentEnd(t *testing.T, c exprdv1.AgentLoopClient, start *exprdv1.AgentStart) (*status.Status, int, int) {
	t.Helper()
	var steps, results int
	_, err := drain(startAgent(t, c, start), func(m *exprdv1.AgentLoopRunResponse) {
		if m.GetToolResult() != nil {
			results++
		}
		if d := m.GetDone(); d != nil {
			steps = len(d.GetSteps())
		}
	})
	return status.Convert(err), steps, results
}

// requestBytes is the JSON of the messages and tools of a request the
// model server got.
func requestBytes(t *testing.T, r scripted.Request) int64 {
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

var countedBytes = regexp.MustCompile(`are (\d+) bytes of JSON`)

// A model that keeps calling tools ends its turn once the next request
// would carry more than --agent-max-history-bytes: RESOURCE_EXHAUSTED,
// QuotaFailure max_history_bytes; no request it was sent is over the
// limit, and the history's memory is reserved from the budget and given
// back when the turn ends. A start over the limit is refused at once, at
// the limit it runs.
func TestAgentLoopHistoryLimit(t *testing.T) {
	t.Parallel()
	const limit = 64 << 10
	start := func() *exprdv1.AgentStart {
		return &exprdv1.AgentStart{Messages: userMsg("go"), System: "Call <tools> & \"more\".\n",
			Tools: []*exprdv1.AgentTool{{Name: "look", Description: "Looks."}},
			Stop:  &exprdv1.StopCondition{Cond: &exprdv1.StopCondition_HasToolCall{HasToolCall: "never"}}}
	}
	// The size the server counts of the start, from its refusal at a
	// limit of 1 byte.
	c := agentServerWith(t, scripted.Script{Turns: []scripted.Turn{{Text: "unused"}}}, server.WithAgentLimits(server.AgentLimits{MaxHistoryBytes: 1}))
	st, _, _ := agentEnd(t, c, start())
	m := countedBytes.FindStringSubmatch(st.Message())
	if st.Code() != codes.ResourceExhausted || m == nil {
		t.Fatalf("got %v, want RESOURCE_EXHAUSTED counting the start", st)
	}
	first, _ := strconv.ParseInt(m[1], 10, 64)

	text := strings.Repeat("I will look again. ", 50) // about 1 KB a step
	tests := []struct {
		name      string
		limit     int64
		wantSteps bool // steps were made before the limit ended the turn
		wantReqs  int  // -1: some
	}{
		{"the start one byte over", first - 1, false, 0},
		{"the start at the limit", first, true, 1},
		{"a model that keeps calling tools", limit, true, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			budget := membudget.New(256<<20, 10*time.Millisecond)
			// A turn store of its own, outside the budget: the events it
			// keeps for resume after the turn are not the turn's memory
			// (turnstore's tests hold them to a budget).
			store, err := turnstore.NewMemory(turnstore.MemoryConfig{Limits: turnstore.DefaultLimits()})
			if err != nil {
				t.Fatal(err)
			}
			c, ms := agentServerModel(t, scripted.Script{Loop: true, Turns: []scripted.Turn{{Text: text, ToolCalls: sameCalls(4, "look")}}},
				server.WithAgentLimits(server.AgentLimits{MaxHistoryBytes: tc.limit}), server.WithMemoryBudget(budget), server.WithTurnStore(store))
			idle := budget.InUse() // the overdraft the server keeps for received messages
			st, _, results := agentEnd(t, c, start())
			if st.Code() != codes.ResourceExhausted || quotaSubject(st) != "max_history_bytes" || reasonOf(st) != "QUOTA_EXCEEDED" {
				t.Fatalf("got %v (%q, %q), want RESOURCE_EXHAUSTED, QuotaFailure max_history_bytes, QUOTA_EXCEEDED", st, quotaSubject(st), reasonOf(st))
			}
			reqs := ms.Requests()
			if tc.wantReqs >= 0 && len(reqs) != tc.wantReqs || tc.wantReqs < 0 && len(reqs) < 3 {
				t.Errorf("the model got %d requests, want %d", len(reqs), tc.wantReqs)
			}
			if (results > 0) != tc.wantSteps {
				t.Errorf("got %d tool results, want some: %v", results, tc.wantSteps)
			}
			var largest int64
			for i, r := range reqs {
				n := requestBytes(t, r)
				largest = max(largest, n)
				if n > tc.limit {
					t.Errorf("request %d carried %d bytes of messages and tools, over the limit %d", i, n, tc.limit)
				}
			}
			if tc.wantReqs < 0 {
				t.Logf("%d requests, the largest %d bytes of the %d allowed; %s", len(reqs), largest, tc.limit, st.Message())
				if largest < tc.limit/2 {
					t.Errorf("the largest request is %d bytes, want the limit (%d) nearly reached", largest, tc.limit)
				}
			}
			// The handler has returned: its reservations are given back.
			deadline := time.Now().Add(5 * time.Second)
			for budget.InUse() != idle && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if n := budget.InUse() - idle; n != 0 {
				t.Errorf("%d bytes of the memory budget are still reserved after the turn", n)
			}
		})
	}
}

// A history the memory budget cannot hold ends the turn
// RESOURCE_EXHAUSTED, QuotaFailure memory_budget, once it would grow past
// what the budget holds.
func TestAgentLoopHistoryOverMemoryBudget(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("x", 16<<10)
	budget := membudget.New(2<<20, 10*time.Millisecond)
	c, ms := agentServerModel(t, scripted.Script{Loop: true, Turns: []scripted.Turn{{Text: text, ToolCalls: sameCalls(1, "look")}}},
		server.WithMemoryBudget(budget))
	st, _, _ := agentEnd(t, c, &exprdv1.AgentStart{Messages: userMsg("go"), Tools: []*exprdv1.AgentTool{{Name: "look"}},
		Stop: &exprdv1.StopCondition{Cond: &exprdv1.StopCondition_MaxSteps{MaxSteps: 100}}})
	if st.Code() != codes.ResourceExhausted || quotaSubject(st) != "memory_budget" || reasonOf(st) != "MEMORY_BUDGET" {
		t.Fatalf("got %v (%q, %q), want RESOURCE_EXHAUSTED, memory_budget", st, quotaSubject(st), reasonOf(st))
	}
	if !strings.Contains(st.Message(), "the turn's history") {
		t.Errorf("got %q, want it to name the turn's history", st.Message())
	}
	if n := len(ms.Requests()); n < 2 || n >= 100 {
		t.Errorf("the model got %d requests, want the turn ended by the budget", n)
	}
}

// Each of AgentLoop's maxima, at the limit and one past it: past is
// INVALID_ARGUMENT with a BadRequest naming the field; at the limit the
// turn runs. An unset timeout is the default, or the maximum when that is
// lower; every stop condition ends after the maximum of steps.
func TestAgentLoopMaxima(t *testing.T) {
	t.Parallel()
	limits := server.AgentLimits{MaxSteps: 3, MaxToolTimeout: 2 * time.Second, MaxStepTimeout: 3 * time.Second, MaxTurnTimeout: 4 * time.Second, MaxCallsPerStep: 2}
	maxSteps := func(n uint32) *exprdv1.StopCondition {
		return &exprdv1.StopCondition{Cond: &exprdv1.StopCondition_MaxSteps{MaxSteps: n}}
	}
	or := func(cs ...*exprdv1.StopCondition) *exprdv1.StopCondition {
		return &exprdv1.StopCondition{Cond: &exprdv1.StopCondition_Or{Or: &exprdv1.StopConditions{Conditions: cs}}}
	}
	never := &exprdv1.StopCondition{Cond: &exprdv1.StopCondition_HasToolCall{HasToolCall: "never"}}
	tests := []struct {
		name      string
		set       func(*exprdv1.AgentStart)
		wantField string // "" for a turn that runs to done
		wantSteps int
	}{
		{"max_steps at the limit", func(s *exprdv1.AgentStart) { s.Stop = maxSteps(3) }, "", 3},
		{"max_steps one past", func(s *exprdv1.AgentStart) { s.Stop = maxSteps(4) }, "start.stop.max_steps", 0},
		{"a nested max_steps one past", func(s *exprdv1.AgentStart) {
			s.Stop = or(never, &exprdv1.StopCondition{Cond: &exprdv1.StopCondition_Not{Not: maxSteps(4)}})
		},
			"start.stop.or.conditions[1].not.max_steps", 0},
		{"a condition that never stops", func(s *exprdv1.AgentStart) { s.Stop = never }, "", 3},
		{"tool_timeout_ms at the limit", func(s *exprdv1.AgentStart) { s.ToolTimeoutMs = 2000 }, "", 3},
		{"tool_timeout_ms one past", func(s *exprdv1.AgentStart) { s.ToolTimeoutMs = 2001 }, "start.tool_timeout_ms", 0},
		{"a tool's timeout_ms at the limit", func(s *exprdv1.AgentStart) { s.Tools[0].TimeoutMs = 2000 }, "", 3},
		{"a tool's timeout_ms one past", func(s *exprdv1.AgentStart) { s.Tools[0].TimeoutMs = 2001 }, "start.tools[0].timeout_ms", 0},
		{"step_timeout_ms at the limit", func(s *exprdv1.AgentStart) { s.StepTimeoutMs = 3000 }, "", 3},
		{"step_timeout_ms one past", func(s *exprdv1.AgentStart) { s.StepTimeoutMs = 3001 }, "start.step_timeout_ms", 0},
		{"turn_timeout_ms at the limit", func(s *exprdv1.AgentStart) { s.TurnTimeoutMs = 4000 }, "", 3},
		{"turn_timeout_ms one past", func(s *exprdv1.AgentStart) { s.TurnTimeoutMs = 4001 }, "start.turn_timeout_ms", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, ms := agentServerModel(t, scripted.Script{Loop: true, Turns: []scripted.Turn{{ToolCalls: sameCalls(1, "look")}}}, server.WithAgentLimits(limits))
			start := &exprdv1.AgentStart{Messages: userMsg("go"), Tools: []*exprdv1.AgentTool{{Name: "look"}}}
			tc.set(start)
			st, steps, _ := agentEnd(t, c, start)
			if tc.wantField != "" {
				if st.Code() != codes.InvalidArgument || badRequestField(st) != tc.wantField || reasonOf(st) != "INVALID_FIELD" {
					t.Fatalf("got %v (field %q), want INVALID_ARGUMENT naming %s", st, badRequestField(st), tc.wantField)
				}
				if !strings.Contains(st.Message(), "above the server's maximum") {
					t.Errorf("got %q, want it to name the server's maximum", st.Message())
				}
				if n := len(ms.Requests()); n != 0 {
					t.Errorf("the model got %d requests, want none", n)
				}
				return
			}
			if st.Code() != codes.OK || steps != tc.wantSteps {
				t.Fatalf("got %v after %d steps, want done after %d", st, steps, tc.wantSteps)
			}
		})
	}
}

// A timeout left out takes the default, or the server's maximum when
// that is lower: a step timeout of 300 ms ends a model call of 2 s.
func TestAgentLoopDefaultTimeoutWithinMaximum(t *testing.T) {
	t.Parallel()
	c := agentServerWith(t, scripted.Script{Turns: []scripted.Turn{{Text: "late", DelayMS: 2000}}},
		server.WithAgentLimits(server.AgentLimits{MaxStepTimeout: 300 * time.Millisecond}))
	st, _, _ := agentEnd(t, c, &exprdv1.AgentStart{Messages: userMsg("go")})
	if st.Code() != codes.DeadlineExceeded || reasonOf(st) != "STEP_TIMEOUT" {
		t.Fatalf("got %v (%q), want DEADLINE_EXCEEDED, STEP_TIMEOUT", st, reasonOf(st))
	}
}

// A step runs at most --agent-max-calls-per-step calls, through gRPC: at
// the limit every call runs; one past, the extra one is an error result.
func TestAgentLoopCallsPerStep(t *testing.T) {
	t.Parallel()
	for _, n := range []int{2, 3} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			t.Parallel()
			c := agentServerWith(t, scripted.Script{Turns: []scripted.Turn{{ToolCalls: sameCalls(n, "math_add")}, {Text: "done"}}},
				server.WithAgentLimits(server.AgentLimits{MaxCallsPerStep: 2}))
			var results []*exprdv1.ToolResult
			_, err := drain(startAgent(t, c, &exprdv1.AgentStart{Messages: userMsg("go"),
				Tools: []*exprdv1.AgentTool{{Name: "math_add", Executor: exprdv1.AgentTool_EXECUTOR_UTCP, UtcpTool: "math.add"}}}),
				func(m *exprdv1.AgentLoopRunResponse) {
					if r := m.GetToolResult(); r != nil {
						results = append(results, r)
					}
				})
			if err != nil {
				t.Fatal(err)
			}
			if len(results) != n {
				t.Fatalf("got %d results, want %d", len(results), n)
			}
			errors := 0
			for _, r := range results {
				if r.GetIsError() && strings.Contains(r.GetOutputJson(), "over the limit of 2 a step") {
					errors++
				}
			}
			if want := n - 2; errors != want {
				t.Errorf("got %d results over the limit, want %d: %v", errors, want, results)
			}
		})
	}
}

// CodeMode's timeout_ms has a server maximum, for Execute, Run and
// CallTool: at the limit the run goes on, one past it is INVALID_ARGUMENT
// naming the field.
func TestCodeModeTimeoutMaximum(t *testing.T) {
	t.Parallel()
	const most = 5 * time.Second
	notHandled := scripted.Turn{Text: `{"handled": false, "tools": [], "code": ""}`}
	c := codeModeServerWith(t, []scripted.Turn{notHandled}, server.WithCodeModeMaxTimeout(most))
	at, past := uint32(most.Milliseconds()), uint32(most.Milliseconds())+1
	type call func(ms uint32) error
	tests := []struct {
		name  string
		field string
		call  call
	}{
		{"Execute", "timeout_ms", func(ms uint32) error {
			resp, err := c.Execute(context.Background(), &exprdv1.ExecuteRequest{Code: "1 + 1", TimeoutMs: ms})
			if err == nil && resp.GetValueJson() != "2" {
				return fmt.Errorf("got %v, want 2", resp)
			}
			return err
		}},
		{"Run", "start.timeout_ms", func(ms uint32) error {
			stream, err := c.Run(context.Background())
			if err != nil {
				return err
			}
			if err := stream.Send(&exprdv1.RunRequest{Msg: &exprdv1.RunRequest_Start{Start: &exprdv1.RunStart{Source: &exprdv1.RunStart_Code{Code: "1 + 1"}, TimeoutMs: ms}}}); err != nil {
				return err
			}
			m, err := stream.Recv()
			if err == nil && m.GetResult().GetValueJson() != "2" {
				return fmt.Errorf("got %v, want the result 2", m)
			}
			return err
		}},
		{"CallTool", "timeout_ms", func(ms uint32) error {
			resp, err := c.CallTool(context.Background(), &exprdv1.CallToolRequest{Prompt: "Say hello.", TimeoutMs: ms})
			if err == nil && resp.GetHandled() {
				return fmt.Errorf("got %v, want not handled", resp)
			}
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(at); err != nil {
				t.Errorf("at the limit: %v", err)
			}
			st := status.Convert(tc.call(past))
			if st.Code() != codes.InvalidArgument || badRequestField(st) != tc.field || !strings.Contains(st.Message(), "above the server's maximum of 5000 ms") {
				t.Errorf("one past: got %v (field %q), want INVALID_ARGUMENT naming %s", st, badRequestField(st), tc.field)
			}
		})
	}
	if codemode.DefaultMaxTimeout < codemode.DefaultTimeout {
		t.Errorf("the default maximum %s is under the default timeout %s", codemode.DefaultMaxTimeout, codemode.DefaultTimeout)
	}
}

// start.max_history_bytes bounds a turn's history below the server's
// --agent-max-history-bytes: at the server's bound it runs, one past it
// is refused, and a bound the start is over ends the turn as the
// server's would.
func TestAgentLoopStartMaxHistoryBytes(t *testing.T) {
	t.Parallel()
	const limit = 64 << 10
	c := agentServerWith(t, scripted.Script{Loop: true, Turns: []scripted.Turn{{Text: "Done."}}}, server.WithAgentLimits(server.AgentLimits{MaxHistoryBytes: limit}))
	for _, tc := range []struct {
		name   string
		max    uint64
		code   codes.Code
		detail string // the BadRequest's field, or the QuotaFailure's subject
	}{
		{"unset: the server's bound", 0, codes.OK, ""},
		{"at the server's bound", limit, codes.OK, ""},
		{"one past the server's bound", limit + 1, codes.InvalidArgument, "start.max_history_bytes"},
		{"under the start's size", 10, codes.ResourceExhausted, "max_history_bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := drain(startAgent(t, c, &exprdv1.AgentStart{Messages: userMsg("Say done."), MaxHistoryBytes: tc.max}), nil)
			st := status.Convert(err)
			switch {
			case st.Code() != tc.code:
				t.Fatalf("got %v, want %v", err, tc.code)
			case tc.code == codes.InvalidArgument:
				wantStatus(t, err, tc.code, tc.detail)
			case tc.code == codes.ResourceExhausted && quotaSubject(st) != tc.detail:
				t.Fatalf("got %v (quota %q), want subject %s", err, quotaSubject(st), tc.detail)
			}
		})
	}
}
