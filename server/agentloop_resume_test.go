package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/model/scripted"
)

// answerTo is the client's reply to a request of the turn (a client-run
// call, an approval, a hook), or nil for an event that asks nothing.
func answerTo(m *exprdv1.AgentLoopRunResponse) *exprdv1.AgentLoopRunRequest {
	switch {
	case m.GetToolCallRequested().GetRunOnClient():
		return &exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_ToolOutput{ToolOutput: &exprdv1.ToolOutput{
			CallId: m.GetToolCallRequested().GetCall().GetId(), OutputJson: `{"colour":"blue"}`}}}
	case m.GetApprovalRequest() != nil:
		return &exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_ApprovalReply{ApprovalReply: &exprdv1.AgentApprovalReply{
			CallId: m.GetApprovalRequest().GetCall().GetId(), Approved: true}}}
	case m.GetHookRequest() != nil:
		return &exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_HookReply{HookReply: &exprdv1.HookReply{
			HookId: m.GetHookRequest().GetHookId(), CallId: m.GetHookRequest().GetCallId()}}}
	}
	return nil
}

var addTurns = []scripted.Turn{
	{Match: &scripted.Match{LastRole: "user"}, ToolCalls: []scripted.ToolCall{{ID: "c1", Name: "add", Arguments: args(map[string]any{"a": 2, "b": 3})}}},
	{Match: &scripted.Match{LastRole: "tool"}, Text: "It is five."},
}

// A turn that waits for its client (a client-run call, an approval, a
// hook) when the client's stream drops is resumed on the same replica:
// the resumed stream replays the events after after_seq, then sends the
// request again (pending, under the seq it was recorded with), then the
// new events; the client's reply on it reaches the turn, which ends with
// the done it would have ended with without the break. A second reply to
// the request, and a reply to a request the turn never sent, are
// Rejected NOT_FOUND on that stream only (seq 0), changing nothing.
func TestAgentLoopResumeSendsPendingRequests(t *testing.T) {
	t.Parallel()
	addTool := func(approve bool) []*exprdv1.AgentTool {
		return []*exprdv1.AgentTool{{Name: "add", Executor: exprdv1.AgentTool_EXECUTOR_UTCP, UtcpTool: "math.add", NeedsApproval: approve}}
	}
	onClient := func(m *exprdv1.AgentLoopRunResponse) bool { return m.GetToolCallRequested().GetRunOnClient() }
	approval := func(m *exprdv1.AgentLoopRunResponse) bool { return m.GetApprovalRequest() != nil }
	bogus := &exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_ToolOutput{ToolOutput: &exprdv1.ToolOutput{CallId: "never-sent", OutputJson: `{}`}}}
	const blue, five = `{"colour":"blue"}`, `{"result":5}`
	for _, tc := range []struct {
		name   string
		script []scripted.Turn
		start  *exprdv1.AgentStart
		lost   uint64                                   // events the client lost before the drop
		first  []*exprdv1.AgentLoopRunRequest           // sent on the resumed stream before the answer
		twice  bool                                     // the answer is sent twice
		want   func(*exprdv1.AgentLoopRunResponse) bool // the request the client drops at
		result string                                   // the tool result the turn must show
	}{
		{name: "client-run call, nothing lost", script: askTurns, start: clientToolTurn(true), want: onClient, result: blue},
		{name: "client-run call, three events lost", script: askTurns, start: clientToolTurn(true), lost: 3, want: onClient, result: blue},
		{name: "approval", script: addTurns, start: &exprdv1.AgentStart{Messages: userMsg("Add."), Detach: proto.Bool(true), Tools: addTool(true)}, want: approval, result: five},
		{name: "pre_tool_call hook", script: addTurns, start: &exprdv1.AgentStart{Messages: userMsg("Add."), Detach: proto.Bool(true), Tools: addTool(false),
			Hooks: []exprdv1.Hook{exprdv1.Hook_HOOK_PRE_TOOL_CALL}},
			want: func(m *exprdv1.AgentLoopRunResponse) bool { return m.GetHookRequest() != nil }, result: five},
		{name: "duplicate reply", script: askTurns, start: clientToolTurn(true), twice: true, want: onClient, result: blue},
		{name: "reply to a request never sent", script: addTurns, start: &exprdv1.AgentStart{Messages: userMsg("Add."), Detach: proto.Bool(true), Tools: addTool(true)},
			first: []*exprdv1.AgentLoopRunRequest{bogus}, want: approval, result: five},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := agentServerWith(t, scripted.Script{Turns: tc.script, Loop: true})
			// The turn once without a break: the done to expect.
			plain := startAgent(t, c, tc.start)
			unbroken, err := drain(plain, func(m *exprdv1.AgentLoopRunResponse) {
				if a := answerTo(m); a != nil {
					_ = plain.Send(a)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			wantDone := unbroken[len(unbroken)-1].GetDone()

			ctx, drop := context.WithCancel(context.Background())
			defer drop()
			stream, err := c.Run(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_ = stream.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: tc.start}})
			var seen []*exprdv1.AgentLoopRunResponse
			for {
				m, err := stream.Recv()
				if err != nil {
					t.Fatal(err)
				}
				seen = append(seen, m)
				if tc.want(m) {
					break
				}
			}
			request := seen[len(seen)-1]
			id := seen[0].GetTurnId()
			drop() // the connection drops while the request waits
			time.Sleep(50 * time.Millisecond)

			after := request.GetSeq() - tc.lost
			rctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			r := resumeStream(t, rctx, c, id, int64(after))
			for _, m := range tc.first {
				_ = r.Send(m)
			}
			var sent, pending, rejects, events []*exprdv1.AgentLoopRunResponse
			_, err = drain(r, func(m *exprdv1.AgentLoopRunResponse) {
				sent = append(sent, m)
				switch {
				case m.GetPending():
					pending = append(pending, m)
				case m.GetRejected() != nil && m.GetSeq() == 0:
					rejects = append(rejects, m)
					return
				default:
					events = append(events, m)
				}
				// Replayed requests are answered when sent again as
				// pending; new ones at once.
				if a := answerTo(m); a != nil && (m.GetPending() || m.GetSeq() > request.GetSeq()) {
					_ = r.Send(a)
					if tc.twice {
						_ = r.Send(a)
					}
				}
			})
			if err != nil {
				t.Fatalf("resumed stream: %v", err)
			}
			if sent[0].GetTurnId() != id {
				t.Errorf("the resumed stream's first message names %q, want %q", sent[0].GetTurnId(), id)
			}
			// The request once more, as it was recorded, after the replay
			// and before the new events.
			if len(pending) != 1 || !proto.Equal(stripPending(pending[0]), stripID(request)) {
				t.Fatalf("sent again: %v; want the request %v once, pending", pending, request)
			}
			var ordered []*exprdv1.AgentLoopRunResponse // the stream's own Rejected left out
			for _, m := range sent {
				if m.GetSeq() != 0 {
					ordered = append(ordered, m)
				}
			}
			for i, m := range ordered {
				if m == pending[0] && (i != int(tc.lost) || (i+1 < len(ordered) && ordered[i+1].GetSeq() <= request.GetSeq())) {
					t.Errorf("the request was sent again as message %d of %v, want it after the %d replayed", i, ordered, tc.lost)
				}
			}
			// Every event after after_seq once, in order; the replayed
			// ones as first sent.
			checkSeqs(t, events, after+1, id)
			for i, m := range events[:tc.lost] {
				if !proto.Equal(stripID(m), stripID(seen[int(after)+i])) {
					t.Errorf("replayed %v, want %v", m, seen[int(after)+i])
				}
			}
			if d := events[len(events)-1].GetDone(); !proto.Equal(d, wantDone) {
				t.Fatalf("done %v, want %v as without the break", d, wantDone)
			}
			var result *exprdv1.ToolResult
			for _, m := range events {
				if m.GetToolResult() != nil {
					result = m.GetToolResult()
				}
				if m.GetRejected() != nil {
					t.Errorf("the turn recorded %v: a resumed stream's refusals are its own", m)
				}
			}
			if result.GetOutputJson() != tc.result || result.GetIsError() {
				t.Errorf("tool result %v, want %s", result, tc.result)
			}
			wantRejects := len(tc.first)
			if tc.twice {
				wantRejects++
			}
			if len(rejects) != wantRejects {
				t.Fatalf("Rejected %v, want %d", rejects, wantRejects)
			}
			for _, m := range rejects {
				st := rejectedStatus(m.GetRejected())
				if st.Code() != codes.NotFound || reasonOf(st) != "REPLY_NOT_AWAITED" {
					t.Errorf("Rejected %v, want NOT_FOUND REPLY_NOT_AWAITED", m)
				}
			}
		})
	}
}

// stripPending is m without its pending mark and turn id.
func stripPending(m *exprdv1.AgentLoopRunResponse) *exprdv1.AgentLoopRunResponse {
	m = stripID(m)
	m.Pending = false
	return m
}

// Two streams follow a detached turn on its replica while it waits for an
// approval: each is sent the request again; the first reply wins, the
// second stream's is Rejected on it, and both read the turn to done.
func TestAgentLoopResumeTwoStreamsFirstReplyWins(t *testing.T) {
	t.Parallel()
	slow := []scripted.Turn{addTurns[0], {Match: &scripted.Match{LastRole: "tool"}, Text: "It is five, as you see.", ChunkDelayMS: 100}}
	c := agentServerWith(t, scripted.Script{Turns: slow, Loop: true})
	ctx, drop := context.WithCancel(context.Background())
	stream, err := c.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = stream.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: &exprdv1.AgentStart{Messages: userMsg("Add."), Detach: proto.Bool(true),
		Tools: []*exprdv1.AgentTool{{Name: "add", Executor: exprdv1.AgentTool_EXECUTOR_UTCP, UtcpTool: "math.add", NeedsApproval: true}}}}})
	var id string
	var request *exprdv1.AgentLoopRunResponse
	for request == nil {
		m, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if id == "" {
			id = m.GetTurnId()
		}
		if m.GetApprovalRequest() != nil {
			request = m
		}
	}
	drop()
	rctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	streams := []agentClient{resumeStream(t, rctx, c, id, -1), resumeStream(t, rctx, c, id, int64(request.GetSeq()))}
	for i, s := range streams { // each gets the request again
		for {
			m, err := s.Recv()
			if err != nil {
				t.Fatalf("stream %d: %v", i, err)
			}
			if m.GetPending() {
				if m.GetSeq() != request.GetSeq() || m.GetApprovalRequest() == nil {
					t.Fatalf("stream %d sent again %v, want the approval request", i, m)
				}
				break
			}
		}
	}
	deny := &exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_ApprovalReply{ApprovalReply: &exprdv1.AgentApprovalReply{CallId: "c1", Approved: false, Reason: "second"}}}
	if err := streams[0].Send(answerTo(request)); err != nil {
		t.Fatal(err)
	}
	var results []string
	for _, i := range []int{1, 0} { // the second first, while the turn runs
		s := streams[i]
		var rejects int
		events, err := drain(s, func(m *exprdv1.AgentLoopRunResponse) {
			if m.GetRejected() != nil && m.GetSeq() == 0 {
				rejects++
			}
			if r := m.GetToolResult(); r != nil {
				results = append(results, r.GetOutputJson())
				if i == 1 { // the first reply is in; the turn's next step is slow
					_ = s.Send(deny)
				}
			}
		})
		if err != nil || events[len(events)-1].GetDone() == nil {
			t.Fatalf("stream %d: %v; want done", i, err)
		}
		if want := i; rejects != want {
			t.Errorf("stream %d: %d Rejected, want %d", i, rejects, want)
		}
	}
	if strings.Join(results, " ") != `{"result":5} {"result":5}` {
		t.Errorf("tool results %v, want the approved call's on both streams", results)
	}
}
