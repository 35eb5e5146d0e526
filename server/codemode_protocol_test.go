package server_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/model/scripted"
	"github.com/exprd/exprd/server"
)

type runClient = grpc.BidiStreamingClient[exprdv1.RunRequest, exprdv1.RunResponse]

// startRun opens a Run under a deadline (a run that hangs fails the test
// with DeadlineExceeded) and sends start.
func startRun(t *testing.T, c exprdv1.CodeModeClient, start *exprdv1.RunStart) runClient {
	t.Helper()
	return openStream(t, c.Run, &exprdv1.RunRequest{Msg: &exprdv1.RunRequest_Start{Start: start}})
}

// drainRun receives a run's events until it ends, calling on (when set)
// for each; it returns the result, and the stream's end (nil after the
// result).
func drainRun(stream runClient, on func(*exprdv1.RunResponse)) (*exprdv1.RunResult, error) {
	for {
		m, err := stream.Recv()
		if err != nil {
			return nil, err
		}
		if on != nil {
			on(m)
		}
		if r := m.GetResult(); r != nil {
			if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
				return r, err
			}
			return r, nil
		}
	}
}

// Half-close means "no more client messages": the run goes on to its
// result, and an approval it waits for is rejected at once (issue: the
// run was cancelled, as the repro with grpcurl -d @ showed).
func TestCodeModeRunHalfClose(t *testing.T) {
	t.Parallel()
	plan := `{"tools": ["math.add"], "code": "codemode.Get(codemode.CallTool(\"math.add\", {\"a\": 2, \"b\": 3}), \"result\")", "stream": false}`
	c := codeModeServerWith(t, []scripted.Turn{{Text: plan}})
	tools := []string{"math.add", "math.multiply"}
	const rejected = `tool "math.multiply": the call was rejected: the client closed its side of the stream before approving it`
	onApproval := func(m *exprdv1.RunResponse) bool { return m.GetApprovalRequest() != nil }
	tests := []struct {
		name  string
		start *exprdv1.RunStart
		// closeOn: nil closes right after Start; else at the first event
		// it reports true for.
		closeOn   func(*exprdv1.RunResponse) bool
		wantValue string
		wantError string // the start of the error's message
	}{
		{"code runs to its result", &exprdv1.RunStart{Source: &exprdv1.RunStart_Code{Code: `codemode.CallTool("math.add", {"a": 5, "b": 7})`}, Tools: tools}, nil, `{"result":12}`, ""},
		{"a chain runs to its result", &exprdv1.RunStart{Source: &exprdv1.RunStart_Code{Code: chain}, Tools: tools}, nil, `{"result":36}`, ""},
		{"a prompt's plan runs to its result", &exprdv1.RunStart{Source: &exprdv1.RunStart_Prompt{Prompt: "What is 2 plus 3?"}}, nil, `5`, ""},
		{"an approval asked after is rejected", &exprdv1.RunStart{Source: &exprdv1.RunStart_Code{Code: chain}, Tools: tools, NeedsApproval: []string{"math.multiply"}}, nil, "", rejected},
		{"an approval waiting is rejected", &exprdv1.RunStart{Source: &exprdv1.RunStart_Code{Code: chain}, Tools: tools, NeedsApproval: []string{"math.multiply"}}, onApproval, "", rejected},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stream := startRun(t, c, tc.start)
			if tc.closeOn == nil {
				_ = stream.CloseSend()
			}
			r, err := drainRun(stream, func(m *exprdv1.RunResponse) {
				if tc.closeOn != nil && tc.closeOn(m) {
					_ = stream.CloseSend()
				}
			})
			if err != nil {
				t.Fatalf("got %v, want a result", err)
			}
			if r.GetCancelled() || r.GetValueJson() != tc.wantValue || !strings.HasPrefix(r.GetError().GetMessage(), tc.wantError) {
				t.Errorf("got result %v, want value %s and error %q, not cancelled", r, tc.wantValue, tc.wantError)
			}
			if tc.wantError != "" {
				if tr := r.GetTrace(); len(tr) != 2 || tr[1].GetOutcome() != exprdv1.ToolCallTrace_OUTCOME_REJECTED || r.GetError().GetReason() != "host-function" {
					t.Errorf("got %v, want host-function with math.multiply rejected in the trace", r)
				}
			}
		})
	}
}

// A client message the run cannot use is answered with Rejected, and the
// run goes on to its result, every time: an approval reply nobody waits
// for (an unknown id, or one repeated) is NOT_FOUND, a second Start
// FAILED_PRECONDITION, a message with no field set INVALID_ARGUMENT
// (issue: each ended the stream with INVALID_ARGUMENT).
func TestCodeModeRunRejectsAndGoesOn(t *testing.T) {
	t.Parallel()
	const iterations = 20
	c := codeModeServer(t)
	approval := func(id string) *exprdv1.RunRequest {
		return &exprdv1.RunRequest{Msg: &exprdv1.RunRequest_ApprovalReply{ApprovalReply: &exprdv1.ApprovalReply{ApprovalId: id, Approved: true}}}
	}
	tests := []struct {
		name string
		// bad is what is sent at the first approval request, before the
		// client's own reply to it; answers says it holds that reply.
		bad         func(*exprdv1.ApprovalRequest) []*exprdv1.RunRequest
		answers     bool
		code        codes.Code
		kind, field string
	}{
		{"an approval reply for an unknown id", func(*exprdv1.ApprovalRequest) []*exprdv1.RunRequest {
			return []*exprdv1.RunRequest{approval("nobody")}
		}, false, codes.NotFound, "approval_reply", ""},
		{"an approval reply repeated", func(a *exprdv1.ApprovalRequest) []*exprdv1.RunRequest {
			return []*exprdv1.RunRequest{approval(a.GetApprovalId()), approval(a.GetApprovalId())}
		}, true, codes.NotFound, "approval_reply", ""},
		{"a second start", func(*exprdv1.ApprovalRequest) []*exprdv1.RunRequest {
			return []*exprdv1.RunRequest{{Msg: &exprdv1.RunRequest_Start{Start: &exprdv1.RunStart{Source: &exprdv1.RunStart_Code{Code: "1"}}}}}
		}, false, codes.FailedPrecondition, "start", ""},
		{"a message with no field set", func(*exprdv1.ApprovalRequest) []*exprdv1.RunRequest {
			return []*exprdv1.RunRequest{{}}
		}, false, codes.InvalidArgument, "", "msg"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for range iterations {
				// Both calls need approval: the client's replies wait until
				// the Rejected came, so the run cannot end before it.
				stream := startRun(t, c, &exprdv1.RunStart{Source: &exprdv1.RunStart_Code{Code: chain}, Tools: []string{"math.add", "math.multiply"},
					NeedsApproval: []string{"math.add", "math.multiply"}})
				var rejections []*exprdv1.Rejected
				var held []*exprdv1.RunRequest
				sent := false
				r, err := drainRun(stream, func(m *exprdv1.RunResponse) {
					if a := m.GetApprovalRequest(); a != nil {
						answered := false
						if !sent {
							for _, b := range tc.bad(a) {
								_ = stream.Send(b)
							}
							sent, answered = true, tc.answers
						}
						if !answered {
							held = append(held, approval(a.GetApprovalId()))
						}
					}
					if rj := m.GetRejected(); rj != nil {
						rejections = append(rejections, rj)
					}
					if len(rejections) > 0 {
						for _, h := range held {
							_ = stream.Send(h)
						}
						held = nil
					}
				})
				if err != nil {
					t.Fatalf("got %v, want the run's result", err)
				}
				if r.GetValueJson() != `{"result":36}` || r.GetError() != nil || r.GetCancelled() {
					t.Errorf("got result %v, want the chain's value", r)
				}
				if len(rejections) != 1 {
					t.Fatalf("got rejections %v, want one", rejections)
				}
				rj, st := rejections[0], rejectedStatus(rejections[0])
				if rj.GetKind() != tc.kind || st.Code() != tc.code || badRequestField(st) != tc.field || st.Message() == "" {
					t.Errorf("got Rejected{kind %q, %v %q, field %q}, want kind %q, %v, field %q",
						rj.GetKind(), st.Code(), st.Message(), badRequestField(st), tc.kind, tc.code, tc.field)
				}
				if t.Failed() {
					return
				}
			}
		})
	}
}

// Closing the stream before Start is INVALID_ARGUMENT, not UNKNOWN "EOF".
func TestCodeModeRunFirstMessageMustBeStart(t *testing.T) {
	t.Parallel()
	c := codeModeServer(t)
	tests := []struct {
		name  string
		first *exprdv1.RunRequest // nil: close at once
		field string
	}{
		{"nothing", nil, "start"},
		{"a cancel", &exprdv1.RunRequest{Msg: &exprdv1.RunRequest_Cancel{Cancel: &exprdv1.RunCancel{}}}, "start"},
		{"an approval reply", &exprdv1.RunRequest{Msg: &exprdv1.RunRequest_ApprovalReply{ApprovalReply: &exprdv1.ApprovalReply{}}}, "start"},
		{"a start with neither code nor prompt", &exprdv1.RunRequest{Msg: &exprdv1.RunRequest_Start{Start: &exprdv1.RunStart{}}}, "start.source"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stream, err := c.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if tc.first != nil {
				_ = stream.Send(tc.first)
			}
			_ = stream.CloseSend()
			_, err = stream.Recv()
			st := wantStatus(t, err, codes.InvalidArgument, tc.field)
			if tc.field == "start" && !strings.Contains(st.Message(), "the stream's first message must be Start") {
				t.Errorf("got message %q, want it to say the first message must be Start", st.Message())
			}
		})
	}
}

// With no model providers, whether the server has no registry of them or
// an empty one, prompt mode is FAILED_PRECONDITION with a
// PreconditionFailure (issue: an empty registry, which exprd always
// passes, gave INVALID_ARGUMENT "no providers are configured").
func TestCodeModeNoModelProviders(t *testing.T) {
	t.Parallel()
	servers := []struct {
		name string
		opts []server.Option
	}{
		{"no registry", nil},
		{"an empty registry", []server.Option{server.WithModels(model.NewRegistry())}},
	}
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			c := codeModeServerWith(t, nil, srv.opts...)
			calls := []struct {
				name string
				call func() error
			}{
				{"Run", func() error {
					_, err := drainRun(startRun(t, c, &exprdv1.RunStart{Source: &exprdv1.RunStart_Prompt{Prompt: "add 2 and 3"}}), nil)
					return err
				}},
				{"Run naming a provider", func() error {
					_, err := drainRun(startRun(t, c, &exprdv1.RunStart{Source: &exprdv1.RunStart_Prompt{Prompt: "add 2 and 3"}, Provider: "openai"}), nil)
					return err
				}},
				{"CallTool", func() error {
					_, err := c.CallTool(context.Background(), &exprdv1.CallToolRequest{Prompt: "add 2 and 3"})
					return err
				}},
			}
			for _, call := range calls {
				st := wantStatus(t, call.call(), codes.FailedPrecondition, "")
				var pf *errdetails.PreconditionFailure
				for _, d := range st.Details() {
					if p, ok := d.(*errdetails.PreconditionFailure); ok {
						pf = p
					}
				}
				if !strings.Contains(st.Message(), "no model providers") || pf == nil {
					t.Errorf("%s: got %q with details %v, want it to say there are no model providers, with a PreconditionFailure", call.name, st.Message(), st.Details())
				}
			}
		})
	}
}
