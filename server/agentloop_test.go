package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/exprd/exprd/demo"
	"github.com/exprd/exprd/demo/providers"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/model/scripted"
	"github.com/exprd/exprd/server"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/utcpall"
)

type agentClient = grpc.BidiStreamingClient[exprdv1.AgentLoopRunRequest, exprdv1.AgentLoopRunResponse]

// agentServer serves AgentLoop with the scripted model (the given turns),
// the math provider and the demo products as the initial state.
func agentServer(t *testing.T, turns ...scripted.Turn) exprdv1.AgentLoopClient {
	t.Helper()
	return agentServerWith(t, scripted.Script{Turns: turns})
}

// agentServerWith serves AgentLoop with the scripted model playing script,
// the math provider, the slow provider (slow.wait answers when its request
// ends) and the demo products as the initial state; opts come last.
func agentServerWith(t *testing.T, script scripted.Script, opts ...server.Option) exprdv1.AgentLoopClient {
	t.Helper()
	c, _ := agentServerModel(t, script, opts...)
	return c
}

// agentServerModel is agentServerWith, and the scripted model server,
// which records the requests the turns made.
func agentServerModel(t *testing.T, script scripted.Script, opts ...server.Option) (exprdv1.AgentLoopClient, *scripted.Server) {
	t.Helper()
	models, ms := scriptedModels(t, script)
	m, err := providers.StartMath()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	reg, err := utcpall.New(loopbackEgress)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	if _, err := reg.Register(context.Background(), "math", utcp.FromURL(m.URL()+"/utcp")); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Register(context.Background(), "slow", utcp.FromURL(startSlow(t)+"/utcp")); err != nil {
		t.Fatal(err)
	}
	base := []server.Option{server.WithModels(models), server.WithRegistry(reg), server.WithInitialState(demo.Products)}
	conn := serve(t, newServer(t, append(base, opts...)...))
	return exprdv1.NewAgentLoopClient(conn), ms
}

// startSlow serves a UTCP manual with one tool, wait, that answers only
// when its request ends (or after a minute); it returns the base URL.
func startSlow(t *testing.T) string {
	t.Helper()
	return oneToolProvider(t, "wait", "Waits.", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
		_, _ = w.Write([]byte(`{}`))
	})
}

// oneToolProvider serves a UTCP manual at /utcp whose one tool, name, is
// GET /<name>, answered by handler; it returns the base URL.
func oneToolProvider(t *testing.T, name, desc string, handler http.HandlerFunc) string {
	t.Helper()
	var url string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /utcp", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"utcp_version": "1.0.1", "manual_version": "1.0.0", "tools": []any{map[string]any{
			"name": name, "description": desc, "inputs": map[string]any{"type": "object"},
			"tool_call_template": map[string]any{"call_template_type": "http", "http_method": "GET", "url": url + "/" + name},
		}}})
	})
	mux.HandleFunc("GET /"+name, handler)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	url = srv.URL
	return url
}

// startAgent opens a turn under a deadline (a turn that hangs fails the
// test with DeadlineExceeded instead of hanging it) and sends start.
func startAgent(t *testing.T, c exprdv1.AgentLoopClient, start *exprdv1.AgentStart) agentClient {
	t.Helper()
	return openStream(t, c.Run, &exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: start}})
}

// openStream opens a bidi stream with open under a 20 s deadline and sends
// first.
func openStream[Req, Resp any](t *testing.T, open func(context.Context, ...grpc.CallOption) (grpc.BidiStreamingClient[Req, Resp], error), first *Req) grpc.BidiStreamingClient[Req, Resp] {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	stream, err := open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// io.EOF: the server ended the stream already (a limit refused it);
	// its status is the next Recv's.
	if err := stream.Send(first); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return stream
}

func args(v any) json.RawMessage { b, _ := json.Marshal(v); return b }

// A two-step turn using the four executors at once: the client, a UTCP
// tool, the expr tool on the state, and codemode.
func TestAgentLoopFourExecutors(t *testing.T) {
	t.Parallel()
	c := agentServer(t,
		scripted.Turn{ToolCalls: []scripted.ToolCall{
			{ID: "c1", Name: "expr", Arguments: args(map[string]any{"steps": []any{map[string]any{"set": "scopes.root.selected", "expr": "fromPairs(map(sortBy(scopes.root.products.items, .price)[:5], [.id, true]))"}}})},
			{ID: "c2", Name: "add", Arguments: args(map[string]any{"a": 2, "b": 3})},
			{ID: "c3", Name: "ask_user", Arguments: args(map[string]any{"question": "Which colour?"})},
			{ID: "c4", Name: "codemode", Arguments: args(map[string]any{"code": `codemode.Get(codemode.CallTool("math.multiply", {"a": 6, "b": 7}), "result")`})},
		}},
		scripted.Turn{Text: "Selected five products; 2+3=5, the user said blue, 6×7=42."},
	)
	stream := startAgent(t, c, &exprdv1.AgentStart{
		Messages: []*exprdv1.AgentMessage{{Role: exprdv1.AgentMessage_ROLE_USER, Content: "Do four things."}},
		Tools: []*exprdv1.AgentTool{
			{Name: "expr", Executor: exprdv1.AgentTool_EXECUTOR_EXPR},
			{Name: "add", Executor: exprdv1.AgentTool_EXECUTOR_UTCP, UtcpTool: "math.add"},
			{Name: "ask_user", Description: "Asks the user.", Executor: exprdv1.AgentTool_EXECUTOR_CLIENT, ParametersJson: `{"type":"object","properties":{"question":{"type":"string"}}}`},
			{Name: "codemode", Executor: exprdv1.AgentTool_EXECUTOR_CODEMODE, CodemodeTools: []string{"math.multiply"}},
		},
	})
	results := map[string]string{}
	var writes []string
	for {
		m, err := stream.Recv()
		if err != nil {
			t.Fatalf("Recv: %v", err)
		}
		switch ev := m.GetEvent().(type) {
		case *exprdv1.AgentLoopRunResponse_ToolCallRequested:
			if ev.ToolCallRequested.GetRunOnClient() {
				_ = stream.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_ToolOutput{ToolOutput: &exprdv1.ToolOutput{
					CallId: ev.ToolCallRequested.GetCall().GetId(), OutputJson: `{"answer":"blue"}`}}})
			}
		case *exprdv1.AgentLoopRunResponse_StateWrite:
			writes = append(writes, ev.StateWrite.GetPath())
		case *exprdv1.AgentLoopRunResponse_ToolResult:
			results[ev.ToolResult.GetName()] = ev.ToolResult.GetOutputJson()
			if ev.ToolResult.GetIsError() {
				t.Errorf("tool %s failed: %s", ev.ToolResult.GetName(), ev.ToolResult.GetOutputJson())
			}
		case *exprdv1.AgentLoopRunResponse_Done:
			if len(ev.Done.GetSteps()) != 2 || !strings.Contains(ev.Done.GetText(), "6×7=42") {
				t.Errorf("got done %v, want two steps and the final text", ev.Done)
			}
			if strings.Join(writes, ",") != "scopes.root.selected" {
				t.Errorf("got writes %v", writes)
			}
			for name, want := range map[string]string{"add": `"result":5`, "ask_user": `"answer":"blue"`, "codemode": `42`, "expr": `{}`} {
				if !strings.Contains(results[name], want) {
					t.Errorf("tool %s: got %s, want it to contain %s", name, results[name], want)
				}
			}
			return
		}
	}
}

// Start's state_json is the state the turn's first tool call sees.
func TestAgentLoopStartState(t *testing.T) {
	t.Parallel()
	c := agentServer(t,
		scripted.Turn{Match: &scripted.Match{LastRole: "user"}, ToolCalls: []scripted.ToolCall{
			{ID: "c1", Name: "expr", Arguments: args(map[string]any{"steps": []any{map[string]any{"set": "scopes.root.count", "expr": "len(scopes.root.products.items)"}}})},
		}},
		scripted.Turn{Match: &scripted.Match{LastRole: "tool"}, Text: "Counted."},
	)
	stream := startAgent(t, c, &exprdv1.AgentStart{
		Messages:  []*exprdv1.AgentMessage{{Role: exprdv1.AgentMessage_ROLE_USER, Content: "Count the products."}},
		Tools:     []*exprdv1.AgentTool{{Name: "expr", Executor: exprdv1.AgentTool_EXECUTOR_EXPR}},
		StateJson: `{"products": {"items": [{"id": "a"}, {"id": "b"}]}}`,
	})
	var written string
	for {
		m, err := stream.Recv()
		if err != nil {
			t.Fatalf("Recv: %v", err)
		}
		if w := m.GetStateWrite(); w != nil {
			written = w.GetValueJson()
		}
		if m.GetDone() != nil {
			break
		}
	}
	if written != "2" {
		t.Fatalf("the expr tool wrote %q, want 2: the items of Start's state, not the server's 20", written)
	}
}

func TestAgentLoopTurnErrors(t *testing.T) {
	t.Parallel()
	c := agentServer(t,
		scripted.Turn{Match: &scripted.Match{LastUser: "hook"}, ToolCalls: []scripted.ToolCall{{ID: "h1", Name: "noop"}}},
		scripted.Turn{Match: &scripted.Match{LastUser: "approve"}, ToolCalls: []scripted.ToolCall{{ID: "a1", Name: "add", Arguments: args(map[string]any{"a": 1, "b": 1})}}},
		scripted.Turn{Match: &scripted.Match{LastRole: "tool"}, Text: "ok"}, // the hook's turn
		scripted.Turn{Match: &scripted.Match{LastRole: "tool"}, Text: "ok"}, // the approval's
		scripted.Turn{Match: &scripted.Match{LastUser: "cancel"}, ToolCalls: []scripted.ToolCall{{ID: "x1", Name: "ask_user"}}},
	)
	t.Run("bad starts", func(t *testing.T) {
		for _, tt := range []struct {
			first *exprdv1.AgentLoopRunRequest
		}{
			{&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Cancel{Cancel: &exprdv1.AgentCancel{}}}},
			{&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: &exprdv1.AgentStart{Provider: "nope"}}}},
			{&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: &exprdv1.AgentStart{Hooks: []exprdv1.Hook{exprdv1.Hook(99)}}}}},
			{&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: &exprdv1.AgentStart{Tools: []*exprdv1.AgentTool{{Name: "x", Executor: exprdv1.AgentTool_EXECUTOR_UTCP, UtcpTool: "math.pow"}}}}}},
			{&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: &exprdv1.AgentStart{StateJson: `{"products":`}}}},
			{&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: &exprdv1.AgentStart{StateJson: `[1, 2]`}}}},
		} {
			stream, _ := c.Run(context.Background())
			_ = stream.Send(tt.first)
			if _, err := stream.Recv(); status.Code(err) != codes.InvalidArgument {
				t.Errorf("%v: got %v, want InvalidArgument", tt.first, err)
			}
		}
	})
	t.Run("a hook reply for another call is rejected; the hook waits on", func(t *testing.T) {
		stream := startAgent(t, c, &exprdv1.AgentStart{Messages: []*exprdv1.AgentMessage{{Role: exprdv1.AgentMessage_ROLE_USER, Content: "hook"}},
			Tools: []*exprdv1.AgentTool{{Name: "noop"}}, Hooks: []exprdv1.Hook{exprdv1.Hook_HOOK_PRE_TOOL_CALL}})
		var rejected *exprdv1.Rejected
		var result *exprdv1.ToolResult
		for {
			m, err := stream.Recv()
			if err != nil {
				t.Fatalf("got %v, want the turn to go on to done", err)
			}
			if h := m.GetHookRequest(); h != nil {
				_ = stream.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_HookReply{HookReply: &exprdv1.HookReply{HookId: h.GetHookId(), CallId: "someone-else"}}})
				_ = stream.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_HookReply{HookReply: &exprdv1.HookReply{HookId: h.GetHookId(), CallId: h.GetCallId(), ResultJson: `{"from":"hook"}`}}})
			}
			if r := m.GetRejected(); r != nil {
				rejected = r
			}
			if r := m.GetToolResult(); r != nil {
				result = r
			}
			if m.GetDone() != nil {
				break
			}
		}
		if st := rejectedStatus(rejected); rejected.GetKind() != "hook_reply" || st.Code() != codes.InvalidArgument {
			t.Errorf("got Rejected %v, want hook_reply INVALID_ARGUMENT", rejected)
		}
		if result.GetOutputJson() != `{"from":"hook"}` {
			t.Errorf("got result %v, want the second reply's", result)
		}
	})
	t.Run("a denied approval is an error result with the reason", func(t *testing.T) {
		stream := startAgent(t, c, &exprdv1.AgentStart{Messages: []*exprdv1.AgentMessage{{Role: exprdv1.AgentMessage_ROLE_USER, Content: "approve"}},
			Tools: []*exprdv1.AgentTool{{Name: "add", Executor: exprdv1.AgentTool_EXECUTOR_UTCP, UtcpTool: "math.add", NeedsApproval: true}}})
		for {
			m, err := stream.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if a := m.GetApprovalRequest(); a != nil {
				_ = stream.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_ApprovalReply{ApprovalReply: &exprdv1.AgentApprovalReply{
					CallId: a.GetCall().GetId(), Approved: false, Reason: "not on a Sunday"}}})
			}
			if r := m.GetToolResult(); r != nil {
				if !r.GetIsError() || !strings.Contains(r.GetOutputJson(), "not on a Sunday") {
					t.Errorf("got %v, want an error result with the reason", r)
				}
			}
			if m.GetDone() != nil {
				return
			}
		}
	})
	t.Run("cancel aborts the turn", func(t *testing.T) {
		stream := startAgent(t, c, &exprdv1.AgentStart{Messages: []*exprdv1.AgentMessage{{Role: exprdv1.AgentMessage_ROLE_USER, Content: "cancel"}},
			Tools: []*exprdv1.AgentTool{{Name: "ask_user", Executor: exprdv1.AgentTool_EXECUTOR_CLIENT}}})
		for {
			m, err := stream.Recv()
			if err != nil {
				if status.Code(err) != codes.Canceled {
					t.Errorf("got %v, want Canceled", err)
				}
				return
			}
			if m.GetToolCallRequested().GetRunOnClient() {
				_ = stream.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Cancel{Cancel: &exprdv1.AgentCancel{}}})
			}
		}
	})
}

// A client-run tool's output reaches the model as JSON: as sent when it
// is JSON, as a JSON string when it is text, and an empty one as {} (with
// is_error, {"error":"the tool failed"}) (issue: an empty output reached
// the model as "", which is no JSON).
func TestAgentLoopClientOutputReachesModel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		output  string
		isError bool
		want    string // the tool message's content, and the ToolResult's output_json
	}{
		{"empty", "", false, `{}`},
		{"empty, with is_error", "", true, `{"error":"the tool failed"}`},
		{"JSON", `{"answer":"blue"}`, false, `{"answer":"blue"}`},
		{"JSON, with is_error", `{"error":"no user"}`, true, `{"error":"no user"}`},
		{"text that is not JSON", `blue`, false, `"blue"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, ms := agentServerModel(t, scripted.Script{Turns: []scripted.Turn{
				{ToolCalls: []scripted.ToolCall{{ID: "q1", Name: "ask_user"}}},
				{Text: "ok"},
			}})
			stream := startAgent(t, c, &exprdv1.AgentStart{Messages: userMsg("ask"), Tools: []*exprdv1.AgentTool{{Name: "ask_user", Executor: exprdv1.AgentTool_EXECUTOR_CLIENT}}})
			var result *exprdv1.ToolResult
			_, err := drain(stream, func(m *exprdv1.AgentLoopRunResponse) {
				if r := m.GetToolCallRequested(); r.GetRunOnClient() {
					_ = stream.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_ToolOutput{ToolOutput: &exprdv1.ToolOutput{
						CallId: r.GetCall().GetId(), OutputJson: tc.output, IsError: tc.isError}}})
				}
				if r := m.GetToolResult(); r != nil {
					result = r
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if result.GetOutputJson() != tc.want || result.GetIsError() != tc.isError {
				t.Errorf("got result %s (error %v), want %s (error %v)", result.GetOutputJson(), result.GetIsError(), tc.want, tc.isError)
			}
			var seen []string
			for _, r := range ms.Requests() {
				if msgs := r.Chat.Messages; len(msgs) > 0 && msgs[len(msgs)-1].Role == "tool" {
					last := msgs[len(msgs)-1]
					seen = append(seen, last.ToolCallID+" "+last.Content)
				}
			}
			if want := "q1 " + tc.want; len(seen) != 1 || seen[0] != want {
				t.Errorf("the model got tool messages %q, want [%q]", seen, want)
			}
		})
	}
}

// Start's omit_events leaves out exactly the events it names; the events
// that ask for an answer (the client's tool, an approval, a hook) and done
// come whatever it names, and the turn is the same: its tool outputs
// reach the model and done holds every step.
func TestAgentLoopOmitEvents(t *testing.T) {
	t.Parallel()
	informational := omittable()
	// kind is the informational event m is, or UNSPECIFIED for one that
	// is always sent.
	kind := func(m *exprdv1.AgentLoopRunResponse) exprdv1.AgentEvent {
		switch ev := m.GetEvent().(type) {
		case *exprdv1.AgentLoopRunResponse_StepStarted:
			return exprdv1.AgentEvent_AGENT_EVENT_STEP_STARTED
		case *exprdv1.AgentLoopRunResponse_TextDelta:
			return exprdv1.AgentEvent_AGENT_EVENT_TEXT_DELTA
		case *exprdv1.AgentLoopRunResponse_ToolCallRequested:
			if !ev.ToolCallRequested.GetRunOnClient() {
				return exprdv1.AgentEvent_AGENT_EVENT_TOOL_CALL_ANNOUNCED
			}
		case *exprdv1.AgentLoopRunResponse_StateWrite:
			return exprdv1.AgentEvent_AGENT_EVENT_STATE_WRITE
		case *exprdv1.AgentLoopRunResponse_ToolResult:
			return exprdv1.AgentEvent_AGENT_EVENT_TOOL_RESULT
		case *exprdv1.AgentLoopRunResponse_StepFinished:
			return exprdv1.AgentEvent_AGENT_EVENT_STEP_FINISHED
		case *exprdv1.AgentLoopRunResponse_Durability:
			return exprdv1.AgentEvent_AGENT_EVENT_DURABILITY
		}
		return exprdv1.AgentEvent_AGENT_EVENT_UNSPECIFIED
	}
	if len(informational) != 7 {
		t.Fatalf("%d events to omit: %v; a new one needs its case in kind", len(informational), informational)
	}
	tests := []struct {
		name string
		omit []exprdv1.AgentEvent
	}{
		{"none", nil},
		{"all, one named twice", append(slices.Clone(informational), exprdv1.AgentEvent_AGENT_EVENT_TEXT_DELTA)},
	}
	for _, e := range informational {
		tests = append(tests, struct {
			name string
			omit []exprdv1.AgentEvent
		}{e.String(), []exprdv1.AgentEvent{e}})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, ms := agentServerModel(t, scripted.Script{Turns: []scripted.Turn{
				{ToolCalls: []scripted.ToolCall{
					{ID: "w1", Name: "expr", Arguments: args(map[string]any{"steps": []any{map[string]any{"set": "scopes.root.n", "expr": "1"}}})},
					{ID: "q1", Name: "ask_user"},
				}},
				{Text: "Wrote it; the user said blue."},
			}})
			stream := startAgent(t, c, &exprdv1.AgentStart{Messages: userMsg("ask"), OmitEvents: tc.omit,
				Hooks: []exprdv1.Hook{exprdv1.Hook_HOOK_POST_TOOL_CALL},
				Tools: []*exprdv1.AgentTool{
					{Name: "expr", Executor: exprdv1.AgentTool_EXECUTOR_EXPR},
					{Name: "ask_user", Executor: exprdv1.AgentTool_EXECUTOR_CLIENT, NeedsApproval: true},
				}})
			count := map[exprdv1.AgentEvent]int{}
			asked, approvals, hooks := 0, 0, 0
			events, err := drain(stream, func(m *exprdv1.AgentLoopRunResponse) {
				count[kind(m)]++
				var reply *exprdv1.AgentLoopRunRequest
				switch ev := m.GetEvent().(type) {
				case *exprdv1.AgentLoopRunResponse_ToolCallRequested:
					if ev.ToolCallRequested.GetRunOnClient() {
						asked++
						reply = &exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_ToolOutput{ToolOutput: &exprdv1.ToolOutput{
							CallId: ev.ToolCallRequested.GetCall().GetId(), OutputJson: `{"answer":"blue"}`}}}
					}
				case *exprdv1.AgentLoopRunResponse_ApprovalRequest:
					approvals++
					reply = &exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_ApprovalReply{ApprovalReply: &exprdv1.AgentApprovalReply{
						CallId: ev.ApprovalRequest.GetCall().GetId(), Approved: true}}}
				case *exprdv1.AgentLoopRunResponse_HookRequest:
					hooks++
					reply = &exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_HookReply{HookReply: &exprdv1.HookReply{
						HookId: ev.HookRequest.GetHookId(), CallId: ev.HookRequest.GetCallId()}}}
				}
				if reply != nil {
					_ = stream.Send(reply)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range informational {
				if e == exprdv1.AgentEvent_AGENT_EVENT_DURABILITY {
					continue // sent only while the store is out of reach: TestAgentLoopStoreOutageBounds
				}
				if omitted := slices.Contains(tc.omit, e); omitted != (count[e] == 0) {
					t.Errorf("%v: got %d events, omitted %v", e, count[e], omitted)
				}
			}
			done := events[len(events)-1].GetDone()
			if asked != 1 || approvals != 1 || hooks != 2 || len(done.GetSteps()) != 2 || done.GetText() != "Wrote it; the user said blue." {
				t.Errorf("asked the client to run a tool %d times, to approve %d, hooks %d; done %v; want 1, 1, 2, and two steps with the answer",
					asked, approvals, hooks, done)
			}
			var got []string
			for _, r := range ms.Requests() {
				for _, m := range r.Chat.Messages {
					if m.Role == "tool" {
						got = append(got, m.ToolCallID+" "+m.Content)
					}
				}
			}
			if want := []string{"w1 {}", `q1 {"answer":"blue"}`}; !slices.Equal(got, want) {
				t.Errorf("the model got tool messages %q, want %q", got, want)
			}
		})
	}
}

// omittable is every AgentEvent but AGENT_EVENT_UNSPECIFIED, in order.
func omittable() []exprdv1.AgentEvent {
	var evs []exprdv1.AgentEvent
	for n := int32(1); ; n++ {
		if _, ok := exprdv1.AgentEvent_name[n]; !ok {
			return evs
		}
		evs = append(evs, exprdv1.AgentEvent(n))
	}
}

// The expr tool's writes say which agent step and which expr call made
// them, and at which step of that call's program: two expr calls of one
// step are told apart (issue: a write carried only the program's step).
func TestAgentLoopStateWritesNameTheirCall(t *testing.T) {
	t.Parallel()
	program := func(steps ...map[string]any) json.RawMessage { return args(map[string]any{"steps": steps}) }
	set := func(path, expr string) map[string]any { return map[string]any{"set": path, "expr": expr} }
	c := agentServer(t,
		scripted.Turn{ToolCalls: []scripted.ToolCall{
			{ID: "e1", Name: "expr", Arguments: program(set("scopes.root.a", "1"), set("scopes.root.b", "2"))},
			{ID: "e2", Name: "expr", Arguments: program(map[string]any{"expr": "0"}, set("scopes.root.c", "3"))},
		}},
		scripted.Turn{ToolCalls: []scripted.ToolCall{{ID: "e3", Name: "expr", Arguments: program(set("scopes.root.d", "4"))}}},
		scripted.Turn{Text: "ok"},
	)
	stream := startAgent(t, c, &exprdv1.AgentStart{Messages: userMsg("write"), Tools: []*exprdv1.AgentTool{{Name: "expr", Executor: exprdv1.AgentTool_EXECUTOR_EXPR}}})
	var writes []string
	_, err := drain(stream, func(m *exprdv1.AgentLoopRunResponse) {
		if w := m.GetStateWrite(); w != nil {
			writes = append(writes, fmt.Sprintf("%s step %d expr_step %d %s=%s", w.GetCallId(), w.GetStep(), w.GetExprStep(), w.GetPath(), w.GetValueJson()))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(writes) // the calls of one step run at once
	want := []string{
		"e1 step 0 expr_step 0 scopes.root.a=1",
		"e1 step 0 expr_step 1 scopes.root.b=2",
		"e2 step 0 expr_step 1 scopes.root.c=3",
		"e3 step 1 expr_step 0 scopes.root.d=4",
	}
	if !slices.Equal(writes, want) {
		t.Errorf("got writes\n%s\nwant\n%s", strings.Join(writes, "\n"), strings.Join(want, "\n"))
	}
}
