package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/model/scripted"
	"github.com/exprd/exprd/server"
	"github.com/exprd/exprd/turnstore"
)

// outageStore is a turn store whose writes and reads fail as a store out
// of reach does while down is set (the NATS store's outage, with a real
// server stopped, is the cluster module's test).
type outageStore struct {
	turnstore.Store
	down atomic.Bool
	// appends, when set, is how many appends succeed before the store
	// goes down.
	appends atomic.Int64
	counted atomic.Bool
}

// Kind is not the memory store's, whose writes are never kept (it cannot
// be out of reach).
func (s *outageStore) Kind() string { return "outage" }

func (s *outageStore) out() error {
	if s.down.Load() {
		return fmt.Errorf("%w: connection refused", turnstore.ErrUnavailable)
	}
	return nil
}

func (s *outageStore) Create(ctx context.Context, id, owner string) error {
	if err := s.out(); err != nil {
		return err
	}
	return s.Store.Create(ctx, id, owner)
}

func (s *outageStore) Append(ctx context.Context, id string, ev turnstore.Event) error {
	if s.counted.Load() && s.appends.Add(-1) < 0 {
		s.down.Store(true)
	}
	if err := s.out(); err != nil {
		return err
	}
	return s.Store.Append(ctx, id, ev)
}

func (s *outageStore) End(ctx context.Context, id string, end []byte) error {
	if err := s.out(); err != nil {
		return err
	}
	return s.Store.End(ctx, id, end)
}

func newOutageStore(t *testing.T, lim turnstore.Limits) *outageStore {
	t.Helper()
	mem, err := turnstore.NewMemory(turnstore.MemoryConfig{Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mem.Close() })
	return &outageStore{Store: mem}
}

// askTwice asks the client twice, then answers.
var askTwice = []scripted.Turn{
	{Text: "First.", ToolCalls: []scripted.ToolCall{{ID: "c1", Name: "ask_user", Arguments: args(map[string]any{})}}},
	{Text: "Second.", ToolCalls: []scripted.ToolCall{{ID: "c2", Name: "ask_user", Arguments: args(map[string]any{})}}},
	{Text: "The user said blue twice."},
}

// A turn whose store goes out of reach goes on, not durable, and says so;
// what it could not record is recorded when the store is back, in order,
// and the turn says it is durable again: a replay from the store is then
// every event the client saw, once, in order.
func TestAgentLoopStoreOutageTurnGoesOn(t *testing.T) {
	t.Parallel()
	st := newOutageStore(t, turnstore.DefaultLimits())
	c := agentServerWith(t, scripted.Script{Turns: askTwice}, server.WithTurnStore(st))
	stream := startAgent(t, c, clientToolTurn(false))
	// The first question is answered at once, with the store down from
	// then; the notice that the turn is not durable brings the store back;
	// the second question is answered once the turn is durable again.
	asked := 0
	var second *exprdv1.AgentLoopRunResponse
	durableAgain := false
	answer := func(m *exprdv1.AgentLoopRunResponse) {
		if err := stream.Send(answerTo(m)); err != nil {
			t.Error(err)
		}
	}
	events, err := drain(stream, func(m *exprdv1.AgentLoopRunResponse) {
		switch d := m.GetDurability(); {
		case m.GetToolCallRequested().GetRunOnClient():
			asked++
			if asked == 1 {
				st.down.Store(true)
				answer(m)
			} else if second = m; durableAgain {
				answer(m)
			}
		case d != nil && !d.GetDurable():
			// The store's own words (here "connection refused"; NATS's
			// name its servers) are the operator's, not the client's.
			if asked != 1 || !strings.Contains(d.GetReason(), "out of reach") || strings.Contains(d.GetReason(), "refused") {
				t.Errorf("not durable after %d questions, reason %q", asked, d.GetReason())
			}
			st.down.Store(false)
		case d != nil:
			if durableAgain = true; second != nil {
				answer(second)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	checkSeqs(t, events, 1, "")
	var notices []bool
	for _, m := range events {
		if d := m.GetDurability(); d != nil {
			notices = append(notices, d.GetDurable())
		}
	}
	if fmt.Sprint(notices) != "[false true]" {
		t.Fatalf("durability notices %v, want [false true]", notices)
	}
	replay := replayAll(t, c, events[0].GetTurnId())
	if len(replay) != len(events) {
		t.Fatalf("the store replays %d events, the client saw %d", len(replay), len(events))
	}
	for i := range events {
		if !proto.Equal(stripID(replay[i]), stripID(events[i])) {
			t.Fatalf("event %d: replayed %v, sent %v", i, replay[i], events[i])
		}
	}
}

// replayAll resumes turn id from its start and reads it to its end,
// waiting for the store to hold it.
func replayAll(t *testing.T, c exprdv1.AgentLoopClient, id string) []*exprdv1.AgentLoopRunResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	events, err := drain(resumeStream(t, ctx, c, id, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	return events
}

// A turn that ends while its store is out of reach records its end when
// the store is back; one that keeps more than its limits allow ends, with
// the limit's status (at the limit it does not); a turn does not start
// without its store.
func TestAgentLoopStoreOutageBounds(t *testing.T) {
	t.Parallel()
	oneStep := []scripted.Turn{{Text: "one two three"}}
	// The events of oneStep's turn: step_started, 3 text deltas,
	// step_finished, done; the not-durable notice is the seventh.
	const events = 7
	for _, tc := range []struct {
		name      string
		maxEvents int
		downAt    string // start: before the turn; first: after its first event; omit: first, the notice omitted
		code      codes.Code
		reason    string // the quota's subject, or the ErrorInfo's reason
	}{
		{"ends while out of reach", 100, "first", codes.OK, ""},
		// The limit counts the events recorded and those kept alike.
		{"kept at the limit", events, "first", codes.OK, ""},
		{"kept one past the limit", events - 1, "first", codes.ResourceExhausted, "turn_max_events"},
		{"no start without the store", 100, "start", codes.Unavailable, "TURN_STORE_UNAVAILABLE"},
		{"the notice omitted", 100, "omit", codes.OK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lim := turnstore.DefaultLimits()
			lim.MaxEvents = tc.maxEvents
			st := newOutageStore(t, lim)
			st.counted.Store(tc.downAt != "start")
			st.appends.Store(1)
			c := agentServerWith(t, scripted.Script{Turns: oneStep}, server.WithTurnStore(st))
			st.down.Store(tc.downAt == "start")
			start := &exprdv1.AgentStart{Messages: userMsg("Count.")}
			want := events
			if tc.downAt == "omit" {
				start.OmitEvents, want = []exprdv1.AgentEvent{exprdv1.AgentEvent_AGENT_EVENT_DURABILITY}, events-1
			}
			stream := startAgent(t, c, start)
			var id string
			got, err := drain(stream, func(m *exprdv1.AgentLoopRunResponse) {
				if m.GetSeq() == 1 {
					id = m.GetTurnId()
				}
			})
			if tc.code != codes.OK {
				s := status.Convert(err)
				if s.Code() != tc.code || (quotaSubject(s) != tc.reason && reasonOf(s) != tc.reason) {
					t.Fatalf("got %v (%s, quota %q), want %s %s", err, reasonOf(s), quotaSubject(s), tc.code, tc.reason)
				}
				if tc.downAt == "start" && len(got) != 0 {
					t.Fatalf("a turn without its store sent %v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != want || got[len(got)-1].GetDone() == nil {
				t.Fatalf("got %d events, want %d ending in done: %v", len(got), want, got)
			}
			rec, err := st.Store.Get(context.Background(), id)
			if err != nil || !rec.Ended.IsZero() || rec.Last != 1 {
				t.Fatalf("while out of reach the store holds %+v (%v), want the first event only", rec, err)
			}
			st.counted.Store(false)
			st.down.Store(false)
			replay := replayAll(t, c, id)
			if len(replay) != want {
				t.Fatalf("the store replays %d events, want %d", len(replay), want)
			}
		})
	}
}
