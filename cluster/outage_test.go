package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/model/scripted"
	"github.com/exprd/exprd/turnstore"
)

// natsAt is a NATS server with JetStream on a fixed loopback port and
// store directory, which a test stops and starts again in its place.
type natsAt struct {
	t    *testing.T
	opts natsserver.Options
	ns   *natsserver.Server
}

func newNATSAt(t *testing.T) *natsAt {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := lis.Addr().(*net.TCPAddr).Port
	_ = lis.Close()
	n := &natsAt{t: t, opts: natsserver.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true}}
	n.start()
	t.Cleanup(func() { n.ns.Shutdown() })
	return n
}

func (n *natsAt) start() {
	n.t.Helper()
	opts := n.opts
	ns, err := natsserver.NewServer(&opts)
	if err != nil {
		n.t.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		n.t.Fatal("nats-server did not start")
	}
	n.ns = ns
}

func (n *natsAt) url() string { return "nats://127.0.0.1:" + strconv.Itoa(n.opts.Port) }

// startOutageReplica is an exprd process on the NATS turn store at url,
// its lease longer than the outages of these tests.
func startOutageReplica(t *testing.T, name, url string, l *ledger) *turnReplica {
	t.Helper()
	return startNATSReplica(t, name, url, l.modelsConfig, "--manuals-dir", l.manualsDir, "--turn-lease", "30s")
}

// NATS stopped in the middle of a turn: the turn goes on on its replica
// and says it is not durable; a new turn is refused UNAVAILABLE; NATS
// back (the same server, its store kept), the turn says it is durable
// again and runs to done; another replica then replays it, every event
// the client saw once and in order, the two notices among them.
func TestTurnGoesOnWhileNATSIsDown(t *testing.T) {
	n := newNATSAt(t)
	l := startLedger(t, 0)
	ask := func(id string) scripted.Turn {
		return scripted.Turn{Text: "Asking.", ToolCalls: []scripted.ToolCall{{ID: id, Name: "ask_user", Arguments: json.RawMessage(`{}`)}}}
	}
	l.scriptedModel(t, scripted.Script{Loop: true, Turns: []scripted.Turn{ask("c1"), ask("c2"), {Text: "The user said blue twice."}}})
	a := startOutageReplica(t, "A", n.url(), l)
	b := startOutageReplica(t, "B", n.url(), l)
	start := func() *exprdv1.AgentLoopRunRequest {
		return &exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: &exprdv1.AgentStart{
			Messages: []*exprdv1.AgentMessage{{Role: exprdv1.AgentMessage_ROLE_USER, Content: "Ask me twice."}}, Detach: proto.Bool(true),
			Tools: []*exprdv1.AgentTool{{Name: "ask_user", Executor: exprdv1.AgentTool_EXECUTOR_CLIENT}}}}}
	}
	answer := func(s agentStream, m *exprdv1.AgentLoopRunResponse) {
		t.Helper()
		out := &exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_ToolOutput{ToolOutput: &exprdv1.ToolOutput{
			CallId: m.GetToolCallRequested().GetCall().GetId(), OutputJson: `{"answer":"blue"}`}}}
		if err := s.Send(out); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := a.agent.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(start()); err != nil {
		t.Fatal(err)
	}
	var seen []*exprdv1.AgentLoopRunResponse
	// next reads the turn's events up to the first that want says is it.
	next := func(what string, want func(*exprdv1.AgentLoopRunResponse) bool) *exprdv1.AgentLoopRunResponse {
		t.Helper()
		for {
			m, err := s.Recv()
			if err != nil {
				t.Fatalf("waiting for %s: %v (after %v)", what, err, seen)
			}
			seen = append(seen, m)
			if want(m) {
				return m
			}
		}
	}
	asked := func(m *exprdv1.AgentLoopRunResponse) bool { return m.GetToolCallRequested().GetRunOnClient() }
	notice := func(durable bool) func(*exprdv1.AgentLoopRunResponse) bool {
		return func(m *exprdv1.AgentLoopRunResponse) bool {
			return m.GetDurability() != nil && m.GetDurability().GetDurable() == durable
		}
	}
	first := next("the first question", asked)
	n.ns.Shutdown()
	n.ns.WaitForShutdown()
	answer(s, first)
	off := next("the turn saying it is not durable", notice(false))
	if !strings.Contains(off.GetDurability().GetReason(), "out of reach") {
		t.Errorf("not durable, because %q", off.GetDurability().GetReason())
	}
	second := next("the second question, asked while NATS is down", asked)
	if got := replicaMetric(t, a, "exprd_turns_not_durable", ""); got != 1 {
		t.Errorf("A's exprd_turns_not_durable %v while NATS is down, want 1", got)
	}

	// A new turn needs its store.
	s2, err := b.agent.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Send(start()); err != nil {
		t.Fatal(err)
	}
	_, err = recvAll(s2)
	if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "turn store is unavailable") {
		t.Fatalf("a new turn while NATS is down: %v, want UNAVAILABLE, the turn store unavailable", err)
	}

	n.start()
	next("the turn saying it is durable again", notice(true))
	answer(s, second)
	next("done", func(m *exprdv1.AgentLoopRunResponse) bool { return m.GetDone() != nil })
	if m, err := s.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("after done: %v, %v; want the stream's end", m, err)
	}

	// Every event, recorded: B replays them all.
	r, err := b.agent.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Resume{Resume: &exprdv1.AgentResume{TurnId: seen[0].GetTurnId()}}}); err != nil {
		t.Fatal(err)
	}
	replay, err := recvAll(r)
	if err != nil {
		t.Fatalf("replay on B: %v after %d events", err, len(replay))
	}
	if len(replay) != len(seen) {
		t.Fatalf("B replays %d events, the client saw %d", len(replay), len(seen))
	}
	notices := 0
	for i := range seen {
		a, b := proto.Clone(seen[i]).(*exprdv1.AgentLoopRunResponse), proto.Clone(replay[i]).(*exprdv1.AgentLoopRunResponse)
		a.TurnId, b.TurnId = "", ""
		if !proto.Equal(a, b) || seen[i].GetSeq() != uint64(i+1) {
			t.Fatalf("event %d: replayed %v, seen %v", i, replay[i], seen[i])
		}
		if a.GetDurability() != nil {
			notices++
		}
	}
	if notices != 2 {
		t.Fatalf("%d durability notices replayed, want 2", notices)
	}
	// The replay's reader is gone from the NATS server with it.
	if n := turnConsumers(t, n.url()); n != 0 {
		t.Errorf("%d consumers left on the turns' stream after the replay, want 0", n)
	}
	if got := replicaMetric(t, a, "exprd_turns_not_durable", ""); got != 0 {
		t.Errorf("A's exprd_turns_not_durable %v after, want 0", got)
	}

	// The watches came back with NATS: a cancel on B stops a turn on A.
	s3, err := a.agent.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s3.Send(start()); err != nil {
		t.Fatal(err)
	}
	var id string
	for {
		m, err := s3.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if id == "" {
			id = m.GetTurnId()
		}
		if asked(m) {
			break
		}
	}
	if resp, err := b.agent.Cancel(ctx, &exprdv1.AgentLoopCancelRequest{TurnId: id}); err != nil || resp.GetEnded() {
		t.Fatalf("Cancel on B after the outage: %v, %v", resp, err)
	}
	if _, err := recvAll(s3); status.Code(err) != codes.Canceled {
		t.Fatalf("after the outage, a turn cancelled on B ended %v on A, want CANCELLED", err)
	}
}

// turnConsumers is how many consumers the turns' stream has, once the
// readers that stopped have deleted theirs (waiting a few seconds).
func turnConsumers(t *testing.T, url string) int {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, turnstore.DefaultNATSStream)
	if err != nil {
		t.Fatal(err)
	}
	for {
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Consumers == 0 || ctx.Err() != nil {
			return info.State.Consumers
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// NATS out of reach for longer than the turn's lease (2 s here): the
// lease lapses meanwhile, so when NATS is back the turn goes on on its
// replica (whose renewal takes the lease again) or on the other (which
// takes it over from its journal, its first replica stopping it). The
// client follows it wherever it runs, answering what it is asked; the
// turn ends with done, and its events as NATS holds them run from seq 1
// with no gap.
func TestTurnGoesOnAfterNATSWasDownLongerThanItsLease(t *testing.T) {
	n := newNATSAt(t)
	l := startLedger(t, 0)
	ask := func(id string) scripted.Turn {
		return scripted.Turn{Text: "Asking.", ToolCalls: []scripted.ToolCall{{ID: id, Name: "ask_user", Arguments: json.RawMessage(`{}`)}}}
	}
	l.scriptedModel(t, scripted.Script{Loop: true, Turns: []scripted.Turn{ask("c1"), ask("c2"), {Text: "The user said blue twice."}}})
	replicas := []*turnReplica{
		startNATSReplica(t, "A", n.url(), l.modelsConfig, "--manuals-dir", l.manualsDir),
		startNATSReplica(t, "B", n.url(), l.modelsConfig, "--manuals-dir", l.manualsDir),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := replicas[0].agent.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: &exprdv1.AgentStart{
		Messages: []*exprdv1.AgentMessage{{Role: exprdv1.AgentMessage_ROLE_USER, Content: "Ask me twice."}},
		Tools:    []*exprdv1.AgentTool{{Name: "ask_user", Executor: exprdv1.AgentTool_EXECUTOR_CLIENT}}}}}); err != nil {
		t.Fatal(err)
	}
	answer := func(s agentStream, m *exprdv1.AgentLoopRunResponse) {
		_ = s.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_ToolOutput{ToolOutput: &exprdv1.ToolOutput{
			CallId: m.GetToolCallRequested().GetCall().GetId(), OutputJson: `{"answer":"blue"}`}}})
	}
	var id string
	down, back := false, make(chan struct{})
	// follow reads s to its end, answering what the turn asks; the outage
	// begins at the first question, and the next are answered once NATS
	// is back.
	follow := func(s agentStream) (done bool, err error) {
		for {
			m, err := s.Recv()
			if errors.Is(err, io.EOF) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			if id == "" {
				id = m.GetTurnId()
			}
			if m.GetToolCallRequested().GetRunOnClient() {
				if !down {
					down = true
					n.ns.Shutdown()
					n.ns.WaitForShutdown()
					go func() {
						time.Sleep(4 * time.Second) // two leases
						n.start()
						close(back)
					}()
				} else {
					<-back
				}
				answer(s, m)
			}
			if m.GetDone() != nil {
				return true, nil
			}
		}
	}
	done, err := follow(s)
	// Wherever the turn went, the client resumes it (after the last event
	// NATS holds: what its first replica kept may be lost) until done.
	for i := 0; !done; i++ {
		if ctx.Err() != nil {
			t.Fatalf("the turn did not end: %v", err)
		}
		t.Logf("resume %d after %v", i+1, err)
		time.Sleep(500 * time.Millisecond)
		r, rerr := replicas[i%2].agent.Run(ctx)
		if rerr != nil {
			t.Fatal(rerr)
		}
		if err := r.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Resume{Resume: &exprdv1.AgentResume{TurnId: id, AfterSeq: -1}}}); err != nil {
			t.Fatal(err)
		}
		done, err = follow(r)
	}
	// The replay, once B's connection to NATS is back (UNAVAILABLE, with
	// TURN_STORE_UNAVAILABLE, says to retry).
	var all []*exprdv1.AgentLoopRunResponse
	for {
		r, rerr := replicas[1].agent.Run(ctx)
		if rerr != nil {
			t.Fatal(rerr)
		}
		if rerr := r.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Resume{Resume: &exprdv1.AgentResume{TurnId: id}}}); rerr != nil {
			t.Fatal(rerr)
		}
		if all, err = recvAll(r); status.Code(err) != codes.Unavailable || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil || len(all) == 0 || all[len(all)-1].GetDone() == nil {
		t.Fatalf("the replay from NATS: %d events, %v; want them to done", len(all), err)
	}
	for i, m := range all {
		if m.GetSeq() != uint64(i+1) {
			t.Fatalf("the replay's event %d has seq %d", i, m.GetSeq())
		}
	}
}
