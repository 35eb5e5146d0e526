package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/exprd/exprd/server/internal/stream"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/exprd/exprd/codemode"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/server/internal/rpcstatus"
	"github.com/exprd/exprd/utcp/toolscope"
	"github.com/exprd/exprd/utcp/userinput"
)

// codeMode serves exprd.v1.CodeMode over the server's UTCP registry and,
// for prompts, its model providers.
type codeMode struct {
	exprdv1.UnimplementedCodeModeServer
	s  *Server
	rt *codemode.Runtime
}

// timeout reads a request's timeout_ms (field): 0 is def, or the server's
// maximum when that is lower; above the maximum is INVALID_ARGUMENT.
func (c *codeMode) timeout(field string, n uint32, def time.Duration) (time.Duration, error) {
	return limitedTimeout(field, n, def, c.s.opts.runLimits.codeModeMaxTimeout())
}

// Execute runs code and returns its value, its trace, or its error. Here,
// in CallTool and in Run, a tool the caller does not see (its tools:
// scopes) is off the whitelist, and a prompt is not planned with it.
func (c *codeMode) Execute(ctx context.Context, req *exprdv1.ExecuteRequest) (*exprdv1.ExecuteResponse, error) {
	timeout, err := c.timeout("timeout_ms", req.GetTimeoutMs(), codemode.DefaultTimeout)
	if err != nil {
		return nil, err
	}
	res, err := c.rt.Run(ctx, req.GetCode(), codemode.RunOptions{
		Tools: req.GetTools(), Visible: toolscope.FromContext(ctx).Func(), Budgets: codemode.Budgets{Timeout: timeout},
	})
	if err := runStatus(ctx, err); err != nil {
		return nil, err
	}
	return &exprdv1.ExecuteResponse{ValueJson: jsonText(res.ValueJSON), Trace: traceProto(res.Trace), Error: codeError(err)}, nil
}

// CallTool plans a prompt with a model and runs the plan, as go-utcp's
// CodeMode CallTool(ctx, prompt) does, with the tool handler's 3 s default.
func (c *codeMode) CallTool(ctx context.Context, req *exprdv1.CallToolRequest) (*exprdv1.CallToolResponse, error) {
	timeout, err := c.timeout("timeout_ms", req.GetTimeoutMs(), codemode.ToolHandlerTimeout)
	if err != nil {
		return nil, err
	}
	p, err := c.provider(req.GetProvider(), "provider")
	if err != nil {
		return nil, err
	}
	o, err := c.rt.Orchestrate(ctx, req.GetPrompt(), p, codemode.OrchestrateOptions{CandidateLimit: c.s.opts.runLimits.codeModeCandidates,
		Run: codemode.RunOptions{Visible: toolscope.FromContext(ctx).Func(), Budgets: codemode.Budgets{Timeout: timeout}},
	})
	c.logModelFailure(ctx, err)
	if err := runStatus(ctx, err); err != nil {
		return nil, err
	}
	return &exprdv1.CallToolResponse{Handled: o.Handled, Plan: planProto(o.Plan), ValueJson: jsonText(o.Result.ValueJSON),
		Trace: traceProto(o.Result.Trace), Error: codeError(err)}, nil
}

// provider picks a model provider by name ("" is the default).
func (c *codeMode) provider(name, field string) (model.Provider, error) {
	return modelProvider(c.s.opts.models, name, field)
}

// errRunCancelled is the cause of a run the client cancelled (RunCancel).
var errRunCancelled = errors.New("the client cancelled the run")

// errNoApproval rejects a call that waits for an approval after the client
// closed its side of the stream: no reply can come.
var errNoApproval = fmt.Errorf("%w: the client closed its side of the stream before approving it", codemode.ErrRejected)

type runStream = grpc.BidiStreamingServer[exprdv1.RunRequest, exprdv1.RunResponse]

// Run runs code, or the plan a model makes of a prompt, streaming its
// events. A tool in needs_approval pauses the run until the client's
// ApprovalReply; RunCancel stops it (the tool call in flight is cancelled).
// The client's half-close only means no more messages: the run goes on to
// its result, and approvals it then waits for are rejected.
func (c *codeMode) Run(rpc runStream) error {
	first, err := stream.First(rpc, errFirstNotStart)
	if err != nil {
		return err
	}
	start := first.GetStart()
	if start == nil {
		return errFirstNotStart
	}
	timeout, err := c.timeout("start.timeout_ms", start.GetTimeoutMs(), codemode.DefaultTimeout)
	if err != nil {
		return err
	}
	var p model.Provider
	switch start.GetSource().(type) {
	case *exprdv1.RunStart_Code:
	case *exprdv1.RunStart_Prompt:
		if p, err = c.provider(start.GetProvider(), "start.provider"); err != nil {
			return err
		}
	default:
		return rpcstatus.BadRequest("start.source", "give code or a prompt")
	}
	// What the run sends is queued and sent by one goroutine: a client
	// that stops reading ends the run after the slow-reader timeout
	// instead of holding it, and what it pins, for ever.
	st := stream.Open(c.s.streamConfig(), rpc, nil, stream.EndsWork)
	defer st.Close()
	ctx := st.Ctx
	r := &runSession{ctx: ctx, out: st.Out, approvals: stream.NewCorrelator[string, bool](func(id string) string {
		return fmt.Sprintf("no approval %q is waiting", id)
	})}
	r.input = newInputAsker(c.s.opts.inputTimeout, r.askInput)
	if start.GetRelayInputRequests() {
		ctx = userinput.WithAsker(ctx, r.input)
	}
	st.Receive(func(m *exprdv1.RunRequest) bool { return r.handle(m, st.Cancel) }, r.approvals.Close, r.input.replies.Close)

	opts := codemode.RunOptions{
		Tools:         start.GetTools(),
		Visible:       toolscope.FromContext(ctx).Func(),
		Budgets:       codemode.Budgets{Timeout: timeout},
		NeedsApproval: start.GetNeedsApproval(),
		Approve:       r.approve,
		OnEvent:       r.event,
	}
	var res codemode.Result
	notHandled := false
	if p == nil {
		res, err = c.rt.Run(ctx, start.GetCode(), opts)
	} else {
		var o codemode.Orchestration
		o, err = c.rt.Orchestrate(ctx, start.GetPrompt(), p, codemode.OrchestrateOptions{CandidateLimit: c.s.opts.runLimits.codeModeCandidates, Run: opts, OnPlan: func(pl codemode.Plan) {
			r.send(&exprdv1.RunResponse{Event: &exprdv1.RunResponse_Plan{Plan: planProto(pl)}})
		}})
		res, notHandled = o.Result, !o.Handled && err == nil
		c.logModelFailure(ctx, err)
	}
	if perr := stream.BrokenProtocol(ctx); perr != nil {
		return perr // the client broke the protocol: its status, not the run's
	}
	if serr := rpc.Context().Err(); serr != nil {
		return status.FromContextError(serr).Err() // nobody is left to answer
	}
	if errors.Is(err, codemode.ErrInvalidOptions) {
		return statusOf(ctx, c.s.opts.logger, err, "start")
	}
	return stream.SendStatus(r.send(&exprdv1.RunResponse{Event: &exprdv1.RunResponse_Result{Result: &exprdv1.RunResult{
		ValueJson: jsonText(res.ValueJSON), Error: codeError(err), Cancelled: res.Cancelled, NotHandled: notHandled, Trace: traceProto(res.Trace),
	}}}))
}

// runSession is one Run stream's approvals in flight and its sender.
type runSession struct {
	ctx       context.Context
	out       *stream.Outbox[*exprdv1.RunResponse]
	approvals *stream.Correlator[string, bool] // by approval id
	input     *inputAsker                      // tools' requests for user input, by input id
}

func (r *runSession) send(m *exprdv1.RunResponse) error { return r.out.Put(r.ctx, m) }

// handle acts on one client message after Start: approval replies and
// Cancel. A reply nobody waits for, a second Start or an empty message is
// answered with Rejected and changes nothing. The stream is read to its
// end.
func (r *runSession) handle(m *exprdv1.RunRequest, cancel context.CancelCauseFunc) (stop bool) {
	var kind, id string
	var bad error
	switch msg := m.GetMsg().(type) {
	case *exprdv1.RunRequest_ApprovalReply:
		kind, id = "approval_reply", msg.ApprovalReply.GetApprovalId()
		bad = r.approvals.Deliver(id, msg.ApprovalReply.GetApproved())
	case *exprdv1.RunRequest_InputReply:
		kind, id = "input_reply", msg.InputReply.GetInputId()
		bad = r.input.deliver(id, int32(msg.InputReply.GetAction()), msg.InputReply.GetContentJson())
	case *exprdv1.RunRequest_Cancel:
		cancel(errRunCancelled)
	case *exprdv1.RunRequest_Start:
		kind, bad = "start", alreadyStarted("start", "the run has started; Start comes once")
	default:
		bad = rpcstatus.BadRequest("msg", "after Start only ApprovalReply, InputReply and RunCancel may come")
	}
	if bad != nil {
		_ = r.send(&exprdv1.RunResponse{Event: &exprdv1.RunResponse_Rejected{Rejected: rejected(kind, id, bad)}})
	}
	return false
}

// approve asks the client and waits for its reply. After the client's
// half-close the call is rejected at once, and so is one still waiting.
func (r *runSession) approve(ctx context.Context, tool string, args map[string]any) (bool, error) {
	id := r.approvals.ID()
	argsJSON, _ := json.Marshal(args)
	ok, err := r.approvals.Ask(ctx, id, nil, func() error {
		return r.send(&exprdv1.RunResponse{Event: &exprdv1.RunResponse_ApprovalRequest{ApprovalRequest: &exprdv1.ApprovalRequest{
			ApprovalId: id, Tool: tool, ArgumentsJson: jsonText(argsJSON),
		}}})
	})
	if errors.Is(err, stream.ErrClientGone) {
		return false, errNoApproval
	}
	return ok, err
}

// askInput sends a tool's request for user input (Start's
// relay_input_requests).
func (r *runSession) askInput(_ context.Context, id string, req *userinput.Request) error {
	return r.send(&exprdv1.RunResponse{Event: &exprdv1.RunResponse_InputRequest{InputRequest: &exprdv1.InputRequest{
		InputId: id, Tool: req.Tool, Message: req.Message, RequestedSchemaJson: string(req.Schema)}}})
}

// event streams a run's tool calls and chunks as they happen.
func (r *runSession) event(e codemode.Event) {
	var m *exprdv1.RunResponse
	switch e.Kind {
	case codemode.EventToolStart:
		m = &exprdv1.RunResponse{Event: &exprdv1.RunResponse_ToolCallStarted{ToolCallStarted: &exprdv1.ToolCallStarted{
			Tool: e.Call.Tool, ArgumentsJson: jsonText(e.Call.ArgsJSON())}}}
	case codemode.EventToolEnd:
		m = &exprdv1.RunResponse{Event: &exprdv1.RunResponse_ToolCallFinished{ToolCallFinished: traceOne(e.Call)}}
	case codemode.EventChunk:
		chunk, _ := json.Marshal(e.Chunk)
		m = &exprdv1.RunResponse{Event: &exprdv1.RunResponse_Chunk{Chunk: &exprdv1.StreamChunk{Tool: e.Call.Tool, ChunkJson: jsonText(chunk)}}}
	default:
		return
	}
	_ = r.send(m)
}

// runStatus is the gRPC error for a run that could not start (its
// options, its provider), or for a caller that went away (statusOf); a
// program's own failure, and a model's failure to plan, are data
// (codeError).
func runStatus(ctx context.Context, err error) error {
	var unknown *model.UnknownProviderError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, codemode.ErrInvalidOptions):
		return statusOf(ctx, nil, err, "options")
	case ctx.Err() != nil:
		return rpcstatus.FromContext(ctx.Err())
	case errors.As(err, &unknown):
		return statusOf(ctx, nil, err, "provider")
	}
	return nil
}

// logModelFailure logs a prompt's failed model request whole: the client
// reads only model.Describe's words (codeError), the operator the rest.
func (c *codeMode) logModelFailure(ctx context.Context, err error) {
	if errors.Is(err, codemode.ErrModel) {
		c.s.opts.logger.WarnContext(ctx, "codemode: the model request failed", "err", errors.Unwrap(err))
	}
}

func codeError(err error) *exprdv1.CodeError {
	if err == nil {
		return nil
	}
	var ce *codemode.Error
	if errors.As(err, &ce) {
		return &exprdv1.CodeError{Reason: string(ce.Reason), Message: ce.Message, Line: uint32(ce.Line), Column: uint32(ce.Column)}
	}
	// Not one of the run's own errors: its text is not ours to show.
	return &exprdv1.CodeError{Reason: string(codemode.HostFunction), Message: "the run failed"}
}

func traceOne(c codemode.Call) *exprdv1.ToolCallTrace {
	return &exprdv1.ToolCallTrace{Tool: c.Tool, ArgumentsJson: jsonText(c.ArgsJSON()),
		DurationMs: float64(c.Duration) / float64(time.Millisecond), Outcome: outcomes[c.Outcome], Error: c.Error}
}

var outcomes = map[codemode.Outcome]exprdv1.ToolCallTrace_Outcome{
	codemode.OutcomeOK:        exprdv1.ToolCallTrace_OUTCOME_OK,
	codemode.OutcomeError:     exprdv1.ToolCallTrace_OUTCOME_ERROR,
	codemode.OutcomeRejected:  exprdv1.ToolCallTrace_OUTCOME_REJECTED,
	codemode.OutcomeCancelled: exprdv1.ToolCallTrace_OUTCOME_CANCELLED,
	codemode.OutcomeTimeout:   exprdv1.ToolCallTrace_OUTCOME_TIMEOUT,
}

func traceProto(calls []codemode.Call) []*exprdv1.ToolCallTrace {
	out := make([]*exprdv1.ToolCallTrace, len(calls))
	for i, c := range calls {
		out[i] = traceOne(c)
	}
	return out
}

func planProto(p codemode.Plan) *exprdv1.Plan {
	return &exprdv1.Plan{Tools: p.Tools, Code: p.Code, Stream: p.Stream}
}
