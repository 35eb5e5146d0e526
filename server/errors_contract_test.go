package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/internal/egress"
	"github.com/exprd/exprd/internal/overload"
	"github.com/exprd/exprd/internal/testkit/egresstest"
	"github.com/exprd/exprd/membudget"
	"github.com/exprd/exprd/model/openaicompat"
	"github.com/exprd/exprd/model/scripted"
	"github.com/exprd/exprd/server"
	"github.com/exprd/exprd/toolstore"
	"github.com/exprd/exprd/turnstore"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/utcpall"
)

// errorRow is a row of testdata/errors.json: a reason of
// exprdv1.ErrorReason, the code it comes with, the details (besides its
// ErrorInfo) a client gets with it, and the trigger that provokes it
// through the gRPC API; untriggered says why a reason has none here.
type errorRow struct {
	Reason      string   `json:"reason"`
	Code        string   `json:"code"`
	Details     []string `json:"details"`
	Trigger     string   `json:"trigger,omitempty"`
	Untriggered string   `json:"untriggered,omitempty"`
}

// errorRows reads testdata/errors.json.
func errorRows(t *testing.T) []errorRow {
	t.Helper()
	b, err := os.ReadFile("testdata/errors.json")
	if err != nil {
		t.Fatal(err)
	}
	var rows []errorRow
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rows); err != nil {
		t.Fatalf("testdata/errors.json: %v", err)
	}
	return rows
}

// codeOf is the gRPC code of a name as the table writes it
// (INVALID_ARGUMENT).
func codeOf(t *testing.T, name string) codes.Code {
	t.Helper()
	var c codes.Code
	if err := c.UnmarshalJSON([]byte(`"` + name + `"`)); err != nil {
		t.Fatalf("code %q: %v", name, err)
	}
	return c
}

// Every value of ErrorReason but UNSPECIFIED has one row, and every row's
// reason is a value: a reason added, renamed or dropped without its row
// fails here.
func TestErrorsTableCoversTheEnum(t *testing.T) {
	t.Parallel()
	rows := map[string]errorRow{}
	for _, r := range errorRows(t) {
		if _, twice := rows[r.Reason]; twice {
			t.Errorf("%s has two rows", r.Reason)
		}
		rows[r.Reason] = r
		if v, ok := exprdv1.ErrorReason_value[r.Reason]; !ok || v == 0 {
			t.Errorf("row %s: not a value of exprd.v1.ErrorReason", r.Reason)
		}
		codeOf(t, r.Code)
		if (r.Trigger == "") == (r.Untriggered == "") {
			t.Errorf("row %s: want a trigger or, if none can be, why (untriggered)", r.Reason)
		}
		if _, ok := errorTriggers[r.Trigger]; r.Trigger != "" && !ok {
			t.Errorf("row %s: no trigger named %q", r.Reason, r.Trigger)
		}
	}
	for v, name := range exprdv1.ErrorReason_name {
		if _, ok := rows[name]; !ok && v != 0 {
			t.Errorf("exprd.v1.ErrorReason %s has no row in testdata/errors.json", name)
		}
	}
}

// docs/errors.md's table lists exactly the enum's values, each with the
// code of its row in testdata/errors.json.
func TestErrorsDocsTable(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../docs/errors.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "\n## The reasons\n")
	if !ok {
		t.Fatal("docs/errors.md has no section \"The reasons\"")
	}
	table, _, _ = strings.Cut(table, "\n## ")
	documented := map[string]string{} // reason: code
	for line := range strings.Lines(table) {
		cells := strings.Split(line, " | ")
		if !strings.HasPrefix(line, "| `") || len(cells) < 2 {
			continue
		}
		reason, code := strings.Trim(cells[0], "| `"), strings.Trim(cells[1], "`")
		if _, twice := documented[reason]; twice {
			t.Errorf("docs/errors.md lists %s twice", reason)
		}
		documented[reason] = code
	}
	for _, row := range errorRows(t) {
		code, ok := documented[row.Reason]
		switch {
		case !ok:
			t.Errorf("docs/errors.md does not list %s", row.Reason)
		case code != row.Code:
			t.Errorf("docs/errors.md gives %s the code %s, want %s", row.Reason, code, row.Code)
		}
		delete(documented, row.Reason)
	}
	for reason := range documented {
		t.Errorf("docs/errors.md lists %s, which is not a value of exprd.v1.ErrorReason", reason)
	}
}

// Each reason, provoked through the gRPC API of a server on loopback,
// comes with its row's code, its ErrorInfo (domain exprd) and exactly its
// row's details.
func TestErrorsContract(t *testing.T) {
	t.Parallel()
	for _, row := range errorRows(t) {
		if row.Trigger == "" {
			continue
		}
		t.Run(row.Reason, func(t *testing.T) {
			t.Parallel()
			trigger := errorTriggers[row.Trigger]
			if trigger == nil {
				t.Fatalf("no trigger %q", row.Trigger)
			}
			st := trigger(t)
			var (
				info    *errdetails.ErrorInfo
				details []string
			)
			for _, d := range st.Details() {
				switch d := d.(type) {
				case *errdetails.ErrorInfo:
					info = d
				case proto.Message:
					details = append(details, string(d.ProtoReflect().Descriptor().Name()))
				default:
					t.Errorf("a detail that is not a message: %v", d)
				}
			}
			if st.Code() != codeOf(t, row.Code) || info.GetReason() != row.Reason || info.GetDomain() != "exprd" {
				t.Fatalf("%s: got %v %q, ErrorInfo %v; want %s, reason %s", row.Trigger, st.Code(), st.Message(), info, row.Code, row.Reason)
			}
			slices.Sort(details)
			want := slices.Sorted(slices.Values(row.Details))
			if !slices.Equal(details, want) {
				t.Errorf("%s: got details %v, want %v", row.Trigger, details, want)
			}
		})
	}
}

// errorTriggers provoke each reason of testdata/errors.json and return the
// status the client got: a call's, a stream's end, or a Rejected's.
var errorTriggers = map[string]func(t *testing.T) *status.Status{
	"an empty search query": func(t *testing.T) *status.Status {
		c, _ := registryClient(t)
		_, err := c.SearchTools(context.Background(), &exprdv1.SearchToolsRequest{Query: " "})
		return status.Convert(err)
	},
	"a call without a token": func(t *testing.T) *status.Status {
		return describeWith(t, context.Background())
	},
	"a call with an unknown token": func(t *testing.T) *status.Status {
		return describeWith(t, withToken("tok-unknown-0123456789"))
	},
	"a token without the method's scope": func(t *testing.T) *status.Status {
		return describeWith(t, withToken(noScopeToken))
	},
	"a call past the caller's rate": func(t *testing.T) *status.Status {
		c := startServer(t, server.WithRateLimit(0.5, 1))
		if _, err := c.Describe(context.Background(), &exprdv1.DescribeRequest{}); err != nil {
			t.Fatal(err)
		}
		_, err := c.Describe(context.Background(), &exprdv1.DescribeRequest{})
		return status.Convert(err)
	},
	"a session past --max-sessions": func(t *testing.T) *status.Status {
		c := startServer(t, server.WithMaxSessions(1))
		openSession(t, c, readOpen())
		stream := openStream(t, c.Session, openMsg(readOpen()))
		_, err := stream.Recv()
		return status.Convert(err)
	},
	"a state the memory budget can never hold": func(t *testing.T) *status.Status {
		c := startServer(t, server.WithMemoryBudget(membudget.New(400_000, time.Millisecond)))
		big := `{"a": "` + strings.Repeat("x", 384_000) + `"}`
		_, err := c.Call(context.Background(), &exprdv1.CallRequest{Settings: &exprdv1.Settings{Read: true}, StateJson: big, InputJson: `{"read": "1"}`})
		return status.Convert(err)
	},
	"a run whose client does not read": func(t *testing.T) *status.Status {
		_, err := runNotRead(t)
		return status.Convert(err)
	},
	"a second call while the heap is past its line": func(t *testing.T) *status.Status {
		heap := &heldHeap{}
		m, err := overload.New(overload.Config{Line: 1000, Logger: quietLog, Read: heap.read, Collect: heap.collect})
		if err != nil {
			t.Fatal(err)
		}
		c := startServer(t, server.WithOverload(m))
		// The caller's first call is in flight: a Session held open.
		openSession(t, c, &exprdv1.Open{})
		heap.add(920) // past the refusing line (90%), short of the cancelling one
		heap.gc()
		m.Check()
		_, err = c.Describe(context.Background(), &exprdv1.DescribeRequest{})
		return status.Convert(err)
	},
	"a gzipped call": func(t *testing.T) *status.Status {
		_, err := startServer(t).Call(context.Background(), &exprdv1.CallRequest{StateJson: `{}`, InputJson: `{"steps": []}`}, grpc.UseCompressor("gzip"))
		return status.Convert(err)
	},
	"a turn whose client went away without detach, resumed": func(t *testing.T) *status.Status {
		c := agentServerWith(t, scripted.Script{Turns: askTurns, Loop: true})
		ctx, cancel := context.WithCancel(context.Background())
		id := awaitClientCall(t, c, ctx, clientToolTurn(false))
		cancel()
		return resumedEnd(t, c, id)
	},
	"an AgentCancel on the turn's stream": func(t *testing.T) *status.Status {
		c := agentServerWith(t, scripted.Script{Turns: askTurns, Loop: true})
		stream := startAgent(t, c, clientToolTurn(false))
		_, err := drain(stream, func(m *exprdv1.AgentLoopRunResponse) {
			if m.GetToolCallRequested().GetRunOnClient() {
				_ = stream.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Cancel{Cancel: &exprdv1.AgentCancel{}}})
			}
		})
		return status.Convert(err)
	},
	"a cancel of no call in flight": func(t *testing.T) *status.Status {
		s := openSession(t, startServer(t), readOpen())
		s.send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_Cancel{Cancel: &exprdv1.Cancel{CallId: "nobody"}}})
		return sessionRejected(t, s)
	},
	"a second Open": func(t *testing.T) *status.Status {
		s := openSession(t, startServer(t), readOpen())
		s.send(openMsg(readOpen()))
		return sessionRejected(t, s)
	},
	"a call id already in flight": func(t *testing.T) *status.Status {
		s := openSession(t, startServer(t), readOpen())
		s.call("c1", `{"steps": [{"expr": "ask({})"}]}`)
		if m := s.recv(); m.GetFunctionCall() == nil {
			t.Fatalf("got %v, want FunctionCall", m)
		}
		s.call("c1", `{"steps": []}`)
		return sessionRejected(t, s)
	},
	"a turn past its turn_timeout_ms": func(t *testing.T) *status.Status {
		c := agentServer(t, scripted.Turn{Text: "late", DelayMS: 2000})
		return turnEnd(t, c, &exprdv1.AgentStart{Messages: userMsg("go"), TurnTimeoutMs: 200})
	},
	"a step past its step_timeout_ms": func(t *testing.T) *status.Status {
		c := agentServer(t, scripted.Turn{Text: "late", DelayMS: 2000})
		return turnEnd(t, c, &exprdv1.AgentStart{Messages: userMsg("go"), StepTimeoutMs: 200})
	},
	"the model server answers 429": func(t *testing.T) *status.Status {
		return modelFailure(t, scripted.Turn{Error: &scripted.ErrorReply{Status: 429, RetryAfter: "1"}}, "", 0)
	},
	"the model server answers 500": func(t *testing.T) *status.Status {
		return modelFailure(t, scripted.Turn{Error: &scripted.ErrorReply{Status: 500}}, "", 0)
	},
	"the model server answers after the provider's timeout": func(t *testing.T) *status.Status {
		return modelFailure(t, scripted.Turn{Text: "late", DelayMS: 2000}, "", 200*time.Millisecond)
	},
	"the model server answers 401": func(t *testing.T) *status.Status {
		return modelFailure(t, scripted.Turn{Error: &scripted.ErrorReply{Status: 401}}, "", 0)
	},
	"the model server has no model Start named": func(t *testing.T) *status.Status {
		return modelFailure(t, scripted.Turn{Error: &scripted.ErrorReply{Status: 404}}, "gpt-nope", 0)
	},
	"the model server answers 404 to the provider's own model": func(t *testing.T) *status.Status {
		return modelFailure(t, scripted.Turn{Error: &scripted.ErrorReply{Status: 404}}, "", 0)
	},
	"the model server answers 400": func(t *testing.T) *status.Status {
		return modelFailure(t, scripted.Turn{Error: &scripted.ErrorReply{Status: 400}}, "", 0)
	},
	"the model server sends a malformed chunk": func(t *testing.T) *status.Status {
		return modelFailure(t, scripted.Turn{Text: "a b c", Malformed: &scripted.Malformed{After: 1}}, "", 0)
	},
	"a registration while the registry's store is out of reach": func(t *testing.T) *status.Status {
		reg, err := utcpall.New(loopbackEgress)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { reg.Close() })
		conn := serve(t, newServer(t, server.WithRegistry(reg), server.WithToolStore(unreachableStore{toolstore.NewLocal(reg)}), server.WithRegistryWritesWithoutAuth()))
		_, err = exprdv1.NewToolRegistryClient(conn).RegisterManual(context.Background(), inline("weather", weatherManual(weatherProvider(t), "forecast"), false))
		return status.Convert(err)
	},
	"a manual registered twice": func(t *testing.T) *status.Status {
		return registerTwice(t, weatherManual(weatherProvider(t), "forecast"))
	},
	"an unknown manual deregistered": func(t *testing.T) *status.Status {
		c, _ := registryClient(t)
		_, err := c.DeregisterManual(context.Background(), &exprdv1.DeregisterManualRequest{Name: "wether"})
		return status.Convert(err)
	},
	"the operator's manual replaced": func(t *testing.T) *status.Status {
		c, url := adminServer(t, nil, server.WithRegistryWritesWithoutAuth())
		_, err := c.RegisterManual(context.Background(), fromURL("math", url, true))
		return status.Convert(err)
	},
	"a manual with a tool without url": func(t *testing.T) *status.Status {
		return registerOnce(t, inline("x", []byte(`{"utcp_version": "1.0.1", "tools": [{"name": "a", "tool_call_template": {"call_template_type": "http"}}]}`), false))
	},
	"a manual url with an unbound variable": func(t *testing.T) *status.Status {
		return registerOnce(t, fromURL("x", weatherProvider(t).URL+"/${MANUAL_PATH}", false))
	},
	"a manual url on loopback, egress refusing it": func(t *testing.T) *status.Status {
		// A name resolving to loopback, as TestEgressJudgesResolvedAddresses's.
		dns := egresstest.StartDNS(t, map[string][]netip.Addr{"rebind.test": {netip.MustParseAddr("127.0.0.1")}})
		reg, err := utcpall.New(utcp.WithEgress(egress.MustParse("allowed.test")), utcp.WithResolver(dns.Resolver()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { reg.Close() })
		conn := serve(t, newServer(t, server.WithRegistry(reg), server.WithRegistryWritesWithoutAuth()))
		_, err = exprdv1.NewToolRegistryClient(conn).RegisterManual(context.Background(), fromURL("x", "https://rebind.test:"+port(closedPort(t))+"/utcp", false))
		return status.Convert(err)
	},
	"a plain http url to a remote host": func(t *testing.T) *status.Status {
		return registerOnce(t, fromURL("x", "http://tools.example.com/utcp", false))
	},
	"a manual url answering 404": func(t *testing.T) *status.Status {
		return registerOnce(t, fromURL("x", weatherProvider(t).URL+"/status/404", false))
	},
	"a manual url answering after the registry's timeout": func(t *testing.T) *status.Status {
		c, _ := registryClient(t, utcp.WithTimeout(200*time.Millisecond))
		_, err := c.RegisterManual(context.Background(), fromURL("x", startSlow(t)+"/wait", false))
		return status.Convert(err)
	},
	"a manual url answering 500": func(t *testing.T) *status.Status {
		return registerOnce(t, fromURL("x", weatherProvider(t).URL+"/status/500", false))
	},
	"a panicking handler": func(t *testing.T) *status.Status {
		s := newServer(t)
		registerPanicking(s)
		return status.Convert(callPanicking(serve(t, s)))
	},
	"a UTCP tool on a server without a registry": func(t *testing.T) *status.Status {
		models, _ := scriptedModels(t, scripted.Script{Turns: []scripted.Turn{{Text: "hi"}}})
		c := exprdv1.NewAgentLoopClient(serve(t, newServer(t, server.WithModels(models))))
		return turnEnd(t, c, &exprdv1.AgentStart{Messages: userMsg("go"),
			Tools: []*exprdv1.AgentTool{{Name: "add", Executor: exprdv1.AgentTool_EXECUTOR_UTCP, UtcpTool: "math.add"}}})
	},
	"a turn on a server without models": func(t *testing.T) *status.Status {
		c := exprdv1.NewAgentLoopClient(serve(t, newServer(t)))
		return turnEnd(t, c, &exprdv1.AgentStart{Messages: userMsg("go")})
	},
	"a registration with auth off": func(t *testing.T) *status.Status {
		c, url := adminServer(t, nil)
		_, err := c.RegisterManual(context.Background(), fromURL("more", url, false))
		return status.Convert(err)
	},
	"a resume of an unknown turn": func(t *testing.T) *status.Status {
		return resumedEnd(t, agentServer(t, scripted.Turn{Text: "hi"}), strings.Repeat("0", 32))
	},
	"a resume past the turn's last event": func(t *testing.T) *status.Status {
		c := agentServer(t, scripted.Turn{Text: "hi"})
		events, err := drain(startAgent(t, c, &exprdv1.AgentStart{Messages: userMsg("go")}), nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err = drain(resumeStream(t, ctx, c, events[0].GetTurnId(), int64(len(events))+1), nil)
		return status.Convert(err)
	},
	"a turn started while the turn store is out of reach": func(t *testing.T) *status.Status {
		st := newOutageStore(t, turnstore.DefaultLimits())
		c := agentServerWith(t, scripted.Script{Turns: []scripted.Turn{{Text: "hi"}}}, server.WithTurnStore(st))
		st.down.Store(true)
		return turnEnd(t, c, &exprdv1.AgentStart{Messages: userMsg("go")})
	},
	"a cancel on a stream resuming a turn another replica runs": func(t *testing.T) *status.Status {
		// Two replicas over one turn store that carries nothing between
		// them: the turn runs on a, its stream resumes on b.
		st, err := turnstore.NewMemory(turnstore.MemoryConfig{Limits: turnstore.DefaultLimits()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		script := scripted.Script{Turns: askTurns, Loop: true}
		a := agentServerWith(t, script, server.WithTurnStore(st))
		b := agentServerWith(t, script, server.WithTurnStore(st))
		id := awaitClientCall(t, a, context.Background(), clientToolTurn(true))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		resumed := resumeStream(t, ctx, b, id, -1)
		if err := resumed.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Cancel{Cancel: &exprdv1.AgentCancel{}}}); err != nil {
			t.Fatal(err)
		}
		for {
			m, err := resumed.Recv()
			if err != nil {
				t.Fatalf("the resumed stream ended %v before a Rejected", err)
			}
			if r := m.GetRejected(); r != nil {
				return rejectedStatus(r)
			}
		}
	},
	"a detached turn left without a client, resumed": func(t *testing.T) *status.Status {
		c := agentServerWith(t, scripted.Script{Turns: askTurns, Loop: true}, server.WithTurnDetachedTimeout(300*time.Millisecond))
		ctx, cancel := context.WithCancel(context.Background())
		id := awaitClientCall(t, c, ctx, clientToolTurn(true))
		cancel()
		time.Sleep(time.Second)
		return resumedEnd(t, c, id)
	},
}

// port is the port of a host:port address.
func port(addr string) string { return addr[strings.LastIndexByte(addr, ':')+1:] }

// describeWith calls Describe with ctx on a server with auth on.
func describeWith(t *testing.T, ctx context.Context) *status.Status {
	t.Helper()
	conn, _ := authServer(t)
	_, err := exprdv1.NewExprToolClient(conn).Describe(ctx, &exprdv1.DescribeRequest{})
	return status.Convert(err)
}

// sessionRejected is the status of the Rejected a session answers next.
func sessionRejected(t *testing.T, s *rawSession) *status.Status {
	t.Helper()
	m := s.recv()
	if m.GetRejected() == nil {
		t.Fatalf("got %v, want Rejected", m)
	}
	return rejectedStatus(m.GetRejected())
}

// turnEnd is the status a turn of start ends with (OK after done).
func turnEnd(t *testing.T, c exprdv1.AgentLoopClient, start *exprdv1.AgentStart) *status.Status {
	t.Helper()
	st, _, _ := agentEnd(t, c, start)
	return st
}

// modelFailure is the end of a turn whose model server answers turn, the
// provider never retrying and giving each request timeout (0: its
// default); model is the model Start names.
func modelFailure(t *testing.T, turn scripted.Turn, model string, timeout time.Duration) *status.Status {
	t.Helper()
	zero := 0
	models, _ := scriptedModelsWith(t, scripted.Script{Turns: []scripted.Turn{turn}},
		openaicompat.ProviderConfig{MaxRetries: &zero, Timeout: openaicompat.Duration(timeout)})
	c := exprdv1.NewAgentLoopClient(serve(t, newServer(t, server.WithModels(models))))
	return turnEnd(t, c, &exprdv1.AgentStart{Model: model, Messages: userMsg("hi")})
}

// awaitClientCall starts a turn of start on ctx and receives until it
// waits for the client's tool output; it returns the turn's id.
func awaitClientCall(t *testing.T, c exprdv1.AgentLoopClient, ctx context.Context, start *exprdv1.AgentStart) string {
	t.Helper()
	stream, err := c.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: start}}); err != nil {
		t.Fatal(err)
	}
	var id string
	for {
		m, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if id == "" {
			id = m.GetTurnId()
		}
		if m.GetToolCallRequested().GetRunOnClient() {
			return id
		}
	}
}

// resumedEnd resumes turn id from its start, and returns how the replay
// ends.
func resumedEnd(t *testing.T, c exprdv1.AgentLoopClient, id string) *status.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := drain(resumeStream(t, ctx, c, id, 0), nil)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return status.Convert(err)
}

// registerOnce registers req on a fresh registry.
func registerOnce(t *testing.T, req *exprdv1.RegisterManualRequest) *status.Status {
	t.Helper()
	c, _ := registryClient(t)
	_, err := c.RegisterManual(context.Background(), req)
	return status.Convert(err)
}

// registerTwice registers manual as weather twice on a fresh registry;
// it returns the second's status.
func registerTwice(t *testing.T, manual []byte) *status.Status {
	t.Helper()
	c, _ := registryClient(t)
	if _, err := c.RegisterManual(context.Background(), inline("weather", manual, false)); err != nil {
		t.Fatal(err)
	}
	_, err := c.RegisterManual(context.Background(), inline("weather", manual, false))
	return status.Convert(err)
}

// unreachableStore is a tool store whose shared store is out of reach:
// every write fails as toolstore.Etcd's does then.
type unreachableStore struct{ *toolstore.Local }

func (unreachableStore) Register(context.Context, string, utcp.Source, bool) (*utcp.Registration, error) {
	return nil, &toolstore.UnavailableError{Op: "apply", Err: errors.New("dial tcp etcd-0.internal:2379: connection refused")}
}
