package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/internal/testkit/exprdproc"
	"github.com/exprd/exprd/model/scripted"
	"google.golang.org/protobuf/proto"
)

// lease is the turns' lease in these tests: short, so that a takeover
// comes within seconds.
const lease = 2 * time.Second

// ledger is a tool provider on loopback that counts its calls: add
// answers at once, slow after slowFor; slowread is slow too, and says it
// is read-only (so a takeover may call it again).
type ledger struct {
	url            string
	adds, slows    atomic.Int32
	slowFor        time.Duration
	slowHit        chan struct{} // closed at the first slow call
	once           sync.Once
	manualsDir     string
	modelsConfig   string
	scriptedServer *scripted.Server
}

func startLedger(t *testing.T, slowFor time.Duration) *ledger {
	t.Helper()
	l := &ledger{slowFor: slowFor, slowHit: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("/add", func(w http.ResponseWriter, r *http.Request) {
		l.adds.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true}`)
	})
	slow := func(w http.ResponseWriter, r *http.Request) {
		l.slows.Add(1)
		l.once.Do(func() { close(l.slowHit) })
		select {
		case <-time.After(l.slowFor):
		case <-r.Context().Done():
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true}`)
	}
	mux.HandleFunc("/slow", slow)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })
	l.url = "http://" + lis.Addr().String()
	tool := func(name, path string, annotations map[string]any) map[string]any {
		m := map[string]any{"name": name, "description": name,
			"inputs":             map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "number"}}},
			"tool_call_template": map[string]any{"call_template_type": "http", "http_method": "GET", "url": l.url + path}}
		if annotations != nil {
			m["annotations"] = annotations
		}
		return m
	}
	man, _ := json.Marshal(map[string]any{"manual_version": "1.0.0", "utcp_version": "1.0.1", "tools": []any{
		tool("add", "/add", nil), tool("slow", "/slow", nil), tool("slowread", "/slow", map[string]any{"readOnlyHint": true})}})
	l.manualsDir = t.TempDir()
	if err := os.WriteFile(filepath.Join(l.manualsDir, "ledger.json"), man, 0o600); err != nil {
		t.Fatal(err)
	}
	return l
}

// scriptedModel serves the script to every replica, and a models config
// naming it.
func (l *ledger) scriptedModel(t *testing.T, s scripted.Script) {
	t.Helper()
	ms, err := scripted.Start(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ms.Close)
	l.scriptedServer = ms
	l.modelsConfig = filepath.Join(t.TempDir(), "models.yaml")
	cfg := fmt.Sprintf("default: scripted\nproviders:\n  scripted:\n    base_url: %s\n    model: m\n", ms.BaseURL())
	if err := os.WriteFile(l.modelsConfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

// turnReplica is one exprd process on the shared NATS turn store.
type turnReplica struct {
	name  string
	proc  *exprdproc.Proc
	log   *exprdproc.LogBuffer
	agent exprdv1.AgentLoopClient
}

func startTurnReplica(t *testing.T, name, natsURL string, l *ledger) *turnReplica {
	t.Helper()
	return startNATSReplica(t, name, natsURL, l.modelsConfig, "--manuals-dir", l.manualsDir)
}

// follow reads a stream's events into got until the stream ends.
func follow(s agentStream, got chan<- *exprdv1.AgentLoopRunResponse) error {
	for {
		m, err := s.Recv()
		if err != nil {
			return err
		}
		got <- m
	}
}

// A replica killed (SIGKILL) in the middle of a turn started with detach:
// another replica takes the turn over once its lease lapses and runs it
// to done from its journal; the client resumes it on a third and reads
// every event once, in order. tc says where the turn was when its
// replica died: its model answering (the request is sent again, the
// recorded call is not run again), or a tool call running (a read-only
// tool runs again; any other is answered interrupted).
func TestTurnTakenOverWhenItsReplicaDies(t *testing.T) {
	for _, tc := range []struct {
		name        string
		tool        string // the ledger tool the model calls
		killWhen    string // "model": the second model request in flight; "tool": the slow call running
		adds, slows int32  // the calls each ledger path gets, in all
		result      string // in the call's result, as the model sees it
	}{
		{"model request in flight", "add", "model", 1, 0, `{"ok":true}`},
		{"a call in flight, not idempotent", "slow", "tool", 0, 1, "interrupted: the replica running this call stopped"},
		{"a call in flight, read-only", "slowread", "tool", 0, 2, `{"ok":true}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			natsURL := startNATS(t)
			l := startLedger(t, 3*time.Second)
			reply := scripted.Turn{Match: &scripted.Match{LastRole: "tool"}, Text: "done"}
			if tc.killWhen == "model" {
				reply.DelayMS = 3000
			}
			l.scriptedModel(t, scripted.Script{Loop: true, Turns: []scripted.Turn{
				{Match: &scripted.Match{LastRole: "user"}, ToolCalls: []scripted.ToolCall{{ID: "c1", Name: "work", Arguments: json.RawMessage(`{"n":1}`)}}},
				reply,
			}})
			a := startTurnReplica(t, "A", natsURL, l)
			b := startTurnReplica(t, "B", natsURL, l)
			c := startTurnReplica(t, "C", natsURL, l)

			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			stream, err := a.agent.Run(ctx)
			if err != nil {
				t.Fatal(err)
			}
			start := &exprdv1.AgentStart{Detach: proto.Bool(true),
				Messages: []*exprdv1.AgentMessage{{Role: exprdv1.AgentMessage_ROLE_USER, Content: "work"}},
				Tools:    []*exprdv1.AgentTool{{Name: "work", Executor: exprdv1.AgentTool_EXECUTOR_UTCP, UtcpTool: "ledger." + tc.tool}}}
			if err := stream.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: start}}); err != nil {
				t.Fatal(err)
			}
			got := make(chan *exprdv1.AgentLoopRunResponse, 1024)
			go func() { _ = follow(stream, got) }()
			var events []*exprdv1.AgentLoopRunResponse
			next := func() *exprdv1.AgentLoopRunResponse {
				select {
				case m := <-got:
					events = append(events, m)
					return m
				case <-ctx.Done():
					t.Fatalf("no event: %v; got %v", ctx.Err(), events)
					return nil
				}
			}
			turnID := next().GetTurnId()
			// Wait for the point where A dies.
			switch tc.killWhen {
			case "model":
				for next().GetToolResult() == nil {
				}
				for len(l.scriptedServer.Requests()) < 2 {
					time.Sleep(10 * time.Millisecond)
				}
			case "tool":
				<-l.slowHit
			}
			// Drain what A sent before it dies.
			time.Sleep(100 * time.Millisecond)
			if err := a.proc.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed := time.Now()
		drain:
			for {
				select {
				case m := <-got:
					events = append(events, m)
				case <-time.After(200 * time.Millisecond):
					break drain
				}
			}
			last := events[len(events)-1].GetSeq()

			// The client resumes on C (B or C takes the turn over).
			rs, err := c.agent.Run(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := rs.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Resume{Resume: &exprdv1.AgentResume{TurnId: turnID, AfterSeq: int64(last)}}}); err != nil {
				t.Fatal(err)
			}
			rest, err := recvAll(rs)
			if err != nil {
				t.Fatalf("the resumed stream: %v after %d events", err, len(rest))
			}
			took := time.Since(killed)
			events = append(events, rest...)
			for i, m := range events {
				if m.GetSeq() != uint64(i+1) {
					t.Fatalf("event %d has seq %d: every event once, in order: %v", i, m.GetSeq(), events)
				}
			}
			done := events[len(events)-1].GetDone()
			if done == nil || done.GetText() != "done" {
				t.Fatalf("the turn's last event: %v, want done", events[len(events)-1])
			}
			// The call's result the model saw: the last tool result.
			var result string
			for _, m := range events {
				if r := m.GetToolResult(); r != nil && r.GetCallId() == "c1" {
					result = r.GetOutputJson()
				}
			}
			if !strings.Contains(result, tc.result) {
				t.Errorf("the call's result %q, want it to hold %q", result, tc.result)
			}
			if l.adds.Load() != tc.adds || l.slows.Load() != tc.slows {
				t.Errorf("add ran %d times and slow %d, want %d and %d", l.adds.Load(), l.slows.Load(), tc.adds, tc.slows)
			}
			// Within the lease and one step (3 s of model or tool), with
			// room for a loaded machine.
			if bound := lease + 3*time.Second + 15*time.Second; took > bound {
				t.Errorf("the turn ended %v after its replica died, past %v", took, bound)
			}
			var adopted float64
			for _, r := range []*turnReplica{b, c} {
				adopted += replicaMetric(t, r, "exprd_turns_takeovers_total", `outcome="adopted"`)
			}
			if adopted != 1 {
				t.Errorf("takeovers counted by B and C: %v, want 1", adopted)
			}
		})
	}
}

// replicaMetric sums the series of a replica's /metrics named name
// whose labels hold label.
func replicaMetric(t *testing.T, r *turnReplica, name, label string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + r.proc.Metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		body.Write(buf[:n])
		if err != nil {
			break
		}
	}
	var sum float64
	for _, line := range strings.Split(body.String(), "\n") {
		if strings.HasPrefix(line, name+"{") && strings.Contains(line, label) {
			var v float64
			if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
				sum += v
			}
		}
	}
	return sum
}

// A turn waiting on an approval survives a rolling restart of all three
// replicas (each stopped with SIGTERM, a new one started in its place):
// each stopping replica hands the turn over, the next asks the approval
// again (the call had not begun), and the client, back after the
// restart, answers it on the last replica; the tool runs once.
func TestTurnPendingApprovalSurvivesRollingRestart(t *testing.T) {
	natsURL := startNATS(t)
	l := startLedger(t, time.Second)
	l.scriptedModel(t, scripted.Script{Loop: true, Turns: []scripted.Turn{
		{Match: &scripted.Match{LastRole: "user"}, ToolCalls: []scripted.ToolCall{{ID: "c1", Name: "work", Arguments: json.RawMessage(`{"n":1}`)}}},
		{Match: &scripted.Match{LastRole: "tool"}, Text: "done"},
	}})
	replicas := []*turnReplica{startTurnReplica(t, "A", natsURL, l), startTurnReplica(t, "B", natsURL, l), startTurnReplica(t, "C", natsURL, l)}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sctx, stop := context.WithCancel(ctx)
	stream, err := replicas[0].agent.Run(sctx)
	if err != nil {
		t.Fatal(err)
	}
	start := &exprdv1.AgentStart{Detach: proto.Bool(true),
		Messages: []*exprdv1.AgentMessage{{Role: exprdv1.AgentMessage_ROLE_USER, Content: "work"}},
		Tools:    []*exprdv1.AgentTool{{Name: "work", Executor: exprdv1.AgentTool_EXECUTOR_UTCP, UtcpTool: "ledger.add", NeedsApproval: true}}}
	if err := stream.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: start}}); err != nil {
		t.Fatal(err)
	}
	var turnID string
	for {
		m, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if m.GetTurnId() != "" {
			turnID = m.GetTurnId()
		}
		if m.GetApprovalRequest() != nil {
			break
		}
	}
	stop() // the client goes away; the turn waits, detached

	// running is how many replicas run the turn: one, between restarts.
	running := func(live []*turnReplica) float64 {
		var n float64
		for _, r := range live {
			n += replicaMetric(t, r, "exprd_turns_running", "")
		}
		return n
	}
	for i := range replicas {
		old := replicas[i]
		if err := old.proc.Terminate(30 * time.Second); err != nil {
			t.Fatalf("%s did not stop: %v", old.name, err)
		}
		replicas[i] = startTurnReplica(t, old.name+"'", natsURL, l)
		deadline := time.Now().Add(lease + 20*time.Second)
		for running(replicas) != 1 {
			if time.Now().After(deadline) {
				t.Fatalf("after %s's restart no replica runs the turn", old.name)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// The client comes back on the last replica and answers the approval
	// it finds pending.
	rs, err := replicas[2].agent.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Resume{Resume: &exprdv1.AgentResume{TurnId: turnID}}}); err != nil {
		t.Fatal(err)
	}
	approved := false
	var last *exprdv1.AgentLoopRunResponse
	for {
		m, err := rs.Recv()
		if err != nil {
			t.Fatalf("the resumed stream: %v (last event %v)", err, last)
		}
		last = m
		if a := m.GetApprovalRequest(); a != nil && m.GetPending() && !approved {
			approved = true
			reply := &exprdv1.AgentApprovalReply{CallId: a.GetCall().GetId(), Approved: true}
			if err := rs.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_ApprovalReply{ApprovalReply: reply}}); err != nil {
				t.Fatal(err)
			}
		}
		if m.GetDone() != nil {
			break
		}
	}
	if !approved || last.GetDone().GetText() != "done" {
		t.Fatalf("approved %v, last event %v: want the pending approval answered and done", approved, last)
	}
	if n := l.adds.Load(); n != 1 {
		t.Errorf("the approved call ran %d times, want once", n)
	}
}
