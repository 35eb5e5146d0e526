package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/exprd/exprd/client"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/internal/testkit/tcpcut"
	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/model/openaicompat"
	"github.com/exprd/exprd/model/scripted"
	"github.com/exprd/exprd/server"
	"google.golang.org/protobuf/proto"
)

// askScript asks the user (a client-run tool that needs approval), then
// answers; both replies stream slowly, a word every 15 ms.
var askScript = scripted.Script{Loop: true, Turns: []scripted.Turn{
	{Match: &scripted.Match{LastRole: "user"}, Text: "Let me ask the user which colour they like best of all.", ChunkDelayMS: 15,
		ToolCalls: []scripted.ToolCall{{ID: "c1", Name: "ask_user", Arguments: json.RawMessage(`{"question":"colour?"}`)}}},
	{Match: &scripted.Match{LastRole: "tool"}, Text: "The user said blue, which is a fine colour for a sky or a sea.", ChunkDelayMS: 15},
}}

// askStart is a detached turn with askScript's tool.
func askStart() *exprdv1.AgentStart {
	return &exprdv1.AgentStart{Detach: proto.Bool(true),
		Messages: []*exprdv1.AgentMessage{{Role: exprdv1.AgentMessage_ROLE_USER, Content: "Ask."}},
		Tools:    []*exprdv1.AgentTool{{Name: "ask_user", Executor: exprdv1.AgentTool_EXECUTOR_CLIENT, NeedsApproval: true}}}
}

// agentAddr serves exprd with the scripted model as its default provider.
func agentAddr(t *testing.T, script scripted.Script) string {
	t.Helper()
	ms, err := scripted.Start(script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ms.Close)
	p, err := openaicompat.New("scripted", openaicompat.ProviderConfig{BaseURL: ms.BaseURL(), Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	models := model.NewRegistry()
	if err := models.Register("scripted", p); err != nil {
		t.Fatal(err)
	}
	addr, stop, err := startServer(server.WithModels(models), server.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return addr
}

func dialT(t *testing.T, addr string) *client.Client {
	t.Helper()
	c, err := client.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// recorder keeps what a Turn's handlers were told and asked.
type recorder struct {
	mu         sync.Mutex
	events     []*exprdv1.AgentLoopRunResponse
	approvals  int
	runs       int
	reconnects []error
	rejected   []*exprdv1.Rejected
}

func (r *recorder) handlers() client.TurnHandlers {
	return client.TurnHandlers{
		OnEvent: func(m *exprdv1.AgentLoopRunResponse) {
			r.mu.Lock()
			r.events = append(r.events, m)
			r.mu.Unlock()
		},
		OnApproval: func(context.Context, *exprdv1.AgentApprovalRequest) (bool, string, error) {
			r.mu.Lock()
			r.approvals++
			r.mu.Unlock()
			return true, "", nil
		},
		Tools: map[string]client.ToolFunc{"ask_user": func(context.Context, *exprdv1.AgentToolCall) (json.RawMessage, error) {
			r.mu.Lock()
			r.runs++
			r.mu.Unlock()
			return json.RawMessage(`{"colour":"blue"}`), nil
		}},
		OnRejected: func(rej *exprdv1.Rejected) {
			r.mu.Lock()
			r.rejected = append(r.rejected, rej)
			r.mu.Unlock()
		},
		OnReconnect: func(err error, _ int, _ time.Duration) {
			r.mu.Lock()
			r.reconnects = append(r.reconnects, err)
			r.mu.Unlock()
		},
	}
}

// checkEvents fails unless events are seqs from..done, each once, in
// order, ending with done, and the only approval and tool result the
// turn's.
func checkEvents(t *testing.T, events []*exprdv1.AgentLoopRunResponse, from uint64, done *exprdv1.AgentDone) {
	t.Helper()
	var results []string
	for i, m := range events {
		if want := from + uint64(i); m.GetSeq() != want {
			t.Fatalf("event %d has seq %d, want %d: %v", i, m.GetSeq(), want, events)
		}
		if m.GetPending() {
			t.Errorf("OnEvent was told of a request sent again: %v", m)
		}
		if r := m.GetToolResult(); r != nil {
			results = append(results, r.GetOutputJson())
		}
	}
	if len(events) == 0 || events[len(events)-1].GetDone() == nil {
		t.Fatalf("the events do not end with done: %v", events)
	}
	if done != nil && events[len(events)-1].GetDone() != done {
		t.Errorf("Wait's done is not the last event's")
	}
	if strings.Join(results, " ") != `{"colour":"blue"}` {
		t.Errorf("tool results %v, want the client's answer once", results)
	}
}

// A turn whose connection drops three times, once while its client-run
// tool runs (its output sent on the dying stream), is resumed each time
// from the last seq the Turn has: every event once, in order, to done;
// the approval asked and the tool run once.
func TestTurnReconnects(t *testing.T) {
	t.Parallel()
	addr := agentAddr(t, askScript)
	proxy, err := tcpcut.Start(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	c := dialT(t, proxy.Addr())
	var r recorder
	h := r.handlers()
	var deltas atomic.Int32
	onEvent := h.OnEvent
	h.OnEvent = func(m *exprdv1.AgentLoopRunResponse) {
		onEvent(m)
		// Cut in the middle of each step's text.
		if m.GetTextDelta() != nil {
			if n := deltas.Add(1); n == 4 || n == 16 {
				proxy.Cut()
			}
		}
	}
	run := h.Tools["ask_user"]
	h.Tools["ask_user"] = func(ctx context.Context, call *exprdv1.AgentToolCall) (json.RawMessage, error) {
		proxy.Cut() // the output goes on a stream that is gone
		return run(ctx, call)
	}
	turn, err := c.StartTurn(context.Background(), askStart(), h, &client.Reconnect{Backoff: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	done, err := turn.Wait()
	if err != nil {
		t.Fatalf("Wait: %v (events %v)", err, r.events)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	checkEvents(t, r.events, 1, done)
	if r.events[0].GetTurnId() != turn.ID() || len(turn.ID()) != 32 {
		t.Errorf("turn id %q, the first event's %q", turn.ID(), r.events[0].GetTurnId())
	}
	if r.approvals != 1 || r.runs != 1 {
		t.Errorf("approval asked %d times, tool run %d times; want once each", r.approvals, r.runs)
	}
	if len(r.reconnects) < 3 {
		t.Errorf("reconnected after %v, want after each of the 3 cuts", r.reconnects)
	}
	for _, err := range r.reconnects {
		if status.Code(err) != codes.Unavailable {
			t.Errorf("reconnected after %v, want UNAVAILABLE", err)
		}
	}
	if len(r.rejected) != 0 {
		t.Errorf("rejected %v: a reply sent again is not told", r.rejected)
	}
	if got := turn.LastSeq(); got != r.events[len(r.events)-1].GetSeq() {
		t.Errorf("LastSeq %d, want the done's %d", got, r.events[len(r.events)-1].GetSeq())
	}
	if !strings.HasPrefix(done.GetText(), "The user said blue") {
		t.Errorf("done %v", done)
	}
}

// ResumeTurn follows a turn whose client went away while an approval
// waited: the events from seq 1 again, the replayed approval asked only
// once, when the server sends it again (pending); then the turn's end.
// Resumed from 0 once it has ended, it replays to done and asks nothing.
func TestResumeTurnAsksOnlyWhatWaits(t *testing.T) {
	t.Parallel()
	c := dialT(t, agentAddr(t, askScript))
	asked := make(chan struct{})
	first, err := c.StartTurn(context.Background(), askStart(), client.TurnHandlers{
		OnApproval: func(ctx context.Context, _ *exprdv1.AgentApprovalRequest) (bool, string, error) {
			close(asked)
			<-ctx.Done() // nobody answers: the client goes away
			return false, "", ctx.Err()
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-asked
	if _, err := first.Close(); !errors.Is(err, client.ErrTurnClosed) {
		t.Fatalf("Close: %v, want ErrTurnClosed", err)
	}

	var r recorder
	turn, err := c.ResumeTurn(context.Background(), first.ID(), 0, r.handlers(), nil)
	if err != nil {
		t.Fatal(err)
	}
	done, err := turn.Wait()
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	checkEvents(t, r.events, 1, done)
	if r.approvals != 1 || r.runs != 1 {
		t.Errorf("approval asked %d times, tool run %d times; want once each", r.approvals, r.runs)
	}

	var again recorder
	replay, err := c.ResumeTurn(context.Background(), first.ID(), 0, again.handlers(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := replay.Wait(); err != nil {
		t.Fatal(err)
	}
	checkEvents(t, again.events, 1, nil)
	if again.approvals != 0 || again.runs != 0 {
		t.Errorf("the ended turn's replay asked %d approvals and ran the tool %d times, want none", again.approvals, again.runs)
	}
	if len(again.events) != len(r.events) {
		t.Errorf("replayed %d events, want the %d of the turn", len(again.events), len(r.events))
	}

	// From a negative seq: the last two events.
	var tail recorder
	last, err := c.ResumeTurn(context.Background(), first.ID(), -2, tail.handlers(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := last.Wait(); err != nil {
		t.Fatal(err)
	}
	if len(tail.events) != 2 || tail.events[1].GetDone() == nil {
		t.Errorf("after -2: %v, want the last two events", tail.events)
	}
}

// A turn the server ends with its status (here a cancel from
// AgentLoop.Cancel) is not resumed: that is its answer.
func TestTurnServerErrorIsNotRetried(t *testing.T) {
	t.Parallel()
	c := dialT(t, agentAddr(t, askScript))
	var r recorder
	h := r.handlers()
	var turn *client.Turn
	ready := make(chan struct{})
	h.OnApproval = func(ctx context.Context, _ *exprdv1.AgentApprovalRequest) (bool, string, error) {
		<-ready
		if _, err := turn.Cancel(ctx); err != nil {
			t.Errorf("Cancel: %v", err)
		}
		<-ctx.Done()
		return false, "", ctx.Err()
	}
	turn, err := c.StartTurn(context.Background(), askStart(), h, &client.Reconnect{Backoff: time.Millisecond})
	close(ready)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := turn.Wait(); status.Code(err) != codes.Canceled {
		t.Fatalf("Wait: %v, want CANCELED", err)
	}
	if len(r.reconnects) != 0 {
		t.Errorf("reconnected after %v", r.reconnects)
	}
}

// A Turn that cannot reach the server any more gives up after
// Reconnect.MaxAttempts failed resumes in a row, with the last error; an
// unknown turn is the server's NOT_FOUND at once.
func TestTurnGivesUp(t *testing.T) {
	t.Parallel()
	addr := agentAddr(t, askScript)
	proxy, err := tcpcut.Start(addr)
	if err != nil {
		t.Fatal(err)
	}
	c := dialT(t, proxy.Addr())
	var attempts []int
	var once sync.Once
	h := client.TurnHandlers{
		OnEvent:     func(*exprdv1.AgentLoopRunResponse) { once.Do(func() { go proxy.Close() }) },
		OnReconnect: func(_ error, n int, _ time.Duration) { attempts = append(attempts, n) },
	}
	turn, err := c.StartTurn(context.Background(), askStart(), h, &client.Reconnect{MaxAttempts: 3, Backoff: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = turn.Wait()
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "gave up resuming turn "+turn.ID()+" after 3 attempts") {
		t.Fatalf("Wait: %v, want UNAVAILABLE after 3 attempts", err)
	}
	if len(attempts) != 3 || attempts[2] != 3 {
		t.Errorf("attempts %v, want 1, 2, 3", attempts)
	}

	direct := dialT(t, addr)
	_, err = direct.ResumeTurn(context.Background(), strings.Repeat("ab", 16), 0, client.TurnHandlers{}, &client.Reconnect{})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("ResumeTurn of an unknown turn: %v, want NOT_FOUND", err)
	}
}
