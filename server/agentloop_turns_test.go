package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/model/scripted"
	"github.com/exprd/exprd/server"
	"github.com/exprd/exprd/server/auth"
	"github.com/exprd/exprd/turnstore"
)

var turnIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// checkSeqs fails unless events are numbered from first with no gaps, and
// only the one numbered 1 names the turn (id, when not "").
func checkSeqs(t *testing.T, events []*exprdv1.AgentLoopRunResponse, first uint64, id string) {
	t.Helper()
	for i, m := range events {
		if want := first + uint64(i); m.GetSeq() != want {
			t.Fatalf("event %d (%v): seq %d, want %d", i, m, m.GetSeq(), want)
		}
		switch {
		case m.GetSeq() == 1 && !turnIDPattern.MatchString(m.GetTurnId()):
			t.Fatalf("first event: turn_id %q, want 32 hex digits", m.GetTurnId())
		case m.GetSeq() == 1 && id != "" && m.GetTurnId() != id:
			t.Fatalf("first event: turn_id %q, want %q", m.GetTurnId(), id)
		case m.GetSeq() > 1 && i > 0 && m.GetTurnId() != "":
			t.Fatalf("event seq %d names the turn (%q): only the first does", m.GetSeq(), m.GetTurnId())
		}
	}
}

// Every event of a turn carries its seq, from 1 with no gaps, whatever
// the turn leaves out; the first names the turn, and no two turns share
// an id.
func TestAgentLoopTurnIDAndSeq(t *testing.T) {
	t.Parallel()
	twoSteps := []scripted.Turn{
		{Match: &scripted.Match{LastRole: "user"}, ToolCalls: []scripted.ToolCall{{ID: "c1", Name: "add", Arguments: args(map[string]any{"a": 1, "b": 2})}}},
		{Match: &scripted.Match{LastRole: "tool"}, Text: "It is three."},
	}
	for _, tc := range []struct {
		name  string
		start *exprdv1.AgentStart
	}{
		{"every event", &exprdv1.AgentStart{Messages: userMsg("Add."), Tools: []*exprdv1.AgentTool{{Name: "add", Executor: exprdv1.AgentTool_EXECUTOR_UTCP, UtcpTool: "math.add"}}}},
		{"events omitted", &exprdv1.AgentStart{Messages: userMsg("Add."), Tools: []*exprdv1.AgentTool{{Name: "add", Executor: exprdv1.AgentTool_EXECUTOR_UTCP, UtcpTool: "math.add"}},
			OmitEvents: []exprdv1.AgentEvent{exprdv1.AgentEvent_AGENT_EVENT_STEP_STARTED, exprdv1.AgentEvent_AGENT_EVENT_TEXT_DELTA}}},
		{"only done", &exprdv1.AgentStart{Messages: userMsg("Add."), Tools: []*exprdv1.AgentTool{{Name: "add", Executor: exprdv1.AgentTool_EXECUTOR_UTCP, UtcpTool: "math.add"}},
			OmitEvents: omittable()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := agentServerWith(t, scripted.Script{Turns: twoSteps, Loop: true})
			ids := map[string]bool{}
			for range 3 {
				events, err := drain(startAgent(t, c, tc.start), nil)
				if err != nil {
					t.Fatal(err)
				}
				checkSeqs(t, events, 1, "")
				if ids[events[0].GetTurnId()] {
					t.Fatalf("turn id %s given twice", events[0].GetTurnId())
				}
				ids[events[0].GetTurnId()] = true
			}
		})
	}
}

// resumeStream opens a stream resuming turn id after after, under ctx.
func resumeStream(t *testing.T, ctx context.Context, c exprdv1.AgentLoopClient, id string, after int64) agentClient {
	t.Helper()
	stream, err := c.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Resume{Resume: &exprdv1.AgentResume{TurnId: id, AfterSeq: after}}}); err != nil {
		t.Fatal(err)
	}
	return stream
}

func clientToolTurn(detach bool) *exprdv1.AgentStart {
	return &exprdv1.AgentStart{Messages: userMsg("Ask."), Detach: proto.Bool(detach),
		Tools: []*exprdv1.AgentTool{{Name: "ask_user", Executor: exprdv1.AgentTool_EXECUTOR_CLIENT}}}
}

var askTurns = []scripted.Turn{
	{Match: &scripted.Match{LastRole: "user"}, Text: "Let me ask.", ToolCalls: []scripted.ToolCall{{ID: "c1", Name: "ask_user", Arguments: args(map[string]any{})}}},
	{Match: &scripted.Match{LastRole: "tool"}, Text: "The user said blue."},
}

func stripID(m *exprdv1.AgentLoopRunResponse) *exprdv1.AgentLoopRunResponse {
	m = proto.Clone(m).(*exprdv1.AgentLoopRunResponse)
	m.TurnId = ""
	return m
}

// An ended turn replays to its done, from any seq; one that ended with a
// status replays to that status.
func TestAgentLoopReplayEndedTurn(t *testing.T) {
	t.Parallel()
	c := agentServerWith(t, scripted.Script{Turns: askTurns, Loop: true})
	stream := startAgent(t, c, clientToolTurn(false))
	want, err := drain(stream, func(m *exprdv1.AgentLoopRunResponse) {
		if m.GetToolCallRequested().GetRunOnClient() {
			_ = stream.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_ToolOutput{ToolOutput: &exprdv1.ToolOutput{CallId: "c1"}}})
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	id, n := want[0].GetTurnId(), int64(len(want))
	for _, tc := range []struct {
		after int64
		from  int64 // the first seq replayed
	}{{0, 1}, {3, 4}, {n - 1, n}, {n, n + 1}, {-1, n}, {-3, n - 2}, {-n, 1}, {-n - 5, 1}} {
		t.Run(fmt.Sprint("after ", tc.after), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			got, err := drain(resumeStream(t, ctx, c, id, tc.after), nil)
			if tc.from > n { // nothing after the last event: the stream ends as the turn did
				if len(got) != 0 || (err != nil && !errors.Is(err, io.EOF)) {
					t.Fatalf("got %d events, %v; want none and the end", len(got), err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkSeqs(t, got, uint64(tc.from), id)
			if int64(len(got)) != n-tc.from+1 || got[len(got)-1].GetDone() == nil {
				t.Fatalf("replayed %d events ending %v, want %d to done", len(got), got[len(got)-1], n-tc.from+1)
			}
			for i, m := range got {
				if !proto.Equal(stripID(m), stripID(want[int(tc.from)-1+i])) {
					t.Fatalf("replayed %v, want %v", m, want[int(tc.from)-1+i])
				}
			}
		})
	}

	// A turn that ended with a status (cancel) replays to it.
	stream = startAgent(t, c, clientToolTurn(false))
	m, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	_ = stream.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Cancel{Cancel: &exprdv1.AgentCancel{}}})
	_, err = drain(stream, nil)
	wantCode := status.Code(err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = drain(resumeStream(t, ctx, c, m.GetTurnId(), 0), nil)
	if status.Code(err) != codes.Canceled || wantCode != codes.Canceled {
		t.Fatalf("replay of a cancelled turn ended %v, the turn %v; want both CANCELED", err, wantCode)
	}
}

// resumeTokens are two callers, alice and bob.
const aliceToken, bobToken = "alice-token-0123456789", "bob-token-0123456789ab"

func bearerCtx(tok string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+tok)
}

// A resume the server cannot serve ends the stream at once: an unknown,
// expired or another caller's turn is NOT_FOUND with the same words, an
// after_seq past the latest event OUT_OF_RANGE, a malformed id
// INVALID_ARGUMENT.
func TestAgentLoopBadResume(t *testing.T) {
	t.Parallel()
	tokens, err := auth.ParseTokens(strings.NewReader("alice " + aliceToken + " *\nbob " + bobToken + " *"))
	if err != nil {
		t.Fatal(err)
	}
	clk := &fakeClock{now: time.Now()}
	st, err := turnstore.NewMemory(turnstore.MemoryConfig{Limits: turnstore.Limits{MaxEvents: 1000, MaxBytes: 1 << 20, Retention: time.Minute, MaxAge: time.Hour}, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	c := agentServerWith(t, scripted.Script{Turns: askTurns, Loop: true}, server.WithAuth(tokens), server.WithTurnStore(st))
	run := func(tok string, cancelIt bool) (string, int) {
		ctx, cancel := context.WithTimeout(bearerCtx(tok), 20*time.Second)
		defer cancel()
		stream, err := c.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_ = stream.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: clientToolTurn(false)}})
		events, _ := drain(stream, func(m *exprdv1.AgentLoopRunResponse) {
			if m.GetToolCallRequested().GetRunOnClient() {
				_ = stream.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_ToolOutput{ToolOutput: &exprdv1.ToolOutput{CallId: "c1"}}})
			}
		})
		return events[0].GetTurnId(), len(events)
	}
	run(aliceToken, false)
	expired, _ := run(aliceToken, false)
	clk.add(time.Minute + time.Second)  // past the retention of both
	alices, n := run(aliceToken, false) // a fresh one
	unknown := strings.Repeat("0", 32)
	notFound := ""
	for _, tc := range []struct {
		name   string
		token  string
		id     string
		after  int64
		code   codes.Code
		reason string
		field  string
	}{
		{"unknown id", aliceToken, unknown, 0, codes.NotFound, "TURN_NOT_FOUND", ""},
		{"expired", aliceToken, expired, 0, codes.NotFound, "TURN_NOT_FOUND", ""},
		{"another caller's", bobToken, alices, 0, codes.NotFound, "TURN_NOT_FOUND", ""},
		{"after_seq one past the end", aliceToken, alices, int64(n) + 1, codes.OutOfRange, "SEQ_OUT_OF_RANGE", "resume.after_seq"},
		{"not an id", aliceToken, "abc.>", 0, codes.InvalidArgument, "INVALID_FIELD", "resume.turn_id"},
		{"an id in capitals", aliceToken, strings.ToUpper(alices), 0, codes.InvalidArgument, "INVALID_FIELD", "resume.turn_id"},
		{"at the end", aliceToken, alices, int64(n), codes.OK, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(bearerCtx(tc.token), 20*time.Second)
			defer cancel()
			events, err := drain(resumeStream(t, ctx, c, tc.id, tc.after), nil)
			if errors.Is(err, io.EOF) {
				err = nil
			}
			st := wantStatus(t, err, tc.code, tc.field)
			if got := reasonOf(st); got != tc.reason {
				t.Errorf("reason %q, want %q", got, tc.reason)
			}
			if len(events) != 0 {
				t.Errorf("got %d events, want none", len(events))
			}
			if tc.code == codes.NotFound {
				if notFound != "" && st.Message() != notFound {
					t.Errorf("message %q, want the same as the others': %q", st.Message(), notFound)
				}
				notFound = st.Message()
			}
		})
	}
}

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// A turn's events are bounded by the turn store's limits: at a limit the
// turn runs to done, one past it ends RESOURCE_EXHAUSTED naming the limit,
// and what was recorded replays to that status.
func TestAgentLoopTurnStoreLimits(t *testing.T) {
	t.Parallel()
	script := scripted.Script{Turns: []scripted.Turn{{Text: "one two three four"}}, Loop: true}
	start := &exprdv1.AgentStart{Messages: userMsg("Count.")}
	// The turn once, unbounded: how many events, how many bytes.
	events, err := drain(startAgent(t, agentServerWith(t, script), start), nil)
	if err != nil {
		t.Fatal(err)
	}
	var size int64
	for _, m := range events {
		size += int64(proto.Size(m))
	}
	n := len(events)
	for _, tc := range []struct {
		name    string
		events  int
		bytes   int64
		subject string
	}{
		{"events at the limit", n, 1 << 20, ""},
		{"events one past", n - 1, 1 << 20, "turn_max_events"},
		{"bytes at the limit", 1000, size, ""},
		{"bytes one past", 1000, size - 1, "turn_max_bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, err := turnstore.NewMemory(turnstore.MemoryConfig{Limits: turnstore.Limits{MaxEvents: tc.events, MaxBytes: tc.bytes, Retention: time.Minute, MaxAge: time.Hour}})
			if err != nil {
				t.Fatal(err)
			}
			c := agentServerWith(t, script, server.WithTurnStore(st))
			got, err := drain(startAgent(t, c, start), nil)
			if tc.subject == "" {
				if err != nil || len(got) != n {
					t.Fatalf("got %d events, %v; want %d to done", len(got), err, n)
				}
				return
			}
			s := status.Convert(err)
			if s.Code() != codes.ResourceExhausted || quotaSubject(s) != tc.subject {
				t.Fatalf("got %v (quota %q), want RESOURCE_EXHAUSTED %s", err, quotaSubject(s), tc.subject)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			replayed, rerr := drain(resumeStream(t, ctx, c, got[0].GetTurnId(), 0), nil)
			if len(replayed) != len(got) || status.Code(rerr) != codes.ResourceExhausted {
				t.Fatalf("replayed %d events, %v; want the %d sent and RESOURCE_EXHAUSTED", len(replayed), rerr, len(got))
			}
		})
	}
}

// AgentLoop.Cancel stops a running turn (the stop recorded in the store
// first): its stream ends CANCELLED; a second Cancel finds it ended;
// another caller's turn, an unknown one and a malformed id are refused
// as a resume is, and change nothing.
func TestAgentLoopCancelUnary(t *testing.T) {
	t.Parallel()
	tokens, err := auth.ParseTokens(strings.NewReader("alice " + aliceToken + " *\nbob " + bobToken + " *"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := turnstore.NewMemory(turnstore.MemoryConfig{Limits: turnstore.DefaultLimits()})
	if err != nil {
		t.Fatal(err)
	}
	c := agentServerWith(t, scripted.Script{Turns: askTurns, Loop: true}, server.WithAuth(tokens), server.WithTurnStore(st))
	ctx, cancel := context.WithTimeout(bearerCtx(aliceToken), 20*time.Second)
	defer cancel()
	stream, err := c.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = stream.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: clientToolTurn(false)}})
	var id string
	for { // to the call that waits for the client
		m, err := stream.Recv()
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
	for _, tc := range []struct {
		name, token, id string
		want            codes.Code
		reason          string
	}{
		{"another caller's turn", bobToken, id, codes.NotFound, "TURN_NOT_FOUND"},
		{"an unknown turn", aliceToken, strings.Repeat("0", 32), codes.NotFound, "TURN_NOT_FOUND"},
		{"a malformed id", aliceToken, "a.>", codes.InvalidArgument, "INVALID_FIELD"},
	} {
		_, err := c.Cancel(bearerCtx(tc.token), &exprdv1.AgentLoopCancelRequest{TurnId: tc.id})
		if s := status.Convert(err); s.Code() != tc.want || reasonOf(s) != tc.reason {
			t.Errorf("%s: %v (%s), want %v %s", tc.name, err, reasonOf(s), tc.want, tc.reason)
		}
	}
	if rec, err := st.Get(context.Background(), id); err != nil || rec.Cancelled || !rec.Ended.IsZero() {
		t.Fatalf("after the refused cancels: %+v, %v; want it running, no stop recorded", rec, err)
	}
	resp, err := c.Cancel(bearerCtx(aliceToken), &exprdv1.AgentLoopCancelRequest{TurnId: id})
	if err != nil || resp.GetEnded() {
		t.Fatalf("the owner's cancel: %v, %v; want the running turn stopped", resp, err)
	}
	for {
		if _, err = stream.Recv(); err != nil {
			break
		}
	}
	if status.Code(err) != codes.Canceled {
		t.Fatalf("the cancelled turn's stream ended %v, want CANCELLED", err)
	}
	if rec, err := st.Get(context.Background(), id); err != nil || !rec.Cancelled {
		t.Errorf("the record: %+v, %v; want the stop recorded", rec, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err = c.Cancel(bearerCtx(aliceToken), &exprdv1.AgentLoopCancelRequest{TurnId: id})
		if err != nil || resp.GetEnded() || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // its end is recorded as the handler returns
	}
	if err != nil || !resp.GetEnded() {
		t.Errorf("a second cancel: %v, %v; want ended", resp, err)
	}
}

// A disconnect is not a stop: a turn whose start leaves detach unset, or
// sets it, goes on when its client goes away, and a stream that resumes
// it answers its waiting request and reads it to done; detach: false
// asks for the stream's end to cancel the turn, which then replays to
// CANCELLED.
func TestAgentLoopDisconnectIsNotStop(t *testing.T) {
	t.Parallel()
	c := agentServerWith(t, scripted.Script{Turns: askTurns, Loop: true})
	for _, tc := range []struct {
		name   string
		detach *bool
		end    codes.Code
	}{
		{"detach unset", nil, codes.OK},
		{"detach true", proto.Bool(true), codes.OK},
		{"detach false", proto.Bool(false), codes.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			start := clientToolTurn(false)
			start.Detach = tc.detach
			ctx, cancel := context.WithCancel(context.Background())
			id := awaitClientCall(t, c, ctx, start)
			cancel() // the client goes away
			rctx, rcancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer rcancel()
			resumed := resumeStream(t, rctx, c, id, 0)
			// A turn the stream's end cancels is left unanswered: the
			// cancel reaches it, whenever the server sees the end.
			events, err := drain(resumed, func(m *exprdv1.AgentLoopRunResponse) {
				if m.GetPending() && tc.end == codes.OK {
					_ = resumed.Send(answerTo(m))
				}
			})
			if errors.Is(err, io.EOF) {
				err = nil
			}
			if status.Code(err) != tc.end {
				t.Fatalf("the resumed turn ended %v after %d events, want %v", err, len(events), tc.end)
			}
			if tc.end == codes.OK && events[len(events)-1].GetDone().GetText() != "The user said blue." {
				t.Fatalf("the resumed turn's done: %v", events[len(events)-1])
			}
		})
	}
}

// A deadline the client set on the stream that started a turn is the
// turn's, detached or not: past it the turn ends DEADLINE_EXCEEDED, as a
// stream that resumes it reads.
func TestAgentLoopStreamDeadlineEndsTheTurn(t *testing.T) {
	t.Parallel()
	c := agentServerWith(t, scripted.Script{Turns: askTurns, Loop: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	stream, err := c.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: clientToolTurn(true)}}); err != nil {
		t.Fatal(err)
	}
	var id string
	for {
		m, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if m.GetSeq() == 1 {
			id = m.GetTurnId()
		}
		if m.GetToolCallRequested().GetRunOnClient() {
			break // left unanswered: the turn waits past the deadline
		}
	}
	<-ctx.Done()
	rctx, rcancel := context.WithCancel(context.Background()) // no deadline of its own: the status is the turn's
	defer rcancel()
	events, err := drain(resumeStream(t, rctx, c, id, 0), nil)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("the turn past its stream's deadline replays to %v after %d events, want DEADLINE_EXCEEDED", err, len(events))
	}
}

// A caller has at most --turn-max-per-caller turns running on a replica,
// attached or detached: at the limit a turn starts, one past it is
// refused RESOURCE_EXHAUSTED (turn_max_per_caller) while another caller's
// starts, and a turn's end makes room again.
func TestAgentLoopTurnsPerCaller(t *testing.T) {
	t.Parallel()
	tokens, err := auth.ParseTokens(strings.NewReader("alice " + aliceToken + " *\nbob " + bobToken + " *"))
	if err != nil {
		t.Fatal(err)
	}
	const limit = 2
	c := agentServerWith(t, scripted.Script{Turns: askTurns, Loop: true}, server.WithAuth(tokens), server.WithMaxTurnsPerCaller(limit))
	// start starts a detached turn as tok and leaves it waiting for the
	// client's answer, the client gone; it returns the turn's id, or the
	// status that refused it.
	start := func(tok string) (string, error) {
		ctx, cancel := context.WithCancel(bearerCtx(tok))
		defer cancel()
		stream, err := c.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: clientToolTurn(true)}}); err != nil {
			t.Fatal(err)
		}
		var id string
		for {
			m, err := stream.Recv()
			if err != nil {
				return "", err
			}
			if m.GetSeq() == 1 {
				id = m.GetTurnId()
			}
			if m.GetToolCallRequested().GetRunOnClient() {
				return id, nil
			}
		}
	}
	var ids []string
	for i := range limit {
		id, err := start(aliceToken)
		if err != nil {
			t.Fatalf("turn %d of %d: %v", i+1, limit, err)
		}
		ids = append(ids, id)
	}
	_, err = start(aliceToken)
	if s := status.Convert(err); s.Code() != codes.ResourceExhausted || quotaSubject(s) != "turn_max_per_caller" {
		t.Fatalf("one past the limit: %v (quota %q), want RESOURCE_EXHAUSTED turn_max_per_caller", err, quotaSubject(s))
	}
	if _, err := start(bobToken); err != nil {
		t.Fatalf("another caller: %v", err)
	}
	ctx, cancel := context.WithTimeout(bearerCtx(aliceToken), 10*time.Second)
	defer cancel()
	if _, err := c.Cancel(ctx, &exprdv1.AgentLoopCancelRequest{TurnId: ids[0]}); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := start(aliceToken)
		if err == nil {
			break
		}
		if status.Code(err) != codes.ResourceExhausted || ctx.Err() != nil {
			t.Fatalf("after a cancel: %v, want room for one more", err)
		}
		time.Sleep(20 * time.Millisecond) // the cancelled turn ends
	}
}
