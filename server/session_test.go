package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/exprd/exprd/evaluator"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/server"
)

var echoFunction = evaluator.Function{
	Name: "echo", Description: "Returns its argument.",
	Impl: func(_ context.Context, args map[string]any) (any, error) { return args, nil },
}

func clientFn(name string) *exprdv1.Function {
	return &exprdv1.Function{Name: name, Runner: exprdv1.Function_RUNNER_CLIENT}
}

func readOpen() *exprdv1.Open {
	return &exprdv1.Open{Settings: &exprdv1.Settings{Read: true, Functions: []*exprdv1.Function{clientFn("ask")}}}
}

func TestSessionBadOpen(t *testing.T) {
	t.Parallel()
	c := startServer(t, server.WithFunctions(echoFunction))
	tests := []struct {
		name  string
		first *exprdv1.SessionRequest
		field string
	}{
		{"first message not Open", &exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_Call{Call: &exprdv1.Call{CallId: "1"}}}, "open"},
		{"empty first message", &exprdv1.SessionRequest{}, "open"},
		{"unknown server function", openMsg(&exprdv1.Open{Settings: &exprdv1.Settings{Functions: []*exprdv1.Function{{Name: "nope", Runner: exprdv1.Function_RUNNER_SERVER}}}}), "settings.functions[0].server_name"},
		{"function without runner", openMsg(&exprdv1.Open{Settings: &exprdv1.Settings{Functions: []*exprdv1.Function{{Name: "f"}}}}), "settings"},
		{"function named like a builtin", openMsg(&exprdv1.Open{Settings: &exprdv1.Settings{Functions: []*exprdv1.Function{clientFn("len")}}}), "settings"},
		{"bad input schema", openMsg(&exprdv1.Open{Settings: &exprdv1.Settings{Functions: []*exprdv1.Function{{Name: "f", Runner: exprdv1.Function_RUNNER_CLIENT, InputSchemaJson: `{"type": 5}`}}}}), "settings"},
		{"budget above the maximum", openMsg(&exprdv1.Open{Budgets: &exprdv1.Budgets{TimeoutMs: 100_000}}), "budgets"},
		{"tool function that is not a session function", openMsg(&exprdv1.Open{Settings: &exprdv1.Settings{ToolFunctions: &exprdv1.FunctionSet{Functions: []*exprdv1.Function{{Name: "ghost"}}}}}), "settings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stream, err := c.Session(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if err := stream.Send(tt.first); err != nil {
				t.Fatal(err)
			}
			_, err = stream.Recv()
			st := status.Convert(err)
			if st.Code() != codes.InvalidArgument {
				t.Fatalf("got %v, want InvalidArgument", err)
			}
			var field string
			for _, d := range st.Details() {
				if br, ok := d.(*errdetails.BadRequest); ok {
					field = br.GetFieldViolations()[0].GetField()
				}
			}
			if field != tt.field {
				t.Errorf("got field %q, want %q (%v)", field, tt.field, st.Message())
			}
		})
	}
}

func openMsg(o *exprdv1.Open) *exprdv1.SessionRequest {
	return &exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_Open{Open: o}}
}

// Each unusable message is answered with Rejected, the stream stays open and
// the state is what it was.
func TestSessionRejectsAndKeepsState(t *testing.T) {
	t.Parallel()
	c := startServer(t)
	tests := []struct {
		name string
		msg  *exprdv1.SessionRequest
		kind string
		code codes.Code
	}{
		{"state not JSON", stateMsg(`{"a": `), "state", codes.InvalidArgument},
		{"state not an object", stateMsg(`[1, 2]`), "state", codes.InvalidArgument},
		{"state empty", stateMsg(``), "state", codes.InvalidArgument},
		{"patch not JSON", &exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_StatePatch{StatePatch: &exprdv1.StatePatch{PatchJson: `{`}}}, "state_patch", codes.InvalidArgument},
		{"patch not an object", &exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_StatePatch{StatePatch: &exprdv1.StatePatch{PatchJson: `"x"`}}}, "state_patch", codes.InvalidArgument},
		{"call without id", &exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_Call{Call: &exprdv1.Call{InputJson: `{"steps": []}`}}}, "call", codes.InvalidArgument},
		{"confirm reply nobody waits for", &exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_ConfirmReply{ConfirmReply: &exprdv1.ConfirmReply{CallId: "x", Step: 0, Accepted: true}}}, "confirm_reply", codes.NotFound},
		{"function result nobody waits for", &exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_FunctionResult{FunctionResult: &exprdv1.FunctionResult{CallId: "x", FunctionCallId: "x/1"}}}, "function_result", codes.NotFound},
		{"cancel of no call", &exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_Cancel{Cancel: &exprdv1.Cancel{CallId: "x"}}}, "cancel", codes.NotFound},
		{"second open", openMsg(&exprdv1.Open{}), "open", codes.FailedPrecondition},
		// A state's objects and arrays cost memory its bytes do not show.
		{"state of too many objects", stateMsg(`{"a":[` + strings.Repeat(`{},`, evaluator.MaxStateContainers) + `{}]}`), "state", codes.ResourceExhausted},
		{"state nested too deep", stateMsg(`{"a":` + strings.Repeat("[", evaluator.MaxStateDepth) + strings.Repeat("]", evaluator.MaxStateDepth) + `}`), "state", codes.ResourceExhausted},
		{"patch of too many objects", &exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_StatePatch{StatePatch: &exprdv1.StatePatch{PatchJson: `{"a":[` + strings.Repeat(`{},`, evaluator.MaxStateContainers) + `{}]}`}}}, "state_patch", codes.ResourceExhausted},
		{"empty message", &exprdv1.SessionRequest{}, "", codes.InvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := openSession(t, c, readOpen())
			s.state(`{"n": 1, "items": [1, 2]}`)
			s.send(tt.msg)
			m := s.recv()
			r := m.GetRejected()
			if r == nil {
				t.Fatalf("got %v, want Rejected", m)
			}
			if st := rejectedStatus(r); r.GetKind() != tt.kind || st.Code() != tt.code || st.Message() == "" {
				t.Errorf("got Rejected{%q, %v, %q}, want kind %q code %v", r.GetKind(), st.Code(), st.Message(), tt.kind, tt.code)
			}
			if got, want := s.read("scopes.root"), `{"value":{"items":[1,2],"n":1}}`; got != want {
				t.Errorf("state after the rejection: got %s, want %s", got, want)
			}
		})
	}
}

func stateMsg(js string) *exprdv1.SessionRequest {
	return &exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_State{State: &exprdv1.State{StateJson: js}}}
}

func TestSessionStateAndPatch(t *testing.T) {
	t.Parallel()
	c := startServer(t)
	s := openSession(t, c, readOpen())
	s.state(`{"a": {"b": 1, "c": 2}, "d": [1]}`)
	s.patch(`{"a": {"b": null, "e": 3}, "d": null, "f": "x"}`)
	if got, want := s.read("scopes.root"), `{"value":{"a":{"c":2,"e":3},"f":"x"}}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	s.call("w", `{"steps": [{"set": "scopes.root.a.c", "expr": "scopes.root.a.c * 10"}]}`)
	if a := s.answer("w"); a.GetAnswerJson() != `{}` {
		t.Fatalf("got %s, want {}", a.GetAnswerJson())
	}
	if got, want := s.read("scopes.root.a"), `{"value":{"c":20,"e":3}}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestSessionDuplicateCallID(t *testing.T) {
	t.Parallel()
	c := startServer(t)
	s := openSession(t, c, readOpen())
	s.call("c1", `{"steps": [{"expr": "ask({})"}]}`)
	if m := s.recv(); m.GetFunctionCall() == nil {
		t.Fatalf("got %v, want FunctionCall", m)
	}
	s.call("c1", `{"steps": []}`)
	m := s.recv()
	if r := m.GetRejected(); r == nil || rejectedStatus(r).Code() != codes.AlreadyExists || r.GetCallId() != "c1" {
		t.Fatalf("got %v, want Rejected AlreadyExists for c1", m)
	}
}

func TestSessionCallsInFlightLimit(t *testing.T) {
	t.Parallel()
	c := startServer(t, server.WithMaxCallsInFlight(2))
	s := openSession(t, c, readOpen())
	for _, id := range []string{"a", "b"} {
		s.call(id, `{"steps": [{"expr": "ask({})"}]}`)
		if m := s.recv(); m.GetFunctionCall() == nil {
			t.Fatalf("got %v, want FunctionCall", m)
		}
	}
	s.call("c", `{"steps": []}`)
	m := s.recv()
	if r := m.GetRejected(); r == nil || rejectedStatus(r).Code() != codes.ResourceExhausted {
		t.Fatalf("got %v, want Rejected ResourceExhausted", m)
	}
}

// Calls in flight answer independently: a call waiting on the client does
// not hold up another.
func TestSessionConcurrentCalls(t *testing.T) {
	t.Parallel()
	c := startServer(t)
	s := openSession(t, c, readOpen())
	s.state(`{"n": 0}`)
	s.call("slow", `{"steps": [{"set": "scopes.root.got", "expr": "ask({q: 1})"}]}`)
	fc := s.recv().GetFunctionCall()
	if fc == nil || fc.GetName() != "ask" || fc.GetArgsJson() != `{"q":1}` {
		t.Fatalf("got %v, want FunctionCall ask({q: 1})", fc)
	}
	s.call("fast", `{"steps": [{"set": "scopes.root.n", "expr": "scopes.root.n + 1"}]}`)
	if a := s.answer("fast"); a.GetAnswerJson() != `{}` {
		t.Fatalf("fast: got %s", a.GetAnswerJson())
	}
	s.send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_FunctionResult{FunctionResult: &exprdv1.FunctionResult{
		CallId: "slow", FunctionCallId: fc.GetFunctionCallId(), ResultJson: `{"answer": 42}`,
	}}})
	w := s.recv().GetStepWrite()
	if w == nil || w.GetPath() != "scopes.root.got" || w.GetValueJson() != `{"answer":42}` {
		t.Fatalf("got %v, want the write of slow", w)
	}
	if a := s.answer("slow"); a.GetAnswerJson() != `{}` {
		t.Fatalf("slow: got %s", a.GetAnswerJson())
	}
	if got, want := s.read("scopes.root"), `{"value":{"got":{"answer":42},"n":1}}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestSessionCancel(t *testing.T) {
	t.Parallel()
	c := startServer(t)
	s := openSession(t, c, readOpen())
	s.call("c", `{"steps": [{"set": "scopes.root.a", "expr": "1"}, {"expr": "ask({})"}, {"set": "scopes.root.b", "expr": "2"}]}`)
	if w := s.recv().GetStepWrite(); w == nil {
		t.Fatal("want the first write")
	}
	if m := s.recv(); m.GetFunctionCall() == nil {
		t.Fatalf("got %v, want FunctionCall", m)
	}
	s.send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_Cancel{Cancel: &exprdv1.Cancel{CallId: "c"}}})
	a := s.answer("c")
	if !a.GetCancelled() {
		t.Fatalf("got %v, want a cancelled answer", a)
	}
	if got, want := s.read("scopes.root"), `{"value":{"a":1}}`; got != want {
		t.Errorf("earlier writes stay, later steps do not run: got %s, want %s", got, want)
	}
}

func TestSessionClientFunctionTimeout(t *testing.T) {
	t.Parallel()
	c := startServer(t)
	open := readOpen()
	open.Budgets = &exprdv1.Budgets{FunctionTimeoutMs: 50}
	s := openSession(t, c, open)
	s.call("c", `{"steps": [{"expr": "ask({})"}]}`)
	if m := s.recv(); m.GetFunctionCall() == nil {
		t.Fatalf("got %v, want FunctionCall", m)
	}
	a := s.answer("c")
	if a.GetReason() != string(evaluator.HostFunction) || !strings.Contains(a.GetAnswerJson(), "timed out") {
		t.Fatalf("got %s, want host-function timed out", a.GetAnswerJson())
	}
}

func TestSessionClientFunctionResults(t *testing.T) {
	t.Parallel()
	c := startServer(t)
	tests := []struct {
		name   string
		result *exprdv1.FunctionResult
		want   string
	}{
		{"value", &exprdv1.FunctionResult{ResultJson: `[1, 2]`}, `{"value":[1,2]}`},
		{"empty result is null", &exprdv1.FunctionResult{}, `{"value":null}`},
		{"error", &exprdv1.FunctionResult{Error: "disk full"}, `{"error":{"message":"step 0: ask failed: disk full (line 1, column 1)","reason":"host-function"}}`},
		{"malformed JSON", &exprdv1.FunctionResult{ResultJson: `{nope`}, "host-function"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := openSession(t, c, readOpen())
			s.call("c", `{"steps": [{"set": "scopes.root.r", "expr": "ask({})"}], "read": "scopes.root.r"}`)
			fc := s.recv().GetFunctionCall()
			tt.result.CallId, tt.result.FunctionCallId = "c", fc.GetFunctionCallId()
			s.send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_FunctionResult{FunctionResult: tt.result}})
			a := s.answer("c")
			if got := a.GetAnswerJson(); got != tt.want && a.GetReason() != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

// A client that half-closes while a confirm waits has declined it.
func TestSessionHalfCloseDeclines(t *testing.T) {
	t.Parallel()
	c := startServer(t)
	s := openSession(t, c, readOpen())
	s.call("c", `{"steps": [{"confirm": "sure?", "set": "scopes.root.a", "expr": "1"}]}`)
	if m := s.recv(); m.GetConfirmRequest().GetText() != "sure?" {
		t.Fatalf("got %v, want ConfirmRequest", m)
	}
	if err := s.stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if a := s.answer("c"); a.GetAnswerJson() != `{"declined":true}` {
		t.Fatalf("got %s, want declined", a.GetAnswerJson())
	}
	if _, err := s.stream.Recv(); err == nil {
		t.Fatal("want the stream to end")
	}
}

// A stream that goes away cancels its calls: a server function running
// when the client cancels the RPC sees its context cancelled (the test
// used to pass with calls that ignored the stream's end).
func TestSessionClientGoneCancelsCalls(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 1)
	saw := make(chan error, 1)
	block := evaluator.Function{Name: "block", Impl: func(ctx context.Context, _ map[string]any) (any, error) {
		started <- struct{}{}
		<-ctx.Done()
		saw <- ctx.Err()
		return nil, ctx.Err()
	}}
	budgets := evaluator.DefaultBudgets()
	budgets.FunctionTimeout = time.Minute // only the stream's end can end the wait
	c := startServer(t, server.WithFunctions(block), server.WithBudgets(budgets))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := c.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = stream.Send(openMsg(&exprdv1.Open{Settings: &exprdv1.Settings{Functions: []*exprdv1.Function{{Name: "block", Runner: exprdv1.Function_RUNNER_SERVER}}}}))
	if m, err := stream.Recv(); m.GetOpened() == nil {
		t.Fatalf("got %v, %v; want Opened", m, err)
	}
	_ = stream.Send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_Call{Call: &exprdv1.Call{CallId: "c", InputJson: `{"steps": [{"expr": "block({})"}]}`}}})
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not reach its function")
	}
	cancel()
	select {
	case err := <-saw:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the function's context ended with %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the client went away and the call's function was not cancelled")
	}
}

func TestSessionOpenedBudgets(t *testing.T) {
	t.Parallel()
	c := startServer(t)
	s := openSession(t, c, &exprdv1.Open{Budgets: &exprdv1.Budgets{MaxIterations: 10, TimeoutMs: 20}})
	b := s.opened.GetBudgets()
	if b.GetMaxIterations() != 10 || b.GetTimeoutMs() != 20 || b.GetMaxReadChars() != evaluator.DefaultMaxReadChars {
		t.Errorf("got %v, want the lowered budgets and the defaults", b)
	}
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	c := startServer(t, server.WithFunctions(echoFunction))
	for _, read := range []bool{false, true} {
		d, err := c.Describe(context.Background(), &exprdv1.DescribeRequest{Settings: &exprdv1.Settings{
			Read: read, Note: "Prices are in EUR.",
			Functions: []*exprdv1.Function{{Name: "echo", Runner: exprdv1.Function_RUNNER_SERVER}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		var schema struct {
			Schema     string         `json:"$schema"`
			Properties map[string]any `json:"properties"`
		}
		if err := json.Unmarshal([]byte(d.GetInputSchemaJson()), &schema); err != nil {
			t.Fatal(err)
		}
		if _, has := schema.Properties["read"]; has != read || schema.Schema != "https://json-schema.org/draft/2020-12/schema" {
			t.Errorf("read=%v: got input schema %s", read, d.GetInputSchemaJson())
		}
		if d.GetName() != "expr" || !strings.Contains(d.GetDescription(), "## Note\n\nPrices are in EUR.") {
			t.Errorf("got name %q description %q", d.GetName(), d.GetDescription())
		}
		for _, h := range []string{"# Available Functions", "# Function Details", "Returns its argument."} {
			if !strings.Contains(d.GetFunctionsPrompt(), h) {
				t.Errorf("functions prompt lacks %q:\n%s", h, d.GetFunctionsPrompt())
			}
		}
		if !strings.Contains(d.GetCorePrompt(), "fromPairs(map(sortBy(") {
			t.Errorf("core prompt lacks the worked example")
		}
	}
}

// Regression tests for what a review of the server found.
func TestSessionReviewRegressions(t *testing.T) {
	t.Parallel()
	panicky := evaluator.Function{Name: "panicky", Impl: func(context.Context, map[string]any) (any, error) { panic("oops") }}
	half := evaluator.Function{Name: "half", Impl: func(_ context.Context, a map[string]any) (any, error) {
		return a["n"].(float64) / 2, nil // numbers reach functions as float64, literals too
	}}
	c := startServer(t, server.WithFunctions(panicky, half))
	open := &exprdv1.Open{Settings: &exprdv1.Settings{Read: true, Functions: []*exprdv1.Function{
		{Name: "panicky", Runner: exprdv1.Function_RUNNER_SERVER}, {Name: "half", Runner: exprdv1.Function_RUNNER_SERVER}, clientFn("ask"),
	}}}

	t.Run("a panicking server function is host-function", func(t *testing.T) {
		s := openSession(t, c, open)
		s.call("p", `{"steps": [{"expr": "panicky({})"}]}`)
		if a := s.answer("p"); a.GetReason() != string(evaluator.HostFunction) {
			t.Errorf("got %s, want host-function", a.GetAnswerJson())
		}
		if got := s.read("half({n: 3})"); got != `{"value":1.5}` {
			t.Errorf("got %s, want 1.5 from an int literal", got)
		}
	})
	t.Run("a stream with no Open is InvalidArgument", func(t *testing.T) {
		stream, err := c.Session(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		_ = stream.CloseSend()
		if _, err := stream.Recv(); status.Code(err) != codes.InvalidArgument {
			t.Errorf("got %v, want InvalidArgument", err)
		}
	})
	t.Run("a late cancel is rejected after the answer", func(t *testing.T) {
		s := openSession(t, c, open)
		s.call("x", `{"steps": [{"expr": "ask({})"}]}`)
		fc := s.recv().GetFunctionCall()
		if fc.GetTimeoutMs() == 0 || fc.GetTimeoutMs() > 10_000 {
			t.Errorf("got timeout_ms %d, want the function timeout", fc.GetTimeoutMs())
		}
		s.send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_FunctionResult{FunctionResult: &exprdv1.FunctionResult{CallId: "x", FunctionCallId: fc.GetFunctionCallId()}}})
		s.send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_Cancel{Cancel: &exprdv1.Cancel{CallId: "x"}}})
		// The Cancel either reaches the call or is rejected, but a
		// rejection never comes before the answer.
		if first := s.recv(); first.GetAnswer().GetCallId() != "x" {
			t.Fatalf("got %v first, want the answer of x", first)
		}
		s.call("y", `{"steps": []}`)
		for m := s.recv(); m.GetAnswer().GetCallId() != "y"; m = s.recv() {
			if m.GetRejected().GetKind() != "cancel" {
				t.Errorf("got %v, want only the cancel's rejection", m)
			}
		}
	})
}
