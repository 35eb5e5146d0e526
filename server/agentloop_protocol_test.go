package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/model/scripted"
	"github.com/exprd/exprd/server"
)

// badRequestField is the field of st's BadRequest detail, or "".
func badRequestField(st *status.Status) string {
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) > 0 {
			return br.GetFieldViolations()[0].GetField()
		}
	}
	return ""
}

// wantStatus fails unless err is a status of code with a BadRequest naming
// field ("" for none); it returns the status.
func wantStatus(t *testing.T, err error, code codes.Code, field string) *status.Status {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != code || badRequestField(st) != field {
		t.Errorf("got %v (field %q), want %s naming %q", err, badRequestField(st), code, field)
	}
	return st
}

// drain receives a turn's events until it ends, calling on (when set) for
// each; it returns them and the stream's end (nil after done).
func drain(stream agentClient, on func(*exprdv1.AgentLoopRunResponse)) ([]*exprdv1.AgentLoopRunResponse, error) {
	var events []*exprdv1.AgentLoopRunResponse
	for {
		m, err := stream.Recv()
		if err != nil {
			return events, err
		}
		events = append(events, m)
		if on != nil {
			on(m)
		}
		if m.GetDone() != nil {
			if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
				return events, fmt.Errorf("after done: got %v, want EOF", err)
			}
			return events, nil
		}
	}
}

func userMsg(text string) []*exprdv1.AgentMessage {
	return []*exprdv1.AgentMessage{{Role: exprdv1.AgentMessage_ROLE_USER, Content: text}}
}

// Half-close means "no more client messages": the turn goes on to done,
// and what would wait for the client is answered at once (issue: it
// cancelled the turn).
func TestAgentLoopHalfCloseRunsToDone(t *testing.T) {
	t.Parallel()
	add := scripted.ToolCall{Name: "add", Arguments: args(map[string]any{"a": 2, "b": 3})}
	ask := scripted.ToolCall{Name: "ask_user", Arguments: args(map[string]any{"question": "Which colour?"})}
	utcpAdd := func(approve bool) *exprdv1.AgentTool {
		return &exprdv1.AgentTool{Name: "add", Executor: exprdv1.AgentTool_EXECUTOR_UTCP, UtcpTool: "math.add", NeedsApproval: approve}
	}
	client := &exprdv1.AgentTool{Name: "ask_user", Executor: exprdv1.AgentTool_EXECUTOR_CLIENT}
	tests := []struct {
		name  string
		call  scripted.ToolCall
		tools []*exprdv1.AgentTool
		hooks []exprdv1.Hook
		// closeOn: "" closes right after Start; else at the first event
		// it reports true for, so that the request is already waiting.
		closeOn func(*exprdv1.AgentLoopRunResponse) bool
		// want is in the call's result; isError says whether it is one.
		want    string
		isError bool
	}{
		{"a server tool runs", add, []*exprdv1.AgentTool{utcpAdd(false)}, nil, nil, `"result":5`, false},
		{"a client tool asked after is an error result", ask, []*exprdv1.AgentTool{client}, nil, nil, "closed its side of the stream", true},
		{"a client tool waiting is an error result", ask, []*exprdv1.AgentTool{client}, nil,
			func(m *exprdv1.AgentLoopRunResponse) bool { return m.GetToolCallRequested().GetRunOnClient() }, "closed its side of the stream", true},
		{"an approval asked after is denied", add, []*exprdv1.AgentTool{utcpAdd(true)}, nil, nil,
			"the call was denied: the client closed its side of the stream before approving the call", true},
		{"an approval waiting is denied", add, []*exprdv1.AgentTool{utcpAdd(true)}, nil,
			func(m *exprdv1.AgentLoopRunResponse) bool { return m.GetApprovalRequest() != nil },
			"the call was denied: the client closed its side of the stream before approving the call", true},
		{"a pre_tool_call hook waiting: the call does not run", add, []*exprdv1.AgentTool{utcpAdd(false)}, []exprdv1.Hook{exprdv1.Hook_HOOK_PRE_TOOL_CALL},
			func(m *exprdv1.AgentLoopRunResponse) bool {
				return m.GetHookRequest().GetHook() == exprdv1.Hook_HOOK_PRE_TOOL_CALL
			},
			"the call was not run: the client closed its side of the stream before its pre_tool_call hook could be asked", true},
		{"prepare_step and post_tool_call hooks: as if nothing changed", add, []*exprdv1.AgentTool{utcpAdd(false)}, []exprdv1.Hook{exprdv1.Hook_HOOK_PREPARE_STEP, exprdv1.Hook_HOOK_POST_TOOL_CALL},
			func(m *exprdv1.AgentLoopRunResponse) bool {
				return m.GetHookRequest().GetHook() == exprdv1.Hook_HOOK_PREPARE_STEP
			}, `"result":5`, false},
	}
	var turns []scripted.Turn
	for i, tc := range tests {
		turns = append(turns, scripted.Turn{Match: &scripted.Match{LastUser: fmt.Sprintf("<half-close %d>", i), LastRole: "user"}, ToolCalls: []scripted.ToolCall{tc.call}})
	}
	turns = append(turns, scripted.Turn{Match: &scripted.Match{LastRole: "tool"}, Text: "ok"})
	c := agentServerWith(t, scripted.Script{Turns: turns, Loop: true})
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stream := startAgent(t, c, &exprdv1.AgentStart{Messages: userMsg(fmt.Sprintf("<half-close %d>", i)), Tools: tc.tools, Hooks: tc.hooks})
			if tc.closeOn == nil {
				_ = stream.CloseSend()
			}
			var results []*exprdv1.ToolResult
			events, err := drain(stream, func(m *exprdv1.AgentLoopRunResponse) {
				if tc.closeOn != nil && tc.closeOn(m) {
					_ = stream.CloseSend()
				}
				if r := m.GetToolResult(); r != nil {
					results = append(results, r)
				}
			})
			if err != nil {
				t.Fatalf("got %v, want the turn to end with done", err)
			}
			if d := events[len(events)-1].GetDone(); d.GetText() != "ok" || d.GetStopReason() != exprdv1.AgentDone_STOP_REASON_COMPLETED {
				t.Errorf("got done %v, want the model's answer after the tool result", d)
			}
			if len(results) != 1 || results[0].GetIsError() != tc.isError || !strings.Contains(results[0].GetOutputJson(), tc.want) {
				t.Errorf("got results %v, want one (error: %v) containing %q", results, tc.isError, tc.want)
			}
		})
	}
}

// A client message the turn cannot use is answered with Rejected, and the
// turn goes on to done, every time: a reply nobody waits for (an unknown
// id, or late: after its call timed out) is NOT_FOUND, a hook reply naming
// another call INVALID_ARGUMENT (the hook keeps waiting, and the right
// reply completes it), a second Start FAILED_PRECONDITION (issue: each
// ended the stream with INVALID_ARGUMENT, and a late tool output was
// dropped without a word).
func TestAgentLoopRejectsAndGoesOn(t *testing.T) {
	t.Parallel()
	const iterations = 20
	client := &exprdv1.AgentTool{Name: "t", Executor: exprdv1.AgentTool_EXECUTOR_CLIENT}
	oneCall := []scripted.Turn{{ToolCalls: []scripted.ToolCall{{Name: "t"}}}, {Text: "ok"}}
	// at sends bad at the first event when is true of it.
	at := func(when func(*exprdv1.AgentLoopRunResponse) bool, bad *exprdv1.AgentLoopRunRequest) func(*exprdv1.AgentLoopRunResponse) *exprdv1.AgentLoopRunRequest {
		return func(m *exprdv1.AgentLoopRunResponse) *exprdv1.AgentLoopRunRequest {
			if when(m) {
				return bad
			}
			return nil
		}
	}
	runOnClient := func(m *exprdv1.AgentLoopRunResponse) bool { return m.GetToolCallRequested().GetRunOnClient() }
	output := func(id string) *exprdv1.AgentLoopRunRequest {
		return &exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_ToolOutput{ToolOutput: &exprdv1.ToolOutput{CallId: id, OutputJson: `{"v":1}`}}}
	}
	tests := []struct {
		name  string
		tools []*exprdv1.AgentTool
		hooks []exprdv1.Hook
		turns []scripted.Turn // nil: one call of t, then "ok"
		// bad returns the message to send at an event (once), before the
		// turn's own replies to that event.
		bad                 func(*exprdv1.AgentLoopRunResponse) *exprdv1.AgentLoopRunRequest
		code                codes.Code
		kind, callID, field string
	}{
		{name: "a tool output for an unknown call", tools: []*exprdv1.AgentTool{client},
			bad:  at(runOnClient, output("nobody")),
			code: codes.NotFound, kind: "tool_output", callID: "nobody"},
		{name: "a late tool output", tools: []*exprdv1.AgentTool{{Name: "late", Executor: exprdv1.AgentTool_EXECUTOR_CLIENT, TimeoutMs: 50}, client},
			// Step 0's call of late times out; the output for it comes
			// at step 1, which calls t.
			turns: []scripted.Turn{{ToolCalls: []scripted.ToolCall{{ID: "late1", Name: "late"}}}, {ToolCalls: []scripted.ToolCall{{Name: "t"}}}, {Text: "ok"}},
			bad: at(func(m *exprdv1.AgentLoopRunResponse) bool {
				return m.GetStepStarted() != nil && m.GetStepStarted().GetStep() == 1
			}, output("late1")),
			code: codes.NotFound, kind: "tool_output", callID: "late1"},
		{name: "a hook reply for an unknown hook", tools: []*exprdv1.AgentTool{client}, hooks: []exprdv1.Hook{exprdv1.Hook_HOOK_PREPARE_STEP},
			bad: at(func(m *exprdv1.AgentLoopRunResponse) bool { return m.GetHookRequest() != nil },
				&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_HookReply{HookReply: &exprdv1.HookReply{HookId: "nobody"}}}),
			code: codes.NotFound, kind: "hook_reply", callID: "nobody"},
		{name: "a hook reply naming another call", tools: []*exprdv1.AgentTool{client}, hooks: []exprdv1.Hook{exprdv1.Hook_HOOK_PRE_TOOL_CALL},
			bad: func(m *exprdv1.AgentLoopRunResponse) *exprdv1.AgentLoopRunRequest {
				if h := m.GetHookRequest(); h != nil {
					return &exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_HookReply{HookReply: &exprdv1.HookReply{
						HookId: h.GetHookId(), CallId: "someone-else", ResultJson: `{"never":"used"}`}}}
				}
				return nil
			},
			// A hook reply's Rejected carries its hook id: the turn's first hook is "1".
			code: codes.InvalidArgument, kind: "hook_reply", callID: "1", field: "hook_reply.call_id"},
		{name: "an approval for an unknown call", tools: []*exprdv1.AgentTool{{Name: "t", Executor: exprdv1.AgentTool_EXECUTOR_CLIENT, NeedsApproval: true}},
			bad: at(func(m *exprdv1.AgentLoopRunResponse) bool { return m.GetApprovalRequest() != nil },
				&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_ApprovalReply{ApprovalReply: &exprdv1.AgentApprovalReply{CallId: "nobody", Approved: true}}}),
			code: codes.NotFound, kind: "approval_reply", callID: "nobody"},
		{name: "a second start", tools: []*exprdv1.AgentTool{client},
			bad:  at(runOnClient, &exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: &exprdv1.AgentStart{Messages: userMsg("again")}}}),
			code: codes.FailedPrecondition, kind: "start"},
		{name: "a state that is not an object", tools: []*exprdv1.AgentTool{client},
			bad:  at(runOnClient, &exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_State{State: &exprdv1.State{StateJson: `[1]`}}}),
			code: codes.InvalidArgument, kind: "state", field: "state.state_json"},
		{name: "a message with no field set", tools: []*exprdv1.AgentTool{client},
			bad:  at(runOnClient, &exprdv1.AgentLoopRunRequest{}),
			code: codes.InvalidArgument, field: "msg"},
	}
	// reply is the client's own answer to m: t's output, the hook's reply
	// naming the hooked call, an approval. The late tool is not answered.
	reply := func(m *exprdv1.AgentLoopRunResponse) *exprdv1.AgentLoopRunRequest {
		switch {
		case runOnClient(m) && m.GetToolCallRequested().GetCall().GetName() == "t":
			return output(m.GetToolCallRequested().GetCall().GetId())
		case m.GetHookRequest() != nil:
			h := m.GetHookRequest()
			return &exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_HookReply{HookReply: &exprdv1.HookReply{HookId: h.GetHookId(), CallId: h.GetCallId()}}}
		case m.GetApprovalRequest() != nil:
			return &exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_ApprovalReply{ApprovalReply: &exprdv1.AgentApprovalReply{
				CallId: m.GetApprovalRequest().GetCall().GetId(), Approved: true}}}
		}
		return nil
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			turns := tc.turns
			if turns == nil {
				turns = oneCall
			}
			c := agentServerWith(t, scripted.Script{Turns: turns, Loop: true})
			for range iterations {
				stream := startAgent(t, c, &exprdv1.AgentStart{Messages: userMsg("go"), Tools: tc.tools, Hooks: tc.hooks})
				// The client's replies wait until the Rejected came: the
				// turn cannot reach done before it.
				var rejections []*exprdv1.Rejected
				var results []*exprdv1.ToolResult
				var held []*exprdv1.AgentLoopRunRequest
				sent := false
				events, err := drain(stream, func(m *exprdv1.AgentLoopRunResponse) {
					if bad := tc.bad(m); bad != nil && !sent {
						_ = stream.Send(bad)
						sent = true
					}
					if r := reply(m); r != nil {
						held = append(held, r)
					}
					if r := m.GetRejected(); r != nil {
						rejections = append(rejections, r)
					}
					if r := m.GetToolResult(); r != nil {
						results = append(results, r)
					}
					if len(rejections) > 0 {
						for _, r := range held {
							_ = stream.Send(r)
						}
						held = nil
					}
				})
				if err != nil {
					t.Fatalf("got %v, want the turn to end with done", err)
				}
				if len(rejections) != 1 {
					t.Fatalf("got rejections %v, want one", rejections)
				}
				r, st := rejections[0], rejectedStatus(rejections[0])
				if r.GetKind() != tc.kind || r.GetCallId() != tc.callID || st.Code() != tc.code || badRequestField(st) != tc.field || st.Message() == "" {
					t.Errorf("got Rejected{kind %q, call_id %q, %v %q, field %q}, want kind %q, call_id %q, %v, field %q",
						r.GetKind(), r.GetCallId(), st.Code(), st.Message(), badRequestField(st), tc.kind, tc.callID, tc.code, tc.field)
				}
				if d := events[len(events)-1].GetDone(); d.GetText() != "ok" || d.GetStopReason() != exprdv1.AgentDone_STOP_REASON_COMPLETED {
					t.Errorf("got done %v, want the model's answer", d)
				}
				for _, res := range results {
					switch {
					case res.GetName() == "late":
						if !res.GetIsError() || !strings.Contains(res.GetOutputJson(), "timed out after 50ms") {
							t.Errorf("got result %v, want the timeout's error", res)
						}
					case res.GetIsError() || res.GetOutputJson() != `{"v":1}`:
						t.Errorf("got result %v, want the client's output", res)
					}
				}
				if t.Failed() {
					return
				}
			}
		})
	}
}

// Closing the stream before Start is INVALID_ARGUMENT, not UNKNOWN "EOF".
func TestAgentLoopFirstMessageMustBeStart(t *testing.T) {
	t.Parallel()
	c := agentServer(t, scripted.Turn{Text: "never"})
	tests := []struct {
		name  string
		first *exprdv1.AgentLoopRunRequest // nil: close at once
	}{
		{"nothing", nil},
		{"a cancel", &exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Cancel{Cancel: &exprdv1.AgentCancel{}}}},
		{"a tool output", &exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_ToolOutput{ToolOutput: &exprdv1.ToolOutput{}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stream, err := c.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if tc.first != nil {
				_ = stream.Send(tc.first)
			}
			_ = stream.CloseSend()
			_, err = stream.Recv()
			if st := wantStatus(t, err, codes.InvalidArgument, "start"); !strings.Contains(st.Message(), "the stream's first message must be Start") {
				t.Errorf("got message %q, want it to say the first message must be Start", st.Message())
			}
		})
	}
}

// Start is checked up front: the client's mistakes are INVALID_ARGUMENT
// naming the field, once, with no model call made and no provider text
// (issue: they came back as UNAVAILABLE "the model turn failed: ...
// invalid model request", or double-wrapped "rpc error: ...").
func TestAgentLoopBadStart(t *testing.T) {
	t.Parallel()
	c := agentServer(t, scripted.Turn{Error: &scripted.ErrorReply{Status: 400, Body: []byte(`"the provider's own words"`)}})
	user := &exprdv1.AgentMessage{Role: exprdv1.AgentMessage_ROLE_USER, Content: "hi"}
	tests := []struct {
		name  string
		start *exprdv1.AgentStart
		field string
	}{
		{"a tool choice naming no declared tool", &exprdv1.AgentStart{Messages: userMsg("hi"), Tools: []*exprdv1.AgentTool{{Name: "a"}}, ToolChoice: &exprdv1.ToolChoice{Mode: exprdv1.ToolChoice_MODE_TOOL, Tool: "b"}}, "start.tool_choice.tool"},
		{"a tool choice required with no tools", &exprdv1.AgentStart{Messages: userMsg("hi"), ToolChoice: &exprdv1.ToolChoice{Mode: exprdv1.ToolChoice_MODE_REQUIRED}}, "start.tool_choice"},
		{"an unknown role", &exprdv1.AgentStart{Messages: []*exprdv1.AgentMessage{user, {Role: exprdv1.AgentMessage_ROLE_ASSISTANT, Content: "yes"}, {Role: exprdv1.AgentMessage_Role(9), Content: "hi"}}}, "start.messages[2].role"},
		{"a tool message without its call id", &exprdv1.AgentStart{Messages: []*exprdv1.AgentMessage{user, {Role: exprdv1.AgentMessage_ROLE_TOOL, Content: "{}"}}}, "start.messages[1].tool_call_id"},
		{"an assistant call without an id", &exprdv1.AgentStart{Messages: []*exprdv1.AgentMessage{user, {Role: exprdv1.AgentMessage_ROLE_ASSISTANT, ToolCalls: []*exprdv1.AgentToolCall{{Name: "a"}}}}}, "start.messages[1].tool_calls[0].id"},
		{"a user message with tool calls", &exprdv1.AgentStart{Messages: []*exprdv1.AgentMessage{{Role: exprdv1.AgentMessage_ROLE_USER, ToolCalls: []*exprdv1.AgentToolCall{{Id: "c", Name: "a"}}}}}, "start.messages[0].tool_calls"},
		{"no messages", &exprdv1.AgentStart{}, "start.messages"},
		{"a message without a role", &exprdv1.AgentStart{Messages: []*exprdv1.AgentMessage{{Content: "hi"}}}, "start.messages[0].role"},
		{"MODE_TOOL without a tool", &exprdv1.AgentStart{Messages: userMsg("hi"), Tools: []*exprdv1.AgentTool{{Name: "a"}},
			ToolChoice: &exprdv1.ToolChoice{Mode: exprdv1.ToolChoice_MODE_TOOL}}, "start.tool_choice.tool"},
		{"a tool with MODE_AUTO", &exprdv1.AgentStart{Messages: userMsg("hi"), Tools: []*exprdv1.AgentTool{{Name: "a"}},
			ToolChoice: &exprdv1.ToolChoice{Mode: exprdv1.ToolChoice_MODE_AUTO, Tool: "a"}}, "start.tool_choice.tool"},
		{"a tool with no mode", &exprdv1.AgentStart{Messages: userMsg("hi"), Tools: []*exprdv1.AgentTool{{Name: "a"}},
			ToolChoice: &exprdv1.ToolChoice{Tool: "a"}}, "start.tool_choice.tool"},
		{"an unknown tool choice mode", &exprdv1.AgentStart{Messages: userMsg("hi"), ToolChoice: &exprdv1.ToolChoice{Mode: exprdv1.ToolChoice_Mode(9)}}, "start.tool_choice.mode"},
		{"an unknown hook", &exprdv1.AgentStart{Messages: userMsg("hi"), Hooks: []exprdv1.Hook{exprdv1.Hook_HOOK_PREPARE_STEP, exprdv1.Hook(9)}}, "start.hooks"},
		{"HOOK_UNSPECIFIED", &exprdv1.AgentStart{Messages: userMsg("hi"), Hooks: []exprdv1.Hook{exprdv1.Hook_HOOK_UNSPECIFIED}}, "start.hooks"},
		{"an unknown event to omit", &exprdv1.AgentStart{Messages: userMsg("hi"), OmitEvents: []exprdv1.AgentEvent{exprdv1.AgentEvent_AGENT_EVENT_TEXT_DELTA, exprdv1.AgentEvent(8)}}, "start.omit_events"},
		{"a negative event to omit", &exprdv1.AgentStart{Messages: userMsg("hi"), OmitEvents: []exprdv1.AgentEvent{exprdv1.AgentEvent(-1)}}, "start.omit_events"},
		{"AGENT_EVENT_UNSPECIFIED to omit", &exprdv1.AgentStart{Messages: userMsg("hi"), OmitEvents: []exprdv1.AgentEvent{exprdv1.AgentEvent_AGENT_EVENT_UNSPECIFIED}}, "start.omit_events"},
		{"a tool without a name", &exprdv1.AgentStart{Messages: userMsg("hi"), Tools: []*exprdv1.AgentTool{{}}}, "start.tools[0].name"},
		{"parameters that are not a schema", &exprdv1.AgentStart{Messages: userMsg("hi"), Tools: []*exprdv1.AgentTool{{Name: "a", ParametersJson: `[]`}}}, "start.tools[0].parameters_json"},
		{"an unknown UTCP tool", &exprdv1.AgentStart{Messages: userMsg("hi"), Tools: []*exprdv1.AgentTool{{Name: "a", Executor: exprdv1.AgentTool_EXECUTOR_UTCP, UtcpTool: "math.pow"}}}, "start.tools[0].utcp_tool"},
		{"an expr setting naming no server function", &exprdv1.AgentStart{Messages: userMsg("hi"),
			Tools:        []*exprdv1.AgentTool{{Name: "expr", Executor: exprdv1.AgentTool_EXECUTOR_EXPR}},
			ExprSettings: &exprdv1.Settings{Functions: []*exprdv1.Function{{Name: "f", Runner: exprdv1.Function_RUNNER_SERVER, ServerName: "nope"}}}},
			"start.expr_settings.functions[0].server_name"},
		{"an unknown provider", &exprdv1.AgentStart{Provider: "nope", Messages: userMsg("hi")}, "start.provider"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := drain(startAgent(t, c, tc.start), nil)
			st := wantStatus(t, err, codes.InvalidArgument, tc.field)
			for _, leak := range []string{"rpc error", "invalid model request", "provider's own words", "the model turn failed"} {
				if strings.Contains(st.Message(), leak) {
					t.Errorf("got message %q, want none of %q", st.Message(), leak)
				}
			}
		})
	}
}

// A prepare_step reply the model package would refuse is the client's
// mistake: INVALID_ARGUMENT naming the reply's field.
func TestAgentLoopBadPrepareStepReply(t *testing.T) {
	t.Parallel()
	c := agentServer(t, scripted.Turn{Text: "never"})
	tests := []struct {
		name  string
		reply *exprdv1.HookReply
		field string
	}{
		{"a tool choice naming no tool", &exprdv1.HookReply{ToolChoice: &exprdv1.ToolChoice{Mode: exprdv1.ToolChoice_MODE_TOOL, Tool: "b"}}, "hook_reply.tool_choice.tool"},
		{"an unknown active tool", &exprdv1.HookReply{ActiveTools: []string{"b"}}, "hook_reply.active_tools"},
		{"an unknown role", &exprdv1.HookReply{Messages: []*exprdv1.AgentMessage{{Role: exprdv1.AgentMessage_Role(9)}}}, "hook_reply.messages[0].role"},
		{"a message without a role", &exprdv1.HookReply{Messages: []*exprdv1.AgentMessage{{Content: "hi"}}}, "hook_reply.messages[0].role"},
		{"MODE_TOOL without a tool", &exprdv1.HookReply{ToolChoice: &exprdv1.ToolChoice{Mode: exprdv1.ToolChoice_MODE_TOOL}}, "hook_reply.tool_choice.tool"},
		{"a tool with MODE_NONE", &exprdv1.HookReply{ToolChoice: &exprdv1.ToolChoice{Mode: exprdv1.ToolChoice_MODE_NONE, Tool: "a"}}, "hook_reply.tool_choice.tool"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stream := startAgent(t, c, &exprdv1.AgentStart{Messages: userMsg("hi"), Tools: []*exprdv1.AgentTool{{Name: "a"}}, Hooks: []exprdv1.Hook{exprdv1.Hook_HOOK_PREPARE_STEP}})
			_, err := drain(stream, func(m *exprdv1.AgentLoopRunResponse) {
				if h := m.GetHookRequest(); h != nil {
					tc.reply.HookId = h.GetHookId()
					_ = stream.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_HookReply{HookReply: tc.reply}})
				}
			})
			wantStatus(t, err, codes.InvalidArgument, tc.field)
		})
	}
}

// A failed model request says what failed in the server's words, never
// the provider's.
func TestAgentLoopModelFailureKeepsProviderText(t *testing.T) {
	t.Parallel()
	one := 1
	tests := []struct {
		name string
		turn scripted.Turn
		code codes.Code
		want string
	}{
		{"an HTTP error", scripted.Turn{Error: &scripted.ErrorReply{Status: 400, Body: []byte(`"the provider's own words"`)}}, codes.FailedPrecondition,
			"the model server answered 400 Bad Request: it refused the request, and the same request cannot succeed"},
		{"a stream cut", scripted.Turn{Text: "a b c", CutAfter: &one}, codes.Unavailable, "the model turn failed: the model's reply was cut off before it was complete"},
		{"a malformed chunk", scripted.Turn{Text: "a b c", Malformed: &scripted.Malformed{After: 1, Data: "{the provider's own words"}}, codes.Unavailable, "the model turn failed: the model's reply was malformed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := agentServer(t, tc.turn)
			_, err := drain(startAgent(t, c, &exprdv1.AgentStart{Messages: userMsg("hi")}), nil)
			if st := wantStatus(t, err, tc.code, ""); st.Message() != tc.want {
				t.Errorf("got message %q, want %q", st.Message(), tc.want)
			}
		})
	}
}

// A state over --max-state-bytes is RESOURCE_EXHAUSTED with a QuotaFailure,
// as Session rejects it (issue: INVALID_ARGUMENT): at Start it ends the
// stream; after, it is Rejected and the turn goes on to done.
func TestAgentLoopStateOverLimit(t *testing.T) {
	t.Parallel()
	const limit = 4096 // over the demo products the server starts from
	at := `{"a":"` + strings.Repeat("x", limit-8) + `"}`
	past := `{"a":"` + strings.Repeat("x", limit-7) + `"}`
	c := agentServerWith(t, scripted.Script{Turns: []scripted.Turn{
		{Match: &scripted.Match{LastRole: "user"}, ToolCalls: []scripted.ToolCall{{Name: "t"}}},
		{Match: &scripted.Match{LastRole: "tool"}, Text: "ok"},
	}, Loop: true}, server.WithMaxStateBytes(limit))
	client := []*exprdv1.AgentTool{{Name: "t", Executor: exprdv1.AgentTool_EXECUTOR_CLIENT}}
	state := func(js string) *exprdv1.AgentLoopRunRequest {
		return &exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_State{State: &exprdv1.State{StateJson: js}}}
	}
	patch := func(js string) *exprdv1.AgentLoopRunRequest {
		return &exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_StatePatch{StatePatch: &exprdv1.StatePatch{PatchJson: js}}}
	}
	tests := []struct {
		name      string
		stateJSON string
		later     *exprdv1.AgentLoopRunRequest // sent while the client tool waits
		// code ends the stream (a Start's state); rejected is the code of
		// the Rejected a later state gets, the turn going on (OK: none).
		code, rejected codes.Code
	}{
		{"start state at the limit", at, nil, codes.OK, codes.OK},
		{"start state one past", past, nil, codes.ResourceExhausted, codes.OK},
		{"a state at the limit", "", state(at), codes.OK, codes.OK},
		{"a state one past", "", state(past), codes.OK, codes.ResourceExhausted},
		{"a patch past", "", patch(past), codes.OK, codes.ResourceExhausted},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stream := startAgent(t, c, &exprdv1.AgentStart{Messages: userMsg("hi"), Tools: client, StateJson: tc.stateJSON})
			var rejections []*exprdv1.Rejected
			_, err := drain(stream, func(m *exprdv1.AgentLoopRunResponse) {
				if r := m.GetToolCallRequested(); r.GetRunOnClient() {
					if tc.later != nil {
						_ = stream.Send(tc.later)
					}
					_ = stream.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_ToolOutput{ToolOutput: &exprdv1.ToolOutput{CallId: r.GetCall().GetId()}}})
				}
				if r := m.GetRejected(); r != nil {
					rejections = append(rejections, r)
				}
			})
			st := wantStatus(t, err, tc.code, "")
			if tc.code == codes.ResourceExhausted && quotaSubject(st) != "max_state_bytes" {
				t.Errorf("got details %v, want a QuotaFailure of max_state_bytes", st.Details())
			}
			switch {
			case tc.rejected == codes.OK && len(rejections) != 0:
				t.Errorf("got rejections %v, want none", rejections)
			case tc.rejected == codes.OK:
			case len(rejections) != 1:
				t.Errorf("got rejections %v, want one", rejections)
			default:
				if st := rejectedStatus(rejections[0]); st.Code() != tc.rejected || quotaSubject(st) != "max_state_bytes" {
					t.Errorf("got Rejected %v, want %v with a QuotaFailure of max_state_bytes", rejections[0], tc.rejected)
				}
			}
		})
	}
}

// A client-run call is announced once with its step, and requested again
// with run_on_client, with its step too (issue: the second copy had none).
func TestAgentLoopClientCallCarriesStep(t *testing.T) {
	t.Parallel()
	c := agentServer(t,
		scripted.Turn{Match: &scripted.Match{LastRole: "user"}, ToolCalls: []scripted.ToolCall{{ID: "a1", Name: "add", Arguments: args(map[string]any{"a": 1, "b": 1})}}},
		scripted.Turn{Match: &scripted.Match{LastRole: "tool"}, ToolCalls: []scripted.ToolCall{{ID: "q1", Name: "ask_user"}}},
		scripted.Turn{Match: &scripted.Match{LastRole: "tool"}, Text: "ok"})
	stream := startAgent(t, c, &exprdv1.AgentStart{Messages: userMsg("hi"), Tools: []*exprdv1.AgentTool{
		{Name: "add", Executor: exprdv1.AgentTool_EXECUTOR_UTCP, UtcpTool: "math.add"},
		{Name: "ask_user", Executor: exprdv1.AgentTool_EXECUTOR_CLIENT},
	}})
	var got []string
	_, err := drain(stream, func(m *exprdv1.AgentLoopRunResponse) {
		if r := m.GetToolCallRequested(); r != nil {
			got = append(got, fmt.Sprintf("%s step %d client %v", r.GetCall().GetId(), r.GetStep(), r.GetRunOnClient()))
			if r.GetRunOnClient() {
				_ = stream.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_ToolOutput{ToolOutput: &exprdv1.ToolOutput{CallId: r.GetCall().GetId(), OutputJson: `"blue"`}}})
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "a1 step 0 client false|q1 step 1 client false|q1 step 1 client true"
	if strings.Join(got, "|") != want {
		t.Errorf("got requests %s, want %s", strings.Join(got, "|"), want)
	}
}

// The codemode tool runs under the tool handler's 3 s budget, or the
// call's timeout when smaller (issue: under the 30 s tool timeout).
func TestAgentLoopCodemodeToolTimeout(t *testing.T) {
	t.Parallel()
	code := args(map[string]any{"code": `codemode.CallTool("slow.wait", {})`})
	tests := []struct {
		name          string
		toolTimeoutMs uint32 // the codemode tool's own
		turnToolMs    uint32 // Start's tool_timeout_ms
		want          string
		min, max      time.Duration
	}{
		{"the 3 s default", 0, 0, "the run is over its time budget of 3s", 3 * time.Second, 8 * time.Second},
		{"a smaller tool timeout", 200, 0, `tool "codemode" timed out after 200ms`, 200 * time.Millisecond, 2500 * time.Millisecond},
		{"a smaller turn tool timeout", 0, 300, `tool "codemode" timed out after 300ms`, 300 * time.Millisecond, 2500 * time.Millisecond},
		{"a larger tool timeout", 10_000, 0, "the run is over its time budget of 3s", 3 * time.Second, 8 * time.Second},
	}
	var turns []scripted.Turn
	for i := range tests {
		turns = append(turns, scripted.Turn{Match: &scripted.Match{LastUser: fmt.Sprintf("<codemode %d>", i), LastRole: "user"}, ToolCalls: []scripted.ToolCall{{Name: "codemode", Arguments: code}}})
	}
	turns = append(turns, scripted.Turn{Match: &scripted.Match{LastRole: "tool"}, Text: "ok"})
	c := agentServerWith(t, scripted.Script{Turns: turns, Loop: true})
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stream := startAgent(t, c, &exprdv1.AgentStart{Messages: userMsg(fmt.Sprintf("<codemode %d>", i)), ToolTimeoutMs: tc.turnToolMs,
				Tools: []*exprdv1.AgentTool{{Name: "codemode", Executor: exprdv1.AgentTool_EXECUTOR_CODEMODE, CodemodeTools: []string{"slow.wait"}, TimeoutMs: tc.toolTimeoutMs}}})
			begin := time.Now()
			var took time.Duration
			var result *exprdv1.ToolResult
			_, err := drain(stream, func(m *exprdv1.AgentLoopRunResponse) {
				if r := m.GetToolResult(); r != nil {
					result, took = r, time.Since(begin)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			var content struct{ Error string }
			_ = json.Unmarshal([]byte(result.GetOutputJson()), &content)
			if !result.GetIsError() || !strings.Contains(content.Error, tc.want) {
				t.Errorf("got result %s, want an error containing %q", result.GetOutputJson(), tc.want)
			}
			if took < tc.min || took > tc.max {
				t.Errorf("the call took %v, want between %v and %v", took, tc.min, tc.max)
			}
		})
	}
}

// With no model providers a turn is FAILED_PRECONDITION (issue:
// INVALID_ARGUMENT "no providers are configured", which is what exprd
// serves: it always passes a registry). A server given no registry at all
// does not serve AgentLoop (server.New), so that case is UNIMPLEMENTED.
func TestAgentLoopNoModelProviders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts []server.Option
	}{
		{"no registry", nil},
		{"an empty registry", []server.Option{server.WithModels(model.NewRegistry())}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := exprdv1.NewAgentLoopClient(serve(t, newServer(t, tc.opts...)))
			_, err := drain(startAgent(t, c, &exprdv1.AgentStart{Messages: userMsg("hi")}), nil)
			if st := wantStatus(t, err, codes.FailedPrecondition, ""); !strings.Contains(st.Message(), "no model providers") {
				t.Errorf("got message %q, want it to say there are no model providers", st.Message())
			}
		})
	}
}
