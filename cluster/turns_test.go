package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/model/scripted"
	"github.com/exprd/exprd/turnstore"
)

// startNATS runs a NATS server with JetStream on loopback for the test.
func startNATS(t *testing.T) string { return benchNATS(t).ClientURL() }

// agentReplicas starts n exprd processes on the NATS turn store at url,
// their model one scripted server playing script, each with extra flags;
// it returns their AgentLoop clients, in order (A, B, C, ...).
func agentReplicas(t *testing.T, url string, script scripted.Script, n int, extra ...string) []exprdv1.AgentLoopClient {
	t.Helper()
	l := &ledger{}
	l.scriptedModel(t, script)
	var out []exprdv1.AgentLoopClient
	for i := range n {
		out = append(out, startNATSReplica(t, string(rune('A'+i)), url, l.modelsConfig, extra...).agent)
	}
	return out
}

type agentStream = grpc.BidiStreamingClient[exprdv1.AgentLoopRunRequest, exprdv1.AgentLoopRunResponse]

// recvAll receives to the stream's end: the events, and the end (nil
// after done).
func recvAll(s agentStream) ([]*exprdv1.AgentLoopRunResponse, error) {
	var out []*exprdv1.AgentLoopRunResponse
	for {
		m, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, m)
	}
}

// A turn started on replica A, its client gone after some events, is
// resumed on replica B sharing the NATS turn store: every event once, in
// order, to done; and an ended turn replays on B from any seq.
func TestTurnResumedOnAnotherReplica(t *testing.T) {
	t.Parallel()
	url := startNATS(t)
	script := scripted.Script{Loop: true, Turns: []scripted.Turn{{Text: "one two three four five six seven eight", ChunkDelayMS: 30}}}
	r := agentReplicas(t, url, script, 2)
	a, b := r[0], r[1]
	for _, tc := range []struct {
		name  string
		after func(last uint64) int64 // the after_seq, of the last seq A sent
	}{
		{"after the last seen", func(last uint64) int64 { return int64(last) }},
		{"from the start", func(uint64) int64 { return 0 }},
		{"two back from the latest", func(uint64) int64 { return -2 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, drop := context.WithCancel(context.Background())
			sa, err := a.Run(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_ = sa.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: &exprdv1.AgentStart{
				Detach: proto.Bool(true), Messages: []*exprdv1.AgentMessage{{Role: exprdv1.AgentMessage_ROLE_USER, Content: "Count."}}}}})
			var seen []*exprdv1.AgentLoopRunResponse
			for len(seen) < 3 {
				m, err := sa.Recv()
				if err != nil {
					t.Fatal(err)
				}
				seen = append(seen, m)
			}
			drop()
			id, last := seen[0].GetTurnId(), seen[len(seen)-1].GetSeq()
			rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			sb, err := b.Run(rctx)
			if err != nil {
				t.Fatal(err)
			}
			after := tc.after(last)
			_ = sb.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Resume{Resume: &exprdv1.AgentResume{TurnId: id, AfterSeq: after}}})
			got, err := recvAll(sb)
			if err != nil {
				t.Fatalf("on B: %v", err)
			}
			if len(got) == 0 || got[len(got)-1].GetDone() == nil {
				t.Fatalf("B sent %d events, the last %v; want them to done", len(got), got)
			}
			if got[0].GetTurnId() != id {
				t.Errorf("B's first event names %q, want %q", got[0].GetTurnId(), id)
			}
			first := got[0].GetSeq()
			if after >= 0 && first != uint64(after)+1 {
				t.Errorf("B started at seq %d, want %d", first, after+1)
			}
			for i, m := range got {
				if m.GetSeq() != first+uint64(i) {
					t.Fatalf("B's event %d has seq %d, want %d", i, m.GetSeq(), first+uint64(i))
				}
			}
			// The ended turn replays on B to done, from the start.
			sr, _ := b.Run(rctx)
			_ = sr.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Resume{Resume: &exprdv1.AgentResume{TurnId: id}}})
			all, err := recvAll(sr)
			if err != nil || len(all) == 0 || uint64(len(all)) != all[len(all)-1].GetSeq() || all[len(all)-1].GetDone() == nil {
				t.Fatalf("replay: %d events, %v; want seq 1 to done", len(all), err)
			}
		})
	}
}

// A turn running on replica A is stopped by AgentLoop.Cancel on replica
// C (of three exprd processes sharing the NATS turn store): the stop is
// recorded, A's watch sees it, and A's stream ends CANCELLED; a second
// Cancel on C finds the turn ended.
func TestTurnCancelledFromAnotherReplica(t *testing.T) {
	t.Parallel()
	url := startNATS(t)
	// A slow reply: the turn still runs when B cancels it.
	script := scripted.Script{Loop: true, Turns: []scripted.Turn{{Text: strings.Repeat("word ", 200), ChunkDelayMS: 50}}}
	r := agentReplicas(t, url, script, 3)
	a, c := r[0], r[2]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sa, err := a.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = sa.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: &exprdv1.AgentStart{
		Messages: []*exprdv1.AgentMessage{{Role: exprdv1.AgentMessage_ROLE_USER, Content: "Talk."}}}}})
	first, err := sa.Recv()
	if err != nil {
		t.Fatal(err)
	}
	id := first.GetTurnId()
	resp, err := c.Cancel(ctx, &exprdv1.AgentLoopCancelRequest{TurnId: id})
	if err != nil || resp.GetEnded() {
		t.Fatalf("Cancel on C: %v, %v; want the running turn stopped", resp, err)
	}
	events, err := recvAll(sa)
	if status.Code(err) != codes.Canceled {
		t.Fatalf("A's stream ended %v after %d more events, want CANCELLED", err, len(events))
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, err = c.Cancel(ctx, &exprdv1.AgentLoopCancelRequest{TurnId: id})
		if err != nil || resp.GetEnded() || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || !resp.GetEnded() {
		t.Errorf("a second Cancel on C: %v, %v; want the turn ended", resp, err)
	}
}

// A turn started on replica A with a client-run tool, its client gone
// before the tool is requested, is resumed on replica B sharing the NATS
// turn store: B replays every event once, in order, then sends the
// request again (pending), and the client's answer on B reaches the turn
// on A (B forwards it over the store's relay), which runs to done. A
// second answer and one to a request never sent are Rejected on B,
// NOT_FOUND, by A; the turn goes on. Answered past A's detached timeout,
// the turn still waits: B tells A that a client follows it.
func TestTurnRequestAnsweredOnAnotherReplica(t *testing.T) {
	t.Parallel()
	url := startNATS(t)
	script := scripted.Script{Loop: true, Turns: []scripted.Turn{
		{Match: &scripted.Match{LastRole: "user"}, Text: "Let me ask the user about it.", ChunkDelayMS: 30,
			ToolCalls: []scripted.ToolCall{{ID: "c1", Name: "ask_user", Arguments: json.RawMessage(`{}`)}}},
		// A moment before the answer: the replies sent right after the
		// first (a duplicate, one to no request) are rejected before the
		// turn is done and B's stream ends (under load they came after).
		{Match: &scripted.Match{LastRole: "tool"}, Text: "The user said blue.", DelayMS: 300},
	}}
	const detached = 1500 * time.Millisecond
	r := agentReplicas(t, url, script, 2, "--turn-detached-timeout", detached.String())
	a, b := r[0], r[1]
	start := &exprdv1.AgentStart{Detach: proto.Bool(true), Messages: []*exprdv1.AgentMessage{{Role: exprdv1.AgentMessage_ROLE_USER, Content: "Ask."}},
		Tools: []*exprdv1.AgentTool{{Name: "ask_user", Executor: exprdv1.AgentTool_EXECUTOR_CLIENT}}}
	answer := &exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_ToolOutput{ToolOutput: &exprdv1.ToolOutput{CallId: "c1", OutputJson: `{"colour":"blue"}`}}}
	bogus := &exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_ToolOutput{ToolOutput: &exprdv1.ToolOutput{CallId: "never-sent"}}}
	for _, tc := range []struct {
		name    string
		waiting bool          // the client resumes on B once the call is requested
		after   int64         // -1: the latest; else from the last seen on A
		waitFor time.Duration // how long B's client waits before answering
		extra   []*exprdv1.AgentLoopRunRequest
		pending bool // the request is sent again (else it comes as a new event)
	}{
		{name: "resumed before the request", after: 0},
		{name: "resumed after the request, from the last seen", waiting: true, after: 0, pending: true},
		{name: "resumed after the request, from the latest", waiting: true, after: -1, pending: true},
		{name: "a duplicate answer and one to no request", waiting: true, after: 0, pending: true, extra: []*exprdv1.AgentLoopRunRequest{answer, bogus}},
		{name: "answered past A's detached timeout", waiting: true, after: 0, pending: true, waitFor: 2 * detached},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, drop := context.WithCancel(context.Background())
			defer drop()
			sa, err := a.Run(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_ = sa.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: start}})
			var seen []*exprdv1.AgentLoopRunResponse
			for len(seen) < 2 {
				m, err := sa.Recv()
				if err != nil {
					t.Fatal(err)
				}
				seen = append(seen, m)
			}
			drop() // before the call is requested: it is requested while detached
			id, last := seen[0].GetTurnId(), seen[len(seen)-1].GetSeq()
			if tc.waiting {
				waitRequested(t, url, id)
			}
			rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			sb, err := b.Run(rctx)
			if err != nil {
				t.Fatal(err)
			}
			after := int64(last)
			if tc.after < 0 {
				after = tc.after
			}
			_ = sb.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Resume{Resume: &exprdv1.AgentResume{TurnId: id, AfterSeq: after}}})
			var events, pending, rejected []*exprdv1.AgentLoopRunResponse
			for {
				m, err := sb.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("on B after %d events: %v", len(events), err)
				}
				switch {
				case m.GetPending():
					pending = append(pending, m)
				case m.GetRejected() != nil && m.GetSeq() == 0:
					rejected = append(rejected, m)
				default:
					events = append(events, m)
				}
				if m.GetToolCallRequested().GetRunOnClient() && m.GetPending() == tc.pending {
					time.Sleep(tc.waitFor)
					_ = sb.Send(answer)
					for _, x := range tc.extra {
						_ = sb.Send(x)
					}
				}
			}
			if len(events) == 0 || events[len(events)-1].GetDone() == nil || events[len(events)-1].GetDone().GetText() != "The user said blue." {
				t.Fatalf("B sent %v; want the turn to done", events)
			}
			first := events[0].GetSeq()
			if after >= 0 && first != uint64(after)+1 {
				t.Errorf("B started at seq %d, want %d", first, after+1)
			}
			var request *exprdv1.AgentLoopRunResponse
			for i, m := range events {
				if m.GetSeq() != first+uint64(i) {
					t.Fatalf("B's event %d has seq %d, want %d", i, m.GetSeq(), first+uint64(i))
				}
				if m.GetToolCallRequested().GetRunOnClient() {
					request = m
				}
				if r := m.GetToolResult(); r != nil && (r.GetOutputJson() != `{"colour":"blue"}` || r.GetIsError()) {
					t.Errorf("the call's result %v, want the answer given on B", r)
				}
			}
			switch {
			case !tc.pending && (len(pending) != 0 || request == nil):
				t.Fatalf("sent again on B: %v, requested %v; want the call requested as a new event only", pending, request)
			case !tc.pending:
			case len(pending) != 1 || !pending[0].GetToolCallRequested().GetRunOnClient() || pending[0].GetToolCallRequested().GetCall().GetId() != "c1":
				t.Fatalf("sent again on B: %v; want the call c1 once", pending)
			case request != nil && request.GetSeq() != pending[0].GetSeq():
				t.Errorf("sent again under seq %d, recorded under %d", pending[0].GetSeq(), request.GetSeq())
			}
			if len(rejected) != len(tc.extra) {
				t.Fatalf("Rejected on B: %v; want %d", rejected, len(tc.extra))
			}
			for _, m := range rejected {
				if st := status.FromProto(m.GetRejected().GetStatus()); st.Code() != codes.NotFound {
					t.Errorf("Rejected %v, want NOT_FOUND", m)
				}
			}
		})
	}
}

// waitRequested returns once turn id has recorded a request for the
// client to run a call, read from the NATS turn store at url.
func waitRequested(t *testing.T, url, id string) {
	t.Helper()
	st, err := turnstore.OpenNATS(context.Background(), turnstore.NATSConfig{URL: url, Limits: turnstore.DefaultLimits()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	found := errors.New("requested")
	_, err = st.Follow(ctx, id, 0, func(ev turnstore.Event) error {
		var m exprdv1.AgentLoopRunResponse
		if err := proto.Unmarshal(ev.Data, &m); err != nil {
			return err
		}
		if m.GetToolCallRequested().GetRunOnClient() {
			return found
		}
		return nil
	})
	if !errors.Is(err, found) {
		t.Fatalf("waiting for the call to be requested: %v", err)
	}
}

// Another caller cannot resume a turn on another replica, so never sees
// nor answers its requests: NOT_FOUND, as for an unknown turn, while the
// owner resumes it there and answers.
func TestTurnResumedOnAnotherReplicaOnlyByItsOwner(t *testing.T) {
	t.Parallel()
	url := startNATS(t)
	const alice, bob = "alice-token-0123456789", "bob-token-0123456789ab"
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("alice "+alice+" *\nbob "+bob+" *\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	script := scripted.Script{Loop: true, Turns: []scripted.Turn{
		{Match: &scripted.Match{LastRole: "user"}, ToolCalls: []scripted.ToolCall{{ID: "c1", Name: "ask_user", Arguments: json.RawMessage(`{}`)}}},
		{Match: &scripted.Match{LastRole: "tool"}, Text: "Done."},
	}}
	r := agentReplicas(t, url, script, 2, "--auth-tokens-file", tokens)
	a, b := r[0], r[1]
	as := func(tok string) context.Context {
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+tok), 30*time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	actx, drop := context.WithCancel(as(alice))
	sa, err := a.Run(actx)
	if err != nil {
		t.Fatal(err)
	}
	_ = sa.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: &exprdv1.AgentStart{Detach: proto.Bool(true),
		Messages: []*exprdv1.AgentMessage{{Role: exprdv1.AgentMessage_ROLE_USER, Content: "Ask."}},
		Tools:    []*exprdv1.AgentTool{{Name: "ask_user", Executor: exprdv1.AgentTool_EXECUTOR_CLIENT}}}}})
	var id string
	for {
		m, err := sa.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if id == "" {
			id = m.GetTurnId()
		}
		if m.GetToolCallRequested().GetRunOnClient() {
			break
		}
	}
	drop()
	resume := func(tok string) agentStream {
		s, err := b.Run(as(tok))
		if err != nil {
			t.Fatal(err)
		}
		_ = s.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Resume{Resume: &exprdv1.AgentResume{TurnId: id, AfterSeq: -1}}})
		return s
	}
	sb := resume(bob)
	_ = sb.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_ToolOutput{ToolOutput: &exprdv1.ToolOutput{CallId: "c1", OutputJson: `"bob's"`}}})
	if got, err := recvAll(sb); status.Code(err) != codes.NotFound || len(got) != 0 {
		t.Fatalf("bob's resume on B: %d events, %v; want none and NOT_FOUND", len(got), err)
	}
	sb = resume(alice)
	var result string
	for {
		m, err := sb.Recv()
		if err != nil {
			t.Fatalf("alice's resume on B: %v", err)
		}
		if m.GetPending() {
			_ = sb.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_ToolOutput{ToolOutput: &exprdv1.ToolOutput{CallId: "c1", OutputJson: `"alice's"`}}})
		}
		if r := m.GetToolResult(); r != nil {
			result = r.GetOutputJson()
		}
		if m.GetDone() != nil {
			break
		}
	}
	if result != `"alice's"` {
		t.Errorf("the call's result %s, want alice's answer", result)
	}
}
