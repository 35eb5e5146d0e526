package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/exprd/exprd/agent"
	"github.com/exprd/exprd/codemode"
	"github.com/exprd/exprd/evaluator"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/model"
)

// agentLoop serves exprd.v1.AgentLoop: one agent turn per stream.
type agentLoop struct {
	exprdv1.UnimplementedAgentLoopServer
	s  *Server
	rt *codemode.Runtime // nil without a UTCP registry
}

type agentStream = grpc.BidiStreamingServer[exprdv1.AgentLoopRunRequest, exprdv1.AgentLoopRunResponse]

// errAborted is the cause of a turn the client aborted (AgentCancel).
var errAborted = errors.New("the client aborted the turn")

// errClientGone answers what waits for the client after its half-close:
// no reply can come.
var errClientGone = errors.New("the client closed its side of the stream")

// codemodeParameters is the built-in codemode tool's input.
var codemodeParameters = json.RawMessage(`{"type":"object","required":["code"],"additionalProperties":false,"properties":{"code":{"type":"string","description":"Expr source over codemode.CallTool, codemode.CallToolStream and codemode.Get; the last expression is the result."}}}`)

// turn is one Run stream: what it waits for from the client.
type turn struct {
	stream agentStream
	ctx    context.Context
	out    *outbox[*exprdv1.AgentLoopRunResponse]
	state  *evaluator.State
	sendMu sync.Mutex // serialises puts

	mu        sync.Mutex
	outputs   replies[*exprdv1.ToolOutput]
	hooks     replies[*exprdv1.HookReply]
	approvals replies[*exprdv1.AgentApprovalReply]
	seq       int
	// closed (under mu) and gone: the client half-closed, and no reply
	// can come any more.
	closed bool
	gone   chan struct{}
}

// replies are the requests of one kind that wait for the client's reply,
// by id.
type replies[T any] struct {
	waiting map[string]waiter[T]
}

// waiter is one request waiting for its reply; check, when set, refuses a
// reply that does not fit the request (the request goes on waiting).
type waiter[T any] struct {
	ch    chan T
	check func(T) error
}

func newReplies[T any]() replies[T] {
	return replies[T]{waiting: map[string]waiter[T]{}}
}

func (t *turn) send(m *exprdv1.AgentLoopRunResponse) error {
	t.sendMu.Lock()
	defer t.sendMu.Unlock()
	return t.out.put(t.ctx, m)
}

// Run runs one agent turn. The client's half-close only means no more
// messages: the turn goes on to its end, and what would wait for the
// client is answered at once (see the half-close cases of the hooks,
// approve and runOnClient).
func (a *agentLoop) Run(stream agentStream) error {
	first, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		return errFirstNotStart
	}
	if err != nil {
		return err
	}
	start := first.GetStart()
	if start == nil {
		return errFirstNotStart
	}
	provider, err := modelProvider(a.s.opts.models, start.GetProvider(), "start.provider")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(stream.Context())
	defer cancel(nil)
	t := &turn{stream: stream, ctx: ctx, state: a.s.opts.initialState.Fork(a.s.opts.maxStateBytes),
		outputs: newReplies[*exprdv1.ToolOutput](), hooks: newReplies[*exprdv1.HookReply](),
		approvals: newReplies[*exprdv1.AgentApprovalReply](), gone: make(chan struct{})}
	// What the turn sends is queued and sent by one goroutine: a client
	// that stops reading ends the turn after the slow-reader timeout.
	t.out = newOutbox(a.s.opts.outboxBytes, a.s.opts.slowReaderTimeout, func(m *exprdv1.AgentLoopRunResponse) int { return proto.Size(m) }, stream.Send)
	defer t.out.close()
	go endWhenDead(ctx, t.out, cancel)
	mem := a.s.opts.memory.Empty("the turn's state")
	defer mem.Close() // a change arriving after the handler returns reserves nothing
	t.state.UseMemory(mem)
	if js := start.GetStateJson(); len(js) > 0 {
		if err := t.state.Replace([]byte(js)); err != nil {
			return stateStatus("start.state_json", err)
		}
	}
	cfg, err := a.config(ctx, start, provider, t)
	if err != nil {
		return err
	}
	go t.receive(cancel)

	out, err := agent.Run(ctx, cfg)
	if perr := brokenProtocol(ctx); perr != nil {
		return perr // the client broke the protocol: its status, not the turn's
	}
	if err != nil {
		return a.status(ctx, err)
	}
	done := &exprdv1.AgentDone{Text: out.Text, Usage: usageProto(out.Usage), StopReason: stopReasons[out.StopReason]}
	for _, s := range out.Steps {
		done.Steps = append(done.Steps, stepProto(s))
	}
	return sendStatus(t.send(&exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_Done{Done: done}}))
}

// status maps a turn's failure to its gRPC status (statusOf): the
// client's abort, then the turn's own errors, with the config's fields
// named under start. What a client sees never holds a model provider's own
// error text: that is logged.
func (a *agentLoop) status(ctx context.Context, err error) error {
	if errors.Is(context.Cause(ctx), errAborted) {
		return abortedByClient()
	}
	return statusOf(ctx, a.s.opts.logger, err, "start")
}

// wireField renames a field of agent.Config to its AgentStart name.
func wireField(f string) string {
	for _, r := range [][2]string{{".parameters", ".parameters_json"}, {".timeout", ".timeout_ms"}, {"_timeout", "_timeout_ms"}} {
		if strings.HasSuffix(f, r[0]) {
			return strings.TrimSuffix(f, r[0]) + r[1]
		}
	}
	return f
}

// config turns Start into the loop's configuration.
func (a *agentLoop) config(ctx context.Context, start *exprdv1.AgentStart, p model.Provider, t *turn) (agent.Config, error) {
	choice, err := toolChoice(start.GetToolChoice(), "start.tool_choice")
	if err != nil {
		return agent.Config{}, err
	}
	cfg := agent.Config{
		Provider: p, Model: start.GetModel(), System: start.GetSystem(),
		ToolChoice:  choice,
		Parallelism: int(start.GetParallelism()),
		ToolTimeout: time.Duration(start.GetToolTimeoutMs()) * time.Millisecond,
		StepTimeout: time.Duration(start.GetStepTimeoutMs()) * time.Millisecond,
		TurnTimeout: time.Duration(start.GetTurnTimeoutMs()) * time.Millisecond,
		Events:      t.events(),
		Approve:     t.approve,
	}
	for i, m := range start.GetMessages() {
		msg, err := messageFromProto(m, fmt.Sprintf("start.messages[%d]", i))
		if err != nil {
			return cfg, err
		}
		cfg.Messages = append(cfg.Messages, msg)
	}
	for i, tp := range start.GetTools() {
		tool, err := a.tool(ctx, i, tp, start, t)
		if err != nil {
			return cfg, err
		}
		cfg.Tools = append(cfg.Tools, tool)
	}
	if start.GetStop() != nil {
		stop, err := stopFromProto(start.GetStop())
		if err != nil {
			return cfg, badRequest("start.stop", err.Error())
		}
		cfg.Stop = stop
	}
	for _, h := range start.GetHooks() {
		switch h {
		case exprdv1.Hook_HOOK_PREPARE_STEP:
			cfg.Hooks.PrepareStep = t.prepareStep
		case exprdv1.Hook_HOOK_PRE_TOOL_CALL:
			cfg.Hooks.PreToolCall = t.preToolCall
		case exprdv1.Hook_HOOK_POST_TOOL_CALL:
			cfg.Hooks.PostToolCall = t.postToolCall
		default:
			return cfg, badRequest("start.hooks", fmt.Sprintf("unknown hook %v: HOOK_PREPARE_STEP, HOOK_PRE_TOOL_CALL or HOOK_POST_TOOL_CALL", h))
		}
	}
	return cfg, nil
}

// tool builds the i-th declared tool with its executor; its error is the
// stream's status.
func (a *agentLoop) tool(_ context.Context, i int, tp *exprdv1.AgentTool, start *exprdv1.AgentStart, t *turn) (agent.Tool, error) {
	field := fmt.Sprintf("start.tools[%d]", i)
	tool := agent.Tool{Name: tp.GetName(), Description: tp.GetDescription(), Parameters: json.RawMessage(tp.GetParametersJson()),
		NeedsApproval: tp.GetNeedsApproval(), Timeout: time.Duration(tp.GetTimeoutMs()) * time.Millisecond}
	switch tp.GetExecutor() {
	case exprdv1.AgentTool_EXECUTOR_UNSPECIFIED:
	case exprdv1.AgentTool_EXECUTOR_CLIENT:
		tool.Exec = agent.ExecutorFunc(t.runOnClient)
	case exprdv1.AgentTool_EXECUTOR_UTCP:
		if a.s.opts.registry == nil {
			return tool, statusErr(codes.FailedPrecondition, field+": this server has no UTCP registry", errorInfo(reasonNoRegistry))
		}
		ut, err := a.s.opts.registry.Tool(tp.GetUtcpTool())
		if err != nil {
			return tool, badRequest(field+".utcp_tool", clientText(err))
		}
		if len(tool.Parameters) == 0 {
			tool.Parameters = ut.Inputs
		}
		if tool.Description == "" {
			tool.Description = ut.Description
		}
		tool.Exec = agent.UTCPExecutor(a.s.opts.registry, tp.GetUtcpTool())
	case exprdv1.AgentTool_EXECUTOR_EXPR:
		settings, err := a.s.settings(start.GetExprSettings())
		if err != nil {
			// Its BadRequest names settings.*; in a turn they are Start's.
			return tool, refield(err, "settings", "start.expr_settings")
		}
		et, err := evaluator.NewTool(settings, a.s.opts.budgets, evaluator.ClientUnreachable())
		if err != nil {
			return tool, badRequest("start.expr_settings", err.Error())
		}
		d := et.Describe()
		if len(tool.Parameters) == 0 {
			tool.Parameters = d.InputSchema
		}
		if tool.Description == "" {
			tool.Description = d.Description
		}
		tool.Exec = agent.ExprExecutor(a.s.eval, et, t.state, &agentExprHost{t: t})
	case exprdv1.AgentTool_EXECUTOR_CODEMODE:
		if a.rt == nil {
			return tool, statusErr(codes.FailedPrecondition, field+": this server has no UTCP registry for codemode", errorInfo(reasonNoRegistry))
		}
		if len(tool.Parameters) == 0 {
			tool.Parameters = codemodeParameters
		}
		tool.Exec = agent.CodeModeExecutor(a.rt, tp.GetCodemodeTools())
	default:
		return tool, badRequest(field+".executor", fmt.Sprintf("unknown executor %v", tp.GetExecutor()))
	}
	return tool, nil
}

// refield moves the field of err's BadRequest from under the prefix from
// to under to; an error with no BadRequest becomes one naming to.
func refield(err error, from, to string) error {
	st := status.Convert(err)
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) > 0 {
			v := br.GetFieldViolations()[0]
			if rest, ok := strings.CutPrefix(v.GetField(), from); ok {
				return badRequest(to+rest, v.GetDescription())
			}
			return badRequest(v.GetField(), v.GetDescription())
		}
	}
	return badRequest(to, st.Message())
}

// receive dispatches the client's messages until the stream ends. A
// message the turn cannot use (a reply nobody waits for, a state the turn
// refuses) is answered with Rejected and changes nothing; Cancel aborts
// the turn. The client's half-close cancels nothing.
func (t *turn) receive(cancel context.CancelCauseFunc) {
	for {
		m, err := t.stream.Recv()
		if errors.Is(err, io.EOF) {
			t.mu.Lock()
			t.closed = true
			t.mu.Unlock()
			close(t.gone)
			return
		}
		if err != nil {
			cancel(recvFailed(err))
			return
		}
		var kind, callID string
		var bad error
		switch msg := m.GetMsg().(type) {
		case *exprdv1.AgentLoopRunRequest_ToolOutput:
			kind, callID = "tool_output", msg.ToolOutput.GetCallId()
			bad = deliver(t, &t.outputs, callID, msg.ToolOutput, "tool output")
		case *exprdv1.AgentLoopRunRequest_HookReply:
			kind, callID = "hook_reply", msg.HookReply.GetHookId() // hook replies are matched by hook id
			bad = deliver(t, &t.hooks, msg.HookReply.GetHookId(), msg.HookReply, "hook")
		case *exprdv1.AgentLoopRunRequest_ApprovalReply:
			kind, callID = "approval_reply", msg.ApprovalReply.GetCallId()
			bad = deliver(t, &t.approvals, callID, msg.ApprovalReply, "approval")
		case *exprdv1.AgentLoopRunRequest_State:
			kind = "state"
			if err := t.state.Replace([]byte(msg.State.GetStateJson())); err != nil {
				bad = stateStatus("state.state_json", err)
			}
		case *exprdv1.AgentLoopRunRequest_StatePatch:
			kind = "state_patch"
			if err := t.state.MergePatch([]byte(msg.StatePatch.GetPatchJson())); err != nil {
				bad = stateStatus("state_patch.patch_json", err)
			}
		case *exprdv1.AgentLoopRunRequest_Cancel:
			cancel(errAborted)
			return
		case *exprdv1.AgentLoopRunRequest_Start:
			kind, bad = "start", status.Error(codes.FailedPrecondition, "the turn has started; Start comes once")
		default:
			bad = badRequest("msg", "after Start: tool outputs, hook and approval replies, state, or cancel")
		}
		if bad != nil {
			_ = t.send(&exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_Rejected{Rejected: rejected(kind, callID, bad)}})
		}
	}
}

// deliver hands a reply to the request waiting for it. A reply nobody
// waits for (late, repeated, or for an id never sent) is NOT_FOUND, and
// one its request's check refuses is INVALID_ARGUMENT; either changes
// nothing.
func deliver[T any](t *turn, r *replies[T], id string, v T, what string) error {
	t.mu.Lock()
	w, ok := r.waiting[id]
	if ok && w.check != nil {
		if err := w.check(v); err != nil {
			t.mu.Unlock()
			return err
		}
	}
	delete(r.waiting, id)
	t.mu.Unlock()
	if !ok {
		return status.Errorf(codes.NotFound, "no %s is waiting for %q", what, id)
	}
	w.ch <- v
	return nil
}

// wait registers id, sends m, and waits for the reply, ctx, or the
// client's half-close (errClientGone, also at once when the client has
// already half-closed: m is not sent). check, when not nil, refuses
// replies that do not fit.
func wait[T any](ctx context.Context, t *turn, r *replies[T], id string, check func(T) error, m *exprdv1.AgentLoopRunResponse) (T, error) {
	var zero T
	ch := make(chan T, 1)
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return zero, errClientGone
	}
	r.waiting[id] = waiter[T]{ch: ch, check: check}
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		if r.waiting[id].ch == ch {
			delete(r.waiting, id)
		}
		t.mu.Unlock()
	}()
	if err := t.send(m); err != nil {
		return zero, err
	}
	select {
	case v := <-ch:
		return v, nil
	case <-t.gone:
		select {
		case v := <-ch: // the reply came just before the half-close
			return v, nil
		default:
			return zero, errClientGone
		}
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// runOnClient asks the client to run a call: the second ToolCallRequested
// of the call, with run_on_client, sent once hooks and approval let it
// run. After the client's half-close the call is an error result.
func (t *turn) runOnClient(ctx context.Context, call agent.ToolCall) (agent.Result, error) {
	step, _ := agent.CallStep(ctx)
	out, err := wait(ctx, t, &t.outputs, call.ID, nil, &exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_ToolCallRequested{
		ToolCallRequested: &exprdv1.ToolCallRequested{Step: uint32(step), Call: callProto(call), RunOnClient: true}}})
	if errors.Is(err, errClientGone) {
		return agent.Result{}, fmt.Errorf("tool %q runs on the client, which closed its side of the stream: the call was not run", call.Name)
	}
	if err != nil {
		return agent.Result{}, err
	}
	return agent.Result{Content: clientOutput(out.GetOutputJson(), out.GetIsError()), IsError: out.GetIsError()}, nil
}

// clientOutput is what the model sees of a client-run tool's output: the
// JSON as sent, text that is not JSON as a JSON string, and nothing as {}
// (with is_error, {"error":"the tool failed"}).
func clientOutput(out string, isError bool) json.RawMessage {
	switch {
	case out == "" && isError:
		return json.RawMessage(`{"error":"the tool failed"}`)
	case out == "":
		return json.RawMessage(`{}`)
	case json.Valid([]byte(out)):
		return json.RawMessage(out)
	}
	content, _ := json.Marshal(out)
	return content
}

// approve asks the client to approve a call. After the client's
// half-close the call is denied, with that as the reason.
func (t *turn) approve(ctx context.Context, step int, call agent.ToolCall) (bool, string, error) {
	r, err := wait(ctx, t, &t.approvals, call.ID, nil, &exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_ApprovalRequest{
		ApprovalRequest: &exprdv1.AgentApprovalRequest{Step: uint32(step), Call: callProto(call)}}})
	if errors.Is(err, errClientGone) {
		return false, "the client closed its side of the stream before approving the call", nil
	}
	if err != nil {
		return false, "", err
	}
	return r.GetApproved(), r.GetReason(), nil
}

// hook asks the client a hook; after its half-close, errClientGone.
func (t *turn) hook(ctx context.Context, req *exprdv1.HookRequest) (*exprdv1.HookReply, error) {
	t.mu.Lock()
	t.seq++
	req.HookId = strconv.Itoa(t.seq)
	t.mu.Unlock()
	check := func(r *exprdv1.HookReply) error {
		if r.GetCallId() != req.GetCallId() {
			return badRequest("hook_reply.call_id", fmt.Sprintf("hook %s asked about call %q, the reply names %q", req.HookId, req.GetCallId(), r.GetCallId()))
		}
		return nil
	}
	return wait(ctx, t, &t.hooks, req.HookId, check, &exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_HookRequest{HookRequest: req}})
}

func (t *turn) prepareStep(ctx context.Context, p agent.PrepareStep) (agent.PrepareStep, error) {
	r, err := t.hook(ctx, &exprdv1.HookRequest{Hook: exprdv1.Hook_HOOK_PREPARE_STEP, Step: uint32(p.Step)})
	if errors.Is(err, errClientGone) {
		return p, nil // nobody to ask: the step as it is
	}
	if err != nil {
		return p, err
	}
	if r.GetActiveTools() != nil {
		p.ActiveTools = r.GetActiveTools()
	}
	if r.GetToolChoice() != nil {
		if p.ToolChoice, err = toolChoice(r.GetToolChoice(), "hook_reply.tool_choice"); err != nil {
			return p, err
		}
	}
	if r.GetModel() != "" {
		p.Model = r.GetModel()
	}
	if len(r.GetMessages()) > 0 {
		p.Messages = p.Messages[:0:0]
		for i, m := range r.GetMessages() {
			msg, err := messageFromProto(m, fmt.Sprintf("hook_reply.messages[%d]", i))
			if err != nil {
				return p, err
			}
			p.Messages = append(p.Messages, msg)
		}
	}
	return p, nil
}

func (t *turn) preToolCall(ctx context.Context, step int, call agent.ToolCall) (agent.PreToolCall, error) {
	r, err := t.hook(ctx, &exprdv1.HookRequest{Hook: exprdv1.Hook_HOOK_PRE_TOOL_CALL, Step: uint32(step), CallId: call.ID, Call: callProto(call)})
	if errors.Is(err, errClientGone) {
		// The client asked to see every call before it runs: a call it
		// can no longer see does not run, as an approval not given.
		res := agent.ErrorResult("the call was not run: the client closed its side of the stream before its pre_tool_call hook could be asked")
		return agent.PreToolCall{Call: call, Result: &res}, nil
	}
	if err != nil {
		return agent.PreToolCall{Call: call}, err
	}
	out := agent.PreToolCall{Call: call}
	if len(r.GetReplacementArgumentsJson()) > 0 {
		out.Call.Arguments = json.RawMessage(r.GetReplacementArgumentsJson())
	}
	if len(r.GetResultJson()) > 0 {
		out.Result = &agent.Result{Content: json.RawMessage(r.GetResultJson()), IsError: r.GetResultIsError()}
	}
	return out, nil
}

func (t *turn) postToolCall(ctx context.Context, step int, call agent.ToolCall, res agent.Result) (agent.Result, error) {
	r, err := t.hook(ctx, &exprdv1.HookRequest{Hook: exprdv1.Hook_HOOK_POST_TOOL_CALL, Step: uint32(step), CallId: call.ID, Call: callProto(call),
		ResultJson: jsonText(res.Content), ResultIsError: res.IsError})
	if errors.Is(err, errClientGone) {
		return res, nil // nobody to ask: the result as it is
	}
	if err != nil {
		return res, err
	}
	if len(r.GetResultJson()) > 0 {
		return agent.Result{Content: json.RawMessage(r.GetResultJson()), IsError: r.GetResultIsError()}, nil
	}
	return res, nil
}

func (t *turn) events() agent.Events {
	send := func(m *exprdv1.AgentLoopRunResponse) { _ = t.send(m) }
	return agent.Events{
		StepStarted: func(step int) {
			send(&exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_StepStarted{StepStarted: &exprdv1.StepStarted{Step: uint32(step)}}})
		},
		TextDelta: func(step int, text string) {
			send(&exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_TextDelta{TextDelta: &exprdv1.TextDelta{Step: uint32(step), Text: text}}})
		},
		ToolCallRequested: func(step int, call agent.ToolCall) {
			send(&exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_ToolCallRequested{ToolCallRequested: &exprdv1.ToolCallRequested{Step: uint32(step), Call: callProto(call)}}})
		},
		ToolResult: func(step int, call agent.ToolCall, r agent.Result) {
			send(&exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_ToolResult{ToolResult: &exprdv1.ToolResult{
				Step: uint32(step), CallId: call.ID, Name: call.Name, OutputJson: jsonText(r.Content), IsError: r.IsError}}})
		},
		StepFinished: func(s agent.Step) {
			send(&exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_StepFinished{StepFinished: stepProto(s)}})
		},
	}
}

// agentExprHost streams the expr tool's writes; nobody can confirm or run
// a client function inside an agent turn, so confirms are declined.
type agentExprHost struct{ t *turn }

func (h *agentExprHost) Write(ctx context.Context, w evaluator.Write) error {
	step, _ := agent.CallStep(ctx)
	return h.t.send(&exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_StateWrite{StateWrite: &exprdv1.AgentStateWrite{
		Step: uint32(step), CallId: agent.CallID(ctx), ExprStep: uint32(w.Step), Path: w.Path, ValueJson: jsonText(w.ValueJSON)}}})
}

func (h *agentExprHost) Confirm(context.Context, int, string) (bool, error) { return false, nil }

func (h *agentExprHost) CallClient(context.Context, string, map[string]any) (any, error) {
	return nil, errors.New("no client function can run inside an agent turn")
}

// toolChoice reads a ToolChoice (nil is auto); a tool name goes with
// MODE_TOOL and only with it.
func toolChoice(c *exprdv1.ToolChoice, field string) (model.ToolChoice, error) {
	mode, tool := c.GetMode(), c.GetTool()
	if (mode == exprdv1.ToolChoice_MODE_TOOL) != (tool != "") {
		return model.ToolChoice{}, badRequest(field+".tool", "a tool name is given with MODE_TOOL, and only with it")
	}
	switch mode {
	case exprdv1.ToolChoice_MODE_UNSPECIFIED, exprdv1.ToolChoice_MODE_AUTO:
		return model.ToolChoice{Mode: model.ToolChoiceAuto}, nil
	case exprdv1.ToolChoice_MODE_NONE:
		return model.ToolChoice{Mode: model.ToolChoiceNone}, nil
	case exprdv1.ToolChoice_MODE_REQUIRED:
		return model.ToolChoice{Mode: model.ToolChoiceRequired}, nil
	case exprdv1.ToolChoice_MODE_TOOL:
		return model.ChooseTool(tool), nil
	}
	return model.ToolChoice{}, badRequest(field+".mode", fmt.Sprintf("unknown mode %v", mode))
}

func stopFromProto(c *exprdv1.StopCondition) (agent.StopCondition, error) {
	list := func(cs *exprdv1.StopConditions) ([]agent.StopCondition, error) {
		var out []agent.StopCondition
		for _, sub := range cs.GetConditions() {
			s, err := stopFromProto(sub)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		if len(out) == 0 {
			return nil, errors.New("and/or need at least one condition")
		}
		return out, nil
	}
	switch x := c.GetCond().(type) {
	case *exprdv1.StopCondition_MaxSteps:
		if x.MaxSteps == 0 {
			return nil, errors.New("max_steps must be at least 1")
		}
		return agent.MaxSteps(int(x.MaxSteps)), nil
	case *exprdv1.StopCondition_HasToolCall:
		if x.HasToolCall == "" {
			return agent.HasToolCall(), nil
		}
		return agent.HasToolCall(x.HasToolCall), nil
	case *exprdv1.StopCondition_And:
		cs, err := list(x.And)
		return agent.And(cs...), err
	case *exprdv1.StopCondition_Or:
		cs, err := list(x.Or)
		return agent.Or(cs...), err
	case *exprdv1.StopCondition_Not:
		s, err := stopFromProto(x.Not)
		if err != nil {
			return nil, err
		}
		return agent.Not(s), nil
	}
	return nil, errors.New("the condition is empty")
}

// stopReasons are the reasons a turn that reaches Done ends for.
var stopReasons = map[agent.StopReason]exprdv1.AgentDone_StopReason{
	agent.StopCompleted:    exprdv1.AgentDone_STOP_REASON_COMPLETED,
	agent.StopConditionMet: exprdv1.AgentDone_STOP_REASON_STOP_CONDITION,
}

var roles = map[exprdv1.AgentMessage_Role]model.Role{
	exprdv1.AgentMessage_ROLE_SYSTEM:    model.RoleSystem,
	exprdv1.AgentMessage_ROLE_USER:      model.RoleUser,
	exprdv1.AgentMessage_ROLE_ASSISTANT: model.RoleAssistant,
	exprdv1.AgentMessage_ROLE_TOOL:      model.RoleTool,
}

// messageFromProto reads a message of the conversation; field names it in
// an error.
func messageFromProto(m *exprdv1.AgentMessage, field string) (model.Message, error) {
	role, ok := roles[m.GetRole()]
	if !ok {
		return model.Message{}, badRequest(field+".role", fmt.Sprintf("role %v: ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT or ROLE_TOOL", m.GetRole()))
	}
	msg := model.Message{Role: role, Content: m.GetContent(), ToolCallID: m.GetToolCallId()}
	for _, c := range m.GetToolCalls() {
		msg.ToolCalls = append(msg.ToolCalls, model.ToolCall{ID: c.GetId(), Name: c.GetName(), Arguments: c.GetArgumentsJson()})
	}
	return msg, nil
}

func callProto(c agent.ToolCall) *exprdv1.AgentToolCall {
	return &exprdv1.AgentToolCall{Id: c.ID, Name: c.Name, ArgumentsJson: jsonText(c.Arguments)}
}

func usageProto(u model.Usage) *exprdv1.Usage {
	return &exprdv1.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
}

func stepProto(s agent.Step) *exprdv1.StepFinished {
	return &exprdv1.StepFinished{Step: uint32(s.Index), FinishReason: string(s.FinishReason), Usage: usageProto(s.Usage), Text: s.Text}
}
