package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/exprd/exprd/agent"
	"github.com/exprd/exprd/codemode"
	"github.com/exprd/exprd/evaluator"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/membudget"
	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/model/openaicompat"
	"github.com/exprd/exprd/model/scripted"
	"github.com/exprd/exprd/server/auth"
	"github.com/exprd/exprd/server/internal/rpcstatus"
	"github.com/exprd/exprd/toolstore"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/manual"
	"github.com/exprd/exprd/utcp/vars"
)

// wantErr is what a client must see of an error: its code, its ErrorInfo
// reason, the field a BadRequest names ("" for none), and its RetryInfo
// delay (0 for none).
type wantErr struct {
	code   codes.Code
	reason string
	field  string
	retry  time.Duration
}

// checkStatus checks err against want, and that its message names no Go
// package and holds none of the words hidden (a provider's own text).
func checkStatus(t *testing.T, err error, want wantErr, hidden ...string) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("got %v, want a gRPC status", err)
	}
	if st.Code() != want.code {
		t.Errorf("got code %v (%q), want %v", st.Code(), st.Message(), want.code)
	}
	var (
		info  *errdetails.ErrorInfo
		field string
		retry time.Duration
	)
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			info = d
		case *errdetails.BadRequest:
			if v := d.GetFieldViolations(); len(v) > 0 {
				field = v[0].GetField()
			}
		case *errdetails.RetryInfo:
			retry = d.GetRetryDelay().AsDuration()
		}
	}
	switch {
	case info == nil:
		t.Errorf("got no ErrorInfo in %v, want reason %s", st.Proto(), want.reason)
	case info.GetDomain() != rpcstatus.Domain || info.GetReason() != want.reason:
		t.Errorf("got ErrorInfo %s/%s, want %s/%s", info.GetDomain(), info.GetReason(), rpcstatus.Domain, want.reason)
	}
	if field != want.field {
		t.Errorf("got BadRequest field %q, want %q", field, want.field)
	}
	if retry != want.retry {
		t.Errorf("got RetryInfo %v, want %v (0: none)", retry, want.retry)
	}
	for _, pkg := range []string{"agent: ", "utcp: ", "codemode: ", "model: ", "rpc error"} {
		if msg := st.Message(); strings.HasPrefix(msg, pkg) || strings.Contains(msg, " "+pkg) {
			t.Errorf("got message %q, want no %q in it", msg, pkg)
		}
	}
	for _, h := range hidden {
		if strings.Contains(st.Message(), h) {
			t.Errorf("got message %q, want it without %q", st.Message(), h)
		}
	}
}

var quiet = slog.New(slog.DiscardHandler)

func modelErr(he *model.HTTPError) error {
	return &agent.ModelError{Step: 0, Err: fmt.Errorf("model provider %q: %w", "p", he)}
}

// TestErrorsMapping: each of the core's typed errors maps to its code, its
// ErrorInfo reason, the field it names and a RetryInfo exactly where a
// retry can help.
func TestErrorsMapping(t *testing.T) {
	t.Parallel()
	const secret = "the provider's own words"
	tests := []struct {
		name string
		err  error
		want wantErr
	}{
		{"an invalid agent config", fmt.Errorf("%w: %w", agent.ErrInvalidConfig, &agent.FieldError{Field: "tools[0].timeout", Reason: "-1s is negative"}),
			wantErr{codes.InvalidArgument, exprdv1.ErrorReason_INVALID_FIELD.String(), "start.tools[0].timeout_ms", 0}},
		{"a hook's answer with a wrong field", &agent.HookError{Hook: agent.HookPrepareStep, Err: &agent.FieldError{Field: "active_tools", Reason: "x"}},
			wantErr{codes.InvalidArgument, exprdv1.ErrorReason_INVALID_FIELD.String(), "hook_reply.active_tools", 0}},
		{"a hook's reply for another call", &agent.HookError{Hook: agent.HookPreToolCall, CallID: "c1", Err: fmt.Errorf("%w: %q", agent.ErrCallIDMismatch, "c9")},
			wantErr{codes.InvalidArgument, exprdv1.ErrorReason_INVALID_FIELD.String(), "hook_reply.call_id", 0}},
		{"a hook reply the server refused", &agent.HookError{Hook: agent.HookPrepareStep, Err: rpcstatus.BadRequest("hook_reply.tool_choice.tool", "no")},
			wantErr{codes.InvalidArgument, exprdv1.ErrorReason_INVALID_FIELD.String(), "hook_reply.tool_choice.tool", 0}},
		{"a hook that failed", &agent.HookError{Hook: agent.HookApproval, CallID: "c1", Err: errors.New(secret)},
			wantErr{codes.Aborted, exprdv1.ErrorReason_HOOK_FAILED.String(), "", 0}},
		{"the turn's timeout", &agent.TimeoutError{Turn: true, Timeout: time.Minute}, wantErr{codes.DeadlineExceeded, exprdv1.ErrorReason_TURN_TIMEOUT.String(), "", 0}},
		{"a step's timeout", &agent.TimeoutError{Step: 2, Timeout: time.Second}, wantErr{codes.DeadlineExceeded, exprdv1.ErrorReason_STEP_TIMEOUT.String(), "", 0}},

		{"429 with Retry-After", modelErr(&model.HTTPError{StatusCode: 429, Message: secret, RetryAfter: 7 * time.Second}),
			wantErr{codes.ResourceExhausted, exprdv1.ErrorReason_MODEL_RATE_LIMITED.String(), "", 7 * time.Second}},
		{"429 without Retry-After", modelErr(&model.HTTPError{StatusCode: 429}),
			wantErr{codes.ResourceExhausted, exprdv1.ErrorReason_MODEL_RATE_LIMITED.String(), "", rpcstatus.DefaultRetryDelay}},
		{"500", modelErr(&model.HTTPError{StatusCode: 500, Message: secret}), wantErr{codes.Unavailable, exprdv1.ErrorReason_MODEL_UNAVAILABLE.String(), "", rpcstatus.DefaultRetryDelay}},
		{"503 with Retry-After", modelErr(&model.HTTPError{StatusCode: 503, RetryAfter: 3 * time.Second}),
			wantErr{codes.Unavailable, exprdv1.ErrorReason_MODEL_UNAVAILABLE.String(), "", 3 * time.Second}},
		{"408", modelErr(&model.HTTPError{StatusCode: 408}), wantErr{codes.Unavailable, exprdv1.ErrorReason_MODEL_UNAVAILABLE.String(), "", rpcstatus.DefaultRetryDelay}},
		{"401", modelErr(&model.HTTPError{StatusCode: 401, Message: secret}), wantErr{codes.FailedPrecondition, exprdv1.ErrorReason_MODEL_AUTH.String(), "", 0}},
		{"403", modelErr(&model.HTTPError{StatusCode: 403}), wantErr{codes.FailedPrecondition, exprdv1.ErrorReason_MODEL_AUTH.String(), "", 0}},
		{"400", modelErr(&model.HTTPError{StatusCode: 400, Message: secret}), wantErr{codes.FailedPrecondition, exprdv1.ErrorReason_MODEL_REJECTED_REQUEST.String(), "", 0}},
		{"422", modelErr(&model.HTTPError{StatusCode: 422}), wantErr{codes.FailedPrecondition, exprdv1.ErrorReason_MODEL_REJECTED_REQUEST.String(), "", 0}},
		{"404 for the provider's own model", modelErr(&model.HTTPError{StatusCode: 404}), wantErr{codes.FailedPrecondition, exprdv1.ErrorReason_MODEL_ENDPOINT_NOT_FOUND.String(), "", 0}},
		{"404 for the model Start named", &agent.ModelError{Model: "gpt-nope", Err: &model.HTTPError{StatusCode: 404, Message: secret}},
			wantErr{codes.InvalidArgument, exprdv1.ErrorReason_MODEL_NOT_FOUND.String(), "start.model", 0}},
		{"404 for the model a hook named", &agent.ModelError{Model: "gpt-nope", ModelFromHook: true, Err: &model.HTTPError{StatusCode: 404}},
			wantErr{codes.InvalidArgument, exprdv1.ErrorReason_MODEL_NOT_FOUND.String(), "hook_reply.model", 0}},
		{"400 model_not_found for the model Start named", &agent.ModelError{Model: "gpt-nope", Err: &model.HTTPError{StatusCode: 400, Code: "model_not_found"}},
			wantErr{codes.InvalidArgument, exprdv1.ErrorReason_MODEL_NOT_FOUND.String(), "start.model", 0}},
		{"an unreachable model server", &agent.ModelError{Err: fmt.Errorf("%w after 3 attempts: dial tcp 10.0.0.1:443: refused", model.ErrUnreachable)},
			wantErr{codes.Unavailable, exprdv1.ErrorReason_MODEL_UNAVAILABLE.String(), "", rpcstatus.DefaultRetryDelay}},
		{"a reply cut off", &agent.ModelError{Err: model.ErrStreamCut}, wantErr{codes.Unavailable, exprdv1.ErrorReason_MODEL_UNAVAILABLE.String(), "", rpcstatus.DefaultRetryDelay}},
		{"a malformed reply", &agent.ModelError{Err: fmt.Errorf("%w: %s", model.ErrMalformedChunk, secret)}, wantErr{codes.Unavailable, exprdv1.ErrorReason_MODEL_BAD_REPLY.String(), "", 0}},
		{"the provider's own timeout", &agent.ModelError{Err: fmt.Errorf("%w after 1 attempts: %w", model.ErrUnreachable, context.DeadlineExceeded)},
			wantErr{codes.DeadlineExceeded, exprdv1.ErrorReason_MODEL_TIMEOUT.String(), "", 0}},
		{"a request the model package refused", &agent.ModelError{Err: model.ErrInvalidRequest}, wantErr{codes.Internal, exprdv1.ErrorReason_INTERNAL.String(), "", 0}},
		{"an unknown provider", &model.UnknownProviderError{Name: "x", Known: []string{"a"}}, wantErr{codes.InvalidArgument, exprdv1.ErrorReason_INVALID_FIELD.String(), "start", 0}},
		{"invalid codemode options", fmt.Errorf("%w: budgets: timeout -1s", codemode.ErrInvalidOptions), wantErr{codes.InvalidArgument, exprdv1.ErrorReason_INVALID_FIELD.String(), "start", 0}},

		{"the registry's store", &toolstore.UnavailableError{Op: "apply", Err: errors.New("dial etcd-0.internal:2379")},
			wantErr{codes.Unavailable, exprdv1.ErrorReason_REGISTRY_STORE_UNAVAILABLE.String(), "", rpcstatus.DefaultRetryDelay}},
		{"the registry's limit", &utcp.LimitError{What: "tools", Limit: 10, Would: 11}, wantErr{codes.ResourceExhausted, exprdv1.ErrorReason_QUOTA_EXCEEDED.String(), "", 0}},
		{"a manual already registered", &utcp.AlreadyExistsError{Kind: "manual", Name: "m"}, wantErr{codes.AlreadyExists, exprdv1.ErrorReason_MANUAL_EXISTS.String(), "", 0}},
		{"a tool already registered", &utcp.AlreadyExistsError{Kind: "tool", Name: "m.t", Manual: "n"}, wantErr{codes.AlreadyExists, exprdv1.ErrorReason_TOOL_EXISTS.String(), "", 0}},
		{"a manual not found", &utcp.NotFoundError{Kind: "manual", Name: "m"}, wantErr{codes.NotFound, exprdv1.ErrorReason_MANUAL_NOT_FOUND.String(), "", 0}},
		{"a tool not found", &utcp.NotFoundError{Kind: "tool", Name: "m.t", Similar: []string{"m.u"}}, wantErr{codes.NotFound, exprdv1.ErrorReason_TOOL_NOT_FOUND.String(), "", 0}},
		{"a refused manual", &manual.Error{Manual: "m", Path: "tools[0].name", Msg: "empty"}, wantErr{codes.InvalidArgument, exprdv1.ErrorReason_INVALID_MANUAL.String(), "start.tools[0].name", 0}},
		{"an unbound variable", &vars.NotFoundError{Key: "M_KEY", Manual: "m", Name: "KEY", Path: "tools[0].url"},
			wantErr{codes.InvalidArgument, exprdv1.ErrorReason_VARIABLE_UNBOUND.String(), "start.tools[0].url", 0}},
		{"an address egress refuses", &utcp.TransportError{Reason: utcp.ReasonEgress}, wantErr{codes.InvalidArgument, exprdv1.ErrorReason_EGRESS_REFUSED.String(), "start", 0}},
		{"an insecure url", &utcp.TransportError{Reason: utcp.ReasonInsecureURL}, wantErr{codes.InvalidArgument, exprdv1.ErrorReason_INSECURE_URL.String(), "start", 0}},
		{"a source answering 404", &utcp.TransportError{Reason: utcp.ReasonStatus, Status: 404}, wantErr{codes.InvalidArgument, exprdv1.ErrorReason_PROVIDER_REFUSED.String(), "start", 0}},
		{"a source answering 503", &utcp.TransportError{Reason: utcp.ReasonStatus, Status: 503}, wantErr{codes.Unavailable, exprdv1.ErrorReason_PROVIDER_UNAVAILABLE.String(), "", rpcstatus.DefaultRetryDelay}},
		{"a source unreachable", &utcp.TransportError{Reason: utcp.ReasonUnreachable}, wantErr{codes.Unavailable, exprdv1.ErrorReason_PROVIDER_UNAVAILABLE.String(), "", rpcstatus.DefaultRetryDelay}},
		{"a source too slow", &utcp.TimeoutError{Tool: "t", Timeout: time.Second}, wantErr{codes.DeadlineExceeded, exprdv1.ErrorReason_PROVIDER_TIMEOUT.String(), "", 0}},
		{"a cancel inside the core", fmt.Errorf("fetch: %w", context.Canceled), wantErr{codes.Canceled, exprdv1.ErrorReason_CANCELLED.String(), "", 0}},
		{"anything else", errors.New(secret), wantErr{codes.Internal, exprdv1.ErrorReason_INTERNAL.String(), "", 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			checkStatus(t, statusOf(context.Background(), quiet, tc.err, "start"), tc.want, secret, "etcd-0", "10.0.0.1")
		})
	}
	t.Run("the client's cancel comes first", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		checkStatus(t, statusOf(ctx, quiet, &agent.ModelError{Err: model.ErrStreamCut}, "start"), wantErr{codes.Canceled, exprdv1.ErrorReason_CANCELLED.String(), "", 0})
	})
}

// TestErrorsHelpers: the statuses the server builds itself carry their
// reason: the limits', the state's, a Rejected's, and whatever reaches a
// handler's return.
func TestErrorsHelpers(t *testing.T) {
	t.Parallel()
	budget := &membudget.ExhaustedError{What: "the state", Need: 10, Limit: 5}
	tests := []struct {
		name string
		err  error
		want wantErr
	}{
		{"the rate limit", rpcstatus.Exhausted(rpcstatus.QuotaRate, "over", rpcstatus.Retry(time.Second)), wantErr{codes.ResourceExhausted, exprdv1.ErrorReason_RATE_LIMITED.String(), "", time.Second}},
		{"a slow reader", rpcstatus.Exhausted(rpcstatus.QuotaSlowReader, "slow"), wantErr{codes.ResourceExhausted, exprdv1.ErrorReason_SLOW_READER.String(), "", 0}},
		{"too many sessions", rpcstatus.Exhausted(rpcstatus.QuotaSessions, "full"), wantErr{codes.ResourceExhausted, exprdv1.ErrorReason_QUOTA_EXCEEDED.String(), "", 0}},
		{"a state over its bytes", stateStatus("state_json", &evaluator.StateTooLargeError{Size: 10, Max: 5}),
			wantErr{codes.ResourceExhausted, exprdv1.ErrorReason_QUOTA_EXCEEDED.String(), "", 0}},
		{"a busy memory budget", stateStatus("state_json", budget), wantErr{codes.ResourceExhausted, exprdv1.ErrorReason_MEMORY_BUDGET.String(), "", rpcstatus.DefaultRetryDelay}},
		{"a state the budget can never hold", stateStatus("state_json", &membudget.ExhaustedError{What: "x", Need: 10, Limit: 5, Unreachable: true}),
			wantErr{codes.ResourceExhausted, exprdv1.ErrorReason_MEMORY_BUDGET.String(), "", 0}},
		{"a state that is not JSON", stateStatus("state_json", errors.New("not JSON")), wantErr{codes.InvalidArgument, exprdv1.ErrorReason_INVALID_FIELD.String(), "state_json", 0}},
		{"a reply nobody waits for", status.FromProto(rejected("tool_output", "c1", rpcstatus.New(codes.NotFound, "no", rpcstatus.Info(exprdv1.ErrorReason_REPLY_NOT_AWAITED))).GetStatus()).Err(),
			wantErr{codes.NotFound, exprdv1.ErrorReason_REPLY_NOT_AWAITED.String(), "", 0}},
		{"a second Start", status.FromProto(rejected("start", "", rpcstatus.New(codes.FailedPrecondition, "started", rpcstatus.Info(exprdv1.ErrorReason_ALREADY_STARTED))).GetStatus()).Err(),
			wantErr{codes.FailedPrecondition, exprdv1.ErrorReason_ALREADY_STARTED.String(), "", 0}},
		{"a Rejected with its own reason", status.FromProto(rejected("state", "", stateStatus("state.state_json", budget)).GetStatus()).Err(),
			wantErr{codes.ResourceExhausted, exprdv1.ErrorReason_MEMORY_BUDGET.String(), "", rpcstatus.DefaultRetryDelay}},
		{"a status without a reason", rpcstatus.Final(context.Background(), quiet, status.Error(codes.ResourceExhausted, "grpc: received message larger than max")),
			wantErr{codes.ResourceExhausted, "RESOURCE_EXHAUSTED", "", 0}},
		{"an error that is not a status", rpcstatus.Final(context.Background(), quiet, errors.New("open /etc/exprd: denied")),
			wantErr{codes.Internal, exprdv1.ErrorReason_INTERNAL.String(), "", 0}},
		{"a context error", rpcstatus.Final(context.Background(), quiet, context.DeadlineExceeded), wantErr{codes.DeadlineExceeded, exprdv1.ErrorReason_DEADLINE_EXCEEDED.String(), "", 0}},
		{"a panic", errInternal, wantErr{codes.Internal, exprdv1.ErrorReason_INTERNAL.String(), "", 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			checkStatus(t, tc.err, tc.want, "/etc/exprd")
		})
	}
}

// serveErrors serves s on loopback until the test ends.
func serveErrors(t *testing.T, opts ...Option) *grpc.ClientConn {
	t.Helper()
	s, err := New(append([]Option{WithLogger(quiet)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		s.Stop()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return conn
}

// TestErrorsModelThroughGRPC: a model server's HTTP error ends an AgentLoop
// turn with the status its kind calls for, RetryInfo from its Retry-After,
// and none of its text.
func TestErrorsModelThroughGRPC(t *testing.T) {
	t.Parallel()
	const secret = "the provider's own words"
	body := func(code string) []byte {
		return []byte(`{"error":{"message":"` + secret + `","type":"invalid_request_error","code":"` + code + `"}}`)
	}
	tests := []struct {
		name  string
		reply scripted.ErrorReply
		model string // AgentStart.model
		want  wantErr
	}{
		{"429 with Retry-After: 7", scripted.ErrorReply{Status: 429, RetryAfter: "7", Body: body("rate_limit")},
			"", wantErr{codes.ResourceExhausted, exprdv1.ErrorReason_MODEL_RATE_LIMITED.String(), "", 7 * time.Second}},
		{"401", scripted.ErrorReply{Status: 401, Body: body("invalid_api_key")}, "", wantErr{codes.FailedPrecondition, exprdv1.ErrorReason_MODEL_AUTH.String(), "", 0}},
		{"500", scripted.ErrorReply{Status: 500, Body: body("")}, "", wantErr{codes.Unavailable, exprdv1.ErrorReason_MODEL_UNAVAILABLE.String(), "", rpcstatus.DefaultRetryDelay}},
		{"400", scripted.ErrorReply{Status: 400, Body: body("invalid_schema")}, "", wantErr{codes.FailedPrecondition, exprdv1.ErrorReason_MODEL_REJECTED_REQUEST.String(), "", 0}},
		{"404 for the model Start named", scripted.ErrorReply{Status: 404, Body: body("model_not_found")},
			"gpt-nope", wantErr{codes.InvalidArgument, exprdv1.ErrorReason_MODEL_NOT_FOUND.String(), "start.model", 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, err := scripted.Start(scripted.Script{Turns: []scripted.Turn{{Error: &tc.reply}}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(srv.Close)
			zero := 0
			p, err := openaicompat.New("scripted", openaicompat.ProviderConfig{BaseURL: srv.BaseURL(), Model: "m", MaxRetries: &zero})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			checkStatus(t, failedTurn(t, p, tc.model), tc.want, secret)
		})
	}
}

// failedTurn runs a turn of p (model names the model) through AgentLoop
// and returns how it failed.
func failedTurn(t *testing.T, p model.Provider, modelName string) error {
	t.Helper()
	models := model.NewRegistry()
	if err := models.Register("scripted", p); err != nil {
		t.Fatal(err)
	}
	c := exprdv1.NewAgentLoopClient(serveErrors(t, WithModels(models)))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream, err := c.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: &exprdv1.AgentStart{
		Model: modelName, Messages: []*exprdv1.AgentMessage{{Role: exprdv1.AgentMessage_ROLE_USER, Content: "hi"}}}}}); err != nil {
		t.Fatal(err)
	}
	for {
		_, err = stream.Recv()
		if err != nil {
			break
		}
	}
	if errors.Is(err, io.EOF) {
		t.Fatal("the turn ended without an error")
	}
	return err
}

// TestErrorsModelReplyOverMemoryBudget: a model reply the server's memory
// budget, busy with others, cannot hold ends the turn RESOURCE_EXHAUSTED,
// MEMORY_BUDGET, with a RetryInfo.
func TestErrorsModelReplyOverMemoryBudget(t *testing.T) {
	t.Parallel()
	body := `{"choices":[{"index":0,"message":{"role":"assistant","content":"` + strings.Repeat("x", 1<<20) + `"},"finish_reason":"stop"}]}`
	srv, err := scripted.Start(scripted.Script{Turns: []scripted.Turn{{Body: body}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	off := false
	budget := membudget.New(16<<20, time.Millisecond)
	held, err := budget.Reserve(context.Background(), "others", 14<<20) // busy, not too small
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	p, err := openaicompat.New("scripted", openaicompat.ProviderConfig{BaseURL: srv.BaseURL(), Model: "m", Stream: &off},
		openaicompat.WithMemoryBudget(budget))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	checkStatus(t, failedTurn(t, p, ""), wantErr{codes.ResourceExhausted, exprdv1.ErrorReason_MEMORY_BUDGET.String(), "", rpcstatus.DefaultRetryDelay})
}

// TestErrorsInterceptorsThroughGRPC: the auth and rate-limit interceptors'
// refusals carry their reason, the rate limit a RetryInfo too.
func TestErrorsInterceptorsThroughGRPC(t *testing.T) {
	t.Parallel()
	tokens, err := auth.ParseTokens(strings.NewReader("alice 0123456789abcdef0123 exprtool\nbob fedcba98765432100123 codemode"))
	if err != nil {
		t.Fatal(err)
	}
	withToken := func(tok string) context.Context {
		return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+tok)
	}
	t.Run("auth", func(t *testing.T) {
		t.Parallel()
		c := exprdv1.NewExprToolClient(serveErrors(t, WithAuth(tokens)))
		_, err := c.Describe(context.Background(), &exprdv1.DescribeRequest{})
		checkStatus(t, err, wantErr{codes.Unauthenticated, exprdv1.ErrorReason_TOKEN_MISSING.String(), "", 0})
		_, err = c.Describe(withToken("not-a-token-anyone-has"), &exprdv1.DescribeRequest{})
		checkStatus(t, err, wantErr{codes.Unauthenticated, exprdv1.ErrorReason_TOKEN_UNKNOWN.String(), "", 0})
		_, err = c.Describe(withToken("fedcba98765432100123"), &exprdv1.DescribeRequest{})
		checkStatus(t, err, wantErr{codes.PermissionDenied, exprdv1.ErrorReason_SCOPE_MISSING.String(), "", 0})
	})
	t.Run("rate limit", func(t *testing.T) {
		t.Parallel()
		c := exprdv1.NewExprToolClient(serveErrors(t, WithRateLimit(0.5, 1)))
		if _, err := c.Describe(context.Background(), &exprdv1.DescribeRequest{}); err != nil {
			t.Fatal(err)
		}
		_, err := c.Describe(context.Background(), &exprdv1.DescribeRequest{})
		st := status.Convert(err)
		var retry time.Duration
		for _, d := range st.Details() {
			if r, ok := d.(*errdetails.RetryInfo); ok {
				retry = r.GetRetryDelay().AsDuration()
			}
		}
		// One token every 2 s, and the burst of one just spent: the next
		// comes in at most 2 s.
		if retry <= 0 || retry > 2*time.Second {
			t.Errorf("got RetryInfo %v, want (0, 2s]", retry)
		}
		checkStatus(t, err, wantErr{codes.ResourceExhausted, exprdv1.ErrorReason_RATE_LIMITED.String(), "", retry})
	})
}
