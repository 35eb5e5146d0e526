package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/exprd/exprd/client"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/server"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/utcpall"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newClient starts a server on loopback and dials it; both end with the test.
func newClient(t *testing.T, opts ...server.Option) *client.Client {
	t.Helper()
	addr, stop, err := startServer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	c, err := client.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func openSession(t *testing.T, c *client.Client, settings *exprdv1.Settings, h client.Handlers) *client.Session {
	t.Helper()
	s, err := c.OpenSession(context.Background(), settings, nil, h)
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func clientFn(name string) *exprdv1.Function {
	return &exprdv1.Function{Name: name, Runner: exprdv1.Function_RUNNER_CLIENT}
}

// answerOf decodes an answer's JSON for comparison.
func answerOf(t *testing.T, res *client.Result) map[string]any {
	t.Helper()
	var a map[string]any
	if err := json.Unmarshal([]byte(res.Answer.GetAnswerJson()), &a); err != nil {
		t.Fatalf("answer %q: %v", res.Answer.GetAnswerJson(), err)
	}
	return a
}

func TestDial(t *testing.T) {
	t.Parallel()
	addr, stop, err := startServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	for _, tc := range []struct {
		name string
		opts []grpc.DialOption
	}{
		{"insecure by default", nil},
		{"credentials given", []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := client.Dial(addr, tc.opts...)
			if err != nil {
				t.Fatalf("Dial: %v", err)
			}
			defer c.Close()
			d, err := c.Describe(context.Background(), nil)
			if err != nil {
				t.Fatalf("Describe: %v", err)
			}
			if d.GetName() != "expr" {
				t.Errorf("got name %q, want expr", d.GetName())
			}
		})
	}
}

// Many calls share one stream; each gets its own confirm, function call,
// writes and answer back.
func TestConcurrentCalls(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	var mu sync.Mutex
	seen := map[string]int{}
	s := openSession(t, c, &exprdv1.Settings{Read: true, Functions: []*exprdv1.Function{clientFn("echo")}}, client.Handlers{
		OnWrite: func(callID string, _ *exprdv1.StepWrite) {
			mu.Lock()
			seen[callID]++
			mu.Unlock()
		},
		OnConfirm: func(_ context.Context, _ string, _ int, text string) (bool, error) {
			time.Sleep(time.Millisecond)
			return strings.HasPrefix(text, "ok "), nil
		},
		Functions: map[string]client.Function{
			"echo": func(_ context.Context, args json.RawMessage) (json.RawMessage, error) { return args, nil },
		},
	})

	const n = 40
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			input := fmt.Sprintf(`{"steps": [{"set": "scopes.root.v%d", "expr": "echo({n: %d}).n", "confirm": "ok %d?"}],
				"read": "scopes.root.v%d * 2"}`, i, i, i, i)
			res, err := s.Call(context.Background(), []byte(input))
			if err != nil {
				errs <- fmt.Errorf("call %d: %v", i, err)
				return
			}
			if got, want := res.Answer.GetAnswerJson(), fmt.Sprintf(`{"value":%d}`, 2*i); got != want {
				errs <- fmt.Errorf("call %d: got answer %s, want %s", i, got, want)
			}
			if len(res.Writes) != 1 {
				errs <- fmt.Errorf("call %d: got %d writes, want 1", i, len(res.Writes))
				return
			}
			w := res.Writes[0]
			if got, want := fmt.Sprintf("%s=%s", w.GetPath(), w.GetValueJson()), fmt.Sprintf("scopes.root.v%d=%d", i, i); got != want {
				errs <- fmt.Errorf("call %d: got write %s, want %s", i, got, want)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != n {
		t.Errorf("OnWrite saw %d calls, want %d", len(seen), n)
	}
	for id, k := range seen {
		if k != 1 {
			t.Errorf("OnWrite saw %d writes of call %s, want 1", k, id)
		}
	}
}

func TestConfirm(t *testing.T) {
	t.Parallel()
	const input = `{"steps": [{"set": "scopes.root.a", "expr": "1"}, {"set": "scopes.root.b", "expr": "2", "confirm": "Set b?"}]}`
	for _, tc := range []struct {
		name       string
		onConfirm  func(context.Context, string, int, string) (bool, error)
		wantAnswer string
		wantWrites []string
	}{
		{
			name:       "accepted",
			onConfirm:  func(context.Context, string, int, string) (bool, error) { return true, nil },
			wantAnswer: `{}`,
			wantWrites: []string{"scopes.root.a", "scopes.root.b"},
		},
		{
			name:       "declined",
			onConfirm:  func(context.Context, string, int, string) (bool, error) { return false, nil },
			wantAnswer: `{"declined":true}`,
			wantWrites: []string{"scopes.root.a"},
		},
		{
			name:       "handler error declines",
			onConfirm:  func(context.Context, string, int, string) (bool, error) { return true, errors.New("no terminal") },
			wantAnswer: `{"declined":true}`,
			wantWrites: []string{"scopes.root.a"},
		},
		{
			name:       "no handler declines",
			wantAnswer: `{"declined":true}`,
			wantWrites: []string{"scopes.root.a"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var asked []string
			var mu sync.Mutex
			h := client.Handlers{}
			if tc.onConfirm != nil {
				h.OnConfirm = func(ctx context.Context, callID string, step int, text string) (bool, error) {
					mu.Lock()
					asked = append(asked, fmt.Sprintf("step=%d text=%s", step, text))
					mu.Unlock()
					return tc.onConfirm(ctx, callID, step, text)
				}
			}
			s := openSession(t, newClient(t), nil, h)
			res, err := s.Call(context.Background(), []byte(input))
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if got := res.Answer.GetAnswerJson(); got != tc.wantAnswer {
				t.Errorf("got answer %s, want %s", got, tc.wantAnswer)
			}
			var paths []string
			for _, w := range res.Writes {
				paths = append(paths, w.GetPath())
			}
			if fmt.Sprint(paths) != fmt.Sprint(tc.wantWrites) {
				t.Errorf("got writes %v, want %v", paths, tc.wantWrites)
			}
			mu.Lock()
			defer mu.Unlock()
			if tc.onConfirm != nil && fmt.Sprint(asked) != "[step=1 text=Set b?]" {
				t.Errorf("got confirms %v, want [step=1 text=Set b?]", asked)
			}
		})
	}
}

func TestClientFunctionFailure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		fn          client.Function
		wantMessage string
	}{
		{
			name:        "error",
			fn:          func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, errors.New("disk full") },
			wantMessage: "disk full",
		},
		{
			name:        "missing",
			wantMessage: `the client has no function "downloadCsv"`,
		},
		{
			name:        "result not JSON",
			fn:          func(context.Context, json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`{rows`), nil },
			wantMessage: "not valid JSON",
		},
		{
			name: "result not UTF-8",
			fn: func(context.Context, json.RawMessage) (json.RawMessage, error) {
				return json.RawMessage("\"\xff\""), nil
			},
			wantMessage: "not valid UTF-8",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := client.Handlers{}
			if tc.fn != nil {
				h.Functions = map[string]client.Function{"downloadCsv": tc.fn}
			}
			s := openSession(t, newClient(t), &exprdv1.Settings{Functions: []*exprdv1.Function{clientFn("downloadCsv")}}, h)
			res, err := s.Call(context.Background(), []byte(`{"steps": [{"expr": "downloadCsv({rows: []})"}]}`))
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if got := res.Answer.GetReason(); got != "host-function" {
				t.Errorf("got reason %q, want host-function (answer %s)", got, res.Answer.GetAnswerJson())
			}
			msg, _ := answerOf(t, res)["error"].(map[string]any)["message"].(string)
			if !strings.Contains(msg, tc.wantMessage) {
				t.Errorf("got message %q, want it to contain %q", msg, tc.wantMessage)
			}
		})
	}
}

// A Call whose context ends sends Cancel: the server stops the call, the
// handler's context ends, and Call returns the cancelled answer.
func TestCancel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		input string
	}{
		{"waiting on a client function", `{"steps": [{"set": "scopes.root.a", "expr": "1"}, {"expr": "block({})"}]}`},
		{"waiting on a confirm", `{"steps": [{"set": "scopes.root.a", "expr": "1"}, {"expr": "2", "confirm": "Go?"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			started := make(chan struct{}, 1)
			handlerDone := make(chan error, 1)
			wait := func(ctx context.Context) {
				started <- struct{}{}
				<-ctx.Done()
				handlerDone <- ctx.Err()
			}
			s := openSession(t, newClient(t), &exprdv1.Settings{Functions: []*exprdv1.Function{clientFn("block")}}, client.Handlers{
				OnConfirm: func(ctx context.Context, _ string, _ int, _ string) (bool, error) { wait(ctx); return false, ctx.Err() },
				Functions: map[string]client.Function{
					"block": func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
						wait(ctx)
						return nil, ctx.Err()
					},
				},
			})
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				<-started
				cancel()
			}()
			res, err := s.Call(ctx, []byte(tc.input))
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("got error %v, want context.Canceled", err)
			}
			if res == nil || !res.Answer.GetCancelled() {
				t.Fatalf("got result %v, want the cancelled answer", res)
			}
			if len(res.Writes) != 1 || res.Writes[0].GetPath() != "scopes.root.a" {
				t.Errorf("got writes %v, want the one before the cancel", res.Writes)
			}
			select {
			case <-handlerDone:
			case <-time.After(5 * time.Second):
				t.Fatal("the handler's context did not end with the call")
			}
		})
	}
}

// SetState and PatchState only send; the server's refusal arrives through
// OnRejected, before the answer of a call sent after them, and the state
// stays as it was.
func TestStateRejected(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var rejected []string
	s := openSession(t, newClient(t), &exprdv1.Settings{Read: true}, client.Handlers{
		OnRejected: func(r *exprdv1.Rejected) {
			mu.Lock()
			rejected = append(rejected, fmt.Sprintf("%s %s", r.GetKind(), codes.Code(r.GetStatus().GetCode())))
			mu.Unlock()
		},
	})
	ctx := context.Background()
	for _, send := range []func() error{
		func() error { return s.SetState(ctx, []byte(`{"n": 1}`)) },
		func() error { return s.SetState(ctx, []byte(`{"n": `)) },
		func() error { return s.SetState(ctx, []byte(`[1, 2]`)) },
		func() error { return s.PatchState(ctx, []byte(`"n"`)) },
		func() error { return s.PatchState(ctx, []byte(`{"m": 2}`)) },
	} {
		if err := send(); err != nil {
			t.Fatalf("send: %v", err)
		}
	}
	res, err := s.Call(ctx, []byte(`{"read": "scopes.root"}`))
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	if got, want := res.Answer.GetAnswerJson(), `{"value":{"m":2,"n":1}}`; got != want {
		t.Errorf("got answer %s, want %s", got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if got, want := fmt.Sprint(rejected), "[state InvalidArgument state InvalidArgument state_patch InvalidArgument]"; got != want {
		t.Errorf("got rejections %s, want %s", got, want)
	}
}

// A Rejected naming a call in flight fails that call with its status: the
// code, and the details naming the limit, also through a wrapping error.
func TestCallRejected(t *testing.T) {
	t.Parallel()
	asked := make(chan struct{})
	release := make(chan struct{})
	c := newClient(t, server.WithMaxCallsInFlight(1))
	s := openSession(t, c, nil, client.Handlers{
		OnConfirm: func(context.Context, string, int, string) (bool, error) {
			close(asked)
			<-release
			return true, nil
		},
	})
	first := make(chan error, 1)
	go func() {
		res, err := s.Call(context.Background(), []byte(`{"steps": [{"expr": "1", "confirm": "Go?"}]}`))
		if err == nil && res.Answer.GetAnswerJson() != "{}" {
			err = fmt.Errorf("got answer %s, want {}", res.Answer.GetAnswerJson())
		}
		first <- err
	}()
	<-asked
	_, err := s.Call(context.Background(), []byte(`{"steps": [{"expr": "1"}]}`))
	var rej *client.RejectedError
	if !errors.As(err, &rej) || rej.Rejected.GetKind() != "call" {
		t.Errorf("got error %v, want a *client.RejectedError of kind call", err)
	}
	wrapped := fmt.Errorf("checkout: %w", err)
	if got := status.Code(wrapped); got != codes.ResourceExhausted {
		t.Errorf("got code %v, want ResourceExhausted", got)
	}
	var subjects []string
	for _, d := range status.Convert(wrapped).Details() {
		if qf, ok := d.(*errdetails.QuotaFailure); ok {
			for _, v := range qf.GetViolations() {
				subjects = append(subjects, v.GetSubject())
			}
		}
	}
	if fmt.Sprint(subjects) != "[max_calls_in_flight]" {
		t.Errorf("got QuotaFailure subjects %v, want [max_calls_in_flight]", subjects)
	}
	close(release)
	if err := <-first; err != nil {
		t.Errorf("first call: %v", err)
	}
}

// RejectedError is an error of the Rejected's status, which it carries whole;
// a Rejected without a status is still an error.
func TestRejectedErrorStatus(t *testing.T) {
	t.Parallel()
	withDetail, err := status.New(codes.InvalidArgument, "call_id is empty").WithDetails(&errdetails.BadRequest{
		FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "call.call_id", Description: "empty"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		status      *spb.Status
		wantCode    codes.Code
		wantError   string
		wantDetails int
	}{
		{"with details", withDetail.Proto(), codes.InvalidArgument, `exprd: call "c1" rejected: InvalidArgument: call_id is empty`, 1},
		{"no status", nil, codes.Unknown, `exprd: call "c1" rejected: Unknown: the server rejected the message without saying why`, 0},
		{"code OK", &spb.Status{Message: "fine?"}, codes.Unknown, `exprd: call "c1" rejected: Unknown: fine?`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := error(&client.RejectedError{Rejected: &exprdv1.Rejected{Kind: "call", CallId: "c1", Status: tc.status}})
			if got := err.Error(); got != tc.wantError {
				t.Errorf("got %q, want %q", got, tc.wantError)
			}
			st, ok := status.FromError(err)
			if !ok || st.Code() != tc.wantCode {
				t.Errorf("got status %v (%v), want code %v", st, ok, tc.wantCode)
			}
			if got := len(st.Details()); got != tc.wantDetails {
				t.Errorf("got %d details, want %d", got, tc.wantDetails)
			}
		})
	}
}

// JSON that is not UTF-8 cannot travel in a proto string: it is refused
// before sending, and the session goes on.
func TestNotUTF8(t *testing.T) {
	t.Parallel()
	s := openSession(t, newClient(t), &exprdv1.Settings{Read: true}, client.Handlers{})
	ctx := context.Background()
	bad := []byte("{\"n\": \"\xff\"}")
	for name, send := range map[string]func() error{
		"SetState":   func() error { return s.SetState(ctx, bad) },
		"PatchState": func() error { return s.PatchState(ctx, bad) },
		"Call":       func() error { _, err := s.Call(ctx, bad); return err },
	} {
		if err := send(); !errors.Is(err, client.ErrNotUTF8) {
			t.Errorf("%s: got %v, want ErrNotUTF8", name, err)
		}
	}
	res, err := s.Call(ctx, []byte(`{"read": "1 + 1"}`))
	if err != nil || res.Answer.GetAnswerJson() != `{"value":2}` {
		t.Errorf("a call after: got %v, %v; want the answer {\"value\":2}", res, err)
	}
}

func TestOpenInvalid(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	for _, tc := range []struct {
		name     string
		settings *exprdv1.Settings
		budgets  *exprdv1.Budgets
	}{
		{"unknown server function", &exprdv1.Settings{Functions: []*exprdv1.Function{{Name: "nope", Runner: exprdv1.Function_RUNNER_SERVER}}}, nil},
		{"function name not an identifier", &exprdv1.Settings{Functions: []*exprdv1.Function{clientFn("1x")}}, nil},
		{"budget over the maximum", nil, &exprdv1.Budgets{TimeoutMs: 1 << 30}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := c.OpenSession(context.Background(), tc.settings, tc.budgets, client.Handlers{})
			if err == nil {
				_ = s.Close()
				t.Fatal("OpenSession succeeded, want InvalidArgument")
			}
			if got := status.Code(err); got != codes.InvalidArgument {
				t.Errorf("got %v (%v), want InvalidArgument", got, err)
			}
		})
	}
}

func TestOpened(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	s, err := c.OpenSession(context.Background(), nil, &exprdv1.Budgets{MaxSteps: 3}, client.Handlers{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	o := s.Opened()
	if o.GetSessionId() == "" || o.GetBudgets().GetMaxSteps() != 3 {
		t.Errorf("got Opened %v, want a session id and max_steps 3", o)
	}
}

// Close lets a call in flight end (its confirm declined: nobody is left to
// answer), and the session refuses what comes after.
func TestClose(t *testing.T) {
	t.Parallel()
	asked := make(chan struct{})
	s := openSession(t, newClient(t), nil, client.Handlers{
		OnConfirm: func(ctx context.Context, _ string, _ int, _ string) (bool, error) {
			close(asked)
			<-ctx.Done()
			return true, nil
		},
	})
	type outcome struct {
		res *client.Result
		err error
	}
	inFlight := make(chan outcome, 1)
	go func() {
		res, err := s.Call(context.Background(), []byte(`{"steps": [{"set": "scopes.root.a", "expr": "1", "confirm": "Go?"}]}`))
		inFlight <- outcome{res, err}
	}()
	<-asked
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	o := <-inFlight
	if o.err != nil || o.res.Answer.GetAnswerJson() != `{"declined":true}` {
		t.Errorf("call in flight: got %v, %v; want the declined answer", o.res, o.err)
	}
	if _, err := s.Call(context.Background(), []byte(`{"steps": []}`)); !errors.Is(err, client.ErrClosed) {
		t.Errorf("Call after Close: got %v, want ErrClosed", err)
	}
	if err := s.SetState(context.Background(), []byte(`{}`)); !errors.Is(err, client.ErrClosed) {
		t.Errorf("SetState after Close: got %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: got %v, want nil", err)
	}
}

// When the server goes away, calls in flight fail instead of hanging.
func TestServerGone(t *testing.T) {
	t.Parallel()
	addr, stop, err := startServer()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	asked := make(chan struct{})
	s, err := c.OpenSession(context.Background(), nil, nil, client.Handlers{
		OnConfirm: func(ctx context.Context, _ string, _ int, _ string) (bool, error) {
			close(asked)
			<-ctx.Done()
			return false, ctx.Err()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Call(context.Background(), []byte(`{"steps": [{"expr": "1", "confirm": "Go?"}]}`))
		done <- err
	}()
	<-asked
	stop()
	if err := <-done; err == nil {
		t.Error("Call succeeded after the server stopped, want an error")
	}
	if err := s.Close(); err == nil {
		t.Error("Close returned nil after the server stopped, want the stream's error")
	}
	if _, err := s.Call(context.Background(), []byte(`{"steps": []}`)); err == nil {
		t.Error("Call on an ended session succeeded, want an error")
	}
}

func TestUnaryCall(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	for _, tc := range []struct {
		name       string
		req        *exprdv1.CallRequest
		wantAnswer string
		wantCode   codes.Code
	}{
		{
			name:       "confirm declined",
			req:        &exprdv1.CallRequest{InputJson: `{"steps": [{"set": "scopes.root.a", "expr": "1", "confirm": "Go?"}]}`},
			wantAnswer: `{"declined":true}`,
		},
		{
			name:     "state not an object",
			req:      &exprdv1.CallRequest{StateJson: `[]`, InputJson: `{"steps": []}`},
			wantCode: codes.InvalidArgument,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp, err := c.Call(context.Background(), tc.req)
			if got := status.Code(err); got != tc.wantCode {
				t.Fatalf("got code %v (%v), want %v", got, err, tc.wantCode)
			}
			if got := resp.GetAnswerJson(); got != tc.wantAnswer {
				t.Errorf("got answer %s, want %s", got, tc.wantAnswer)
			}
		})
	}
}

// Tools asks for one page at a time, as the loop reaches it, and stops
// asking when the loop stops; req is left as it was.
func TestTools(t *testing.T) {
	t.Parallel()
	reg, err := utcpall.New(utcp.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	addr, stop, err := startServer(server.WithRegistry(reg), server.WithRegistryWritesWithoutAuth())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	var pages atomic.Int32
	c, err := client.Dial(addr, grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if strings.HasSuffix(method, "/ListTools") {
			pages.Add(1)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	for _, name := range []string{"shop", "store"} {
		if _, err := c.ToolRegistry().RegisterManual(ctx, &exprdv1.RegisterManualRequest{
			Name: name, Source: &exprdv1.RegisterManualRequest_ManualJson{ManualJson: shopManual},
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name      string
		req       *exprdv1.ListToolsRequest
		stopAfter int // 0: range over all
		wantTools string
		wantPages int32
		wantCode  codes.Code
	}{
		{name: "every page", req: &exprdv1.ListToolsRequest{PageSize: 2},
			wantTools: "[shop.find shop.get shop.restock store.find store.get store.restock]", wantPages: 3},
		{name: "one manual", req: &exprdv1.ListToolsRequest{Manual: "store", PageSize: 2},
			wantTools: "[store.find store.get store.restock]", wantPages: 2},
		{name: "the default page size", req: nil,
			wantTools: "[shop.find shop.get shop.restock store.find store.get store.restock]", wantPages: 1},
		{name: "the loop stops", req: &exprdv1.ListToolsRequest{PageSize: 2}, stopAfter: 3,
			wantTools: "[shop.find shop.get shop.restock]", wantPages: 2},
		{name: "a bad page token", req: &exprdv1.ListToolsRequest{PageToken: "nope"},
			wantTools: "[]", wantPages: 1, wantCode: codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Not parallel: pages counts this case's requests.
			pages.Store(0)
			var before *exprdv1.ListToolsRequest
			if tc.req != nil {
				before = proto.Clone(tc.req).(*exprdv1.ListToolsRequest)
			}
			var names []string
			var gotErr error
			for tool, err := range c.Tools(ctx, tc.req) {
				if err != nil {
					gotErr = err
					break
				}
				names = append(names, tool.GetName())
				if len(names) == tc.stopAfter {
					break
				}
			}
			if got := fmt.Sprint(names); got != tc.wantTools {
				t.Errorf("got tools %s, want %s", got, tc.wantTools)
			}
			if got := status.Code(gotErr); got != tc.wantCode {
				t.Errorf("got code %v (%v), want %v", got, gotErr, tc.wantCode)
			}
			if got := pages.Load(); got != tc.wantPages {
				t.Errorf("got %d ListTools requests, want %d", got, tc.wantPages)
			}
			if tc.req != nil && !proto.Equal(tc.req, before) {
				t.Errorf("req changed: got %v, want %v", tc.req, before)
			}
		})
	}
}
