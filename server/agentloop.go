package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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

// errHookCallID fails a turn whose hook reply names another call.
var errHookCallID = errors.New("a hook reply names another call than the one asked about")

// codemodeParameters is the built-in codemode tool's input.
var codemodeParameters = json.RawMessage(`{"type":"object","required":["code"],"additionalProperties":false,"properties":{"code":{"type":"string","description":"Expr source over codemode.CallTool, codemode.CallToolStream and codemode.Get; the last expression is the result."}}}`)

// turn is one Run stream: what it waits for from the client.
type turn struct {
	stream agentStream
	state  *evaluator.State
	sendMu sync.Mutex

	mu        sync.Mutex
	outputs   map[string]chan *exprdv1.ToolOutput
	hooks     map[string]chan *exprdv1.HookReply
	approvals map[string]chan *exprdv1.AgentApprovalReply
	seq       int
}

func (t *turn) send(m *exprdv1.AgentLoopRunResponse) error {
	t.sendMu.Lock()
	defer t.sendMu.Unlock()
	return t.stream.Send(m)
}

// Run runs one agent turn.
func (a *agentLoop) Run(stream agentStream) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	start := first.GetStart()
	if start == nil {
		return badRequest("start", "the stream's first message must be Start")
	}
	if a.s.opts.models == nil {
		return status.Error(codes.FailedPrecondition, "this server has no model providers")
	}
	provider, err := a.s.opts.models.Get(start.GetProvider())
	if err != nil {
		return badRequest("start.provider", err.Error())
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	t := &turn{stream: stream, state: a.s.opts.initialState.Fork(a.s.opts.maxStateBytes),
		outputs: map[string]chan *exprdv1.ToolOutput{}, hooks: map[string]chan *exprdv1.HookReply{},
		approvals: map[string]chan *exprdv1.AgentApprovalReply{}}
	if js := start.GetStateJson(); len(js) > 0 {
		if err := t.state.Replace(js); err != nil {
			return badRequest("start.state_json", err.Error())
		}
	}
	cfg, err := a.config(ctx, start, provider, t)
	if err != nil {
		return err
	}
	protocol := make(chan error, 1)
	aborted := make(chan struct{})
	go func() { protocol <- t.receive(cancel, aborted) }()

	out, err := agent.Run(ctx, cfg)
	if err != nil {
		select {
		case perr := <-protocol:
			if perr != nil {
				return perr
			}
		default:
		}
		select {
		case <-aborted:
			return status.Error(codes.Canceled, "the client aborted the turn")
		default:
		}
		return agentStatus(ctx, err)
	}
	done := &exprdv1.AgentDone{Text: out.Text, Usage: usageProto(out.Usage), StopReason: string(out.StopReason)}
	for _, s := range out.Steps {
		done.Steps = append(done.Steps, stepProto(s))
	}
	return t.send(&exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_Done{Done: done}})
}

// agentStatus maps a turn's failure to its gRPC status.
func agentStatus(ctx context.Context, err error) error {
	var me *model.HTTPError
	switch {
	case errors.Is(err, errHookCallID), errors.Is(err, agent.ErrCallIDMismatch):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, agent.ErrInvalidConfig):
		return badRequest("start", err.Error())
	case ctx.Err() != nil:
		return status.FromContextError(ctx.Err()).Err()
	case errors.Is(err, agent.ErrTurnTimeout), errors.Is(err, agent.ErrStepTimeout):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.As(err, &me):
		return status.Errorf(codes.Unavailable, "the model provider answered %d", me.StatusCode)
	case errors.Is(err, agent.ErrHook):
		return status.Error(codes.Aborted, err.Error())
	}
	return status.Error(codes.Unavailable, "the model turn failed: "+err.Error())
}

// config turns Start into the loop's configuration.
func (a *agentLoop) config(ctx context.Context, start *exprdv1.AgentStart, p model.Provider, t *turn) (agent.Config, error) {
	cfg := agent.Config{
		Provider: p, Model: start.GetModel(), System: start.GetSystem(),
		ToolChoice:  toolChoice(start.GetToolChoice()),
		Parallelism: int(start.GetParallelism()),
		ToolTimeout: time.Duration(start.GetToolTimeoutMs()) * time.Millisecond,
		StepTimeout: time.Duration(start.GetStepTimeoutMs()) * time.Millisecond,
		TurnTimeout: time.Duration(start.GetTurnTimeoutMs()) * time.Millisecond,
		Events:      t.events(),
		Approve:     t.approve,
	}
	for _, m := range start.GetMessages() {
		cfg.Messages = append(cfg.Messages, messageFromProto(m))
	}
	for i, tp := range start.GetTools() {
		tool, err := a.tool(ctx, tp, start, t)
		if err != nil {
			return cfg, badRequest(fmt.Sprintf("start.tools[%d]", i), err.Error())
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
		case "prepare_step":
			cfg.Hooks.PrepareStep = t.prepareStep
		case "pre_tool_call":
			cfg.Hooks.PreToolCall = t.preToolCall
		case "post_tool_call":
			cfg.Hooks.PostToolCall = t.postToolCall
		default:
			return cfg, badRequest("start.hooks", fmt.Sprintf("unknown hook %q: prepare_step, pre_tool_call or post_tool_call", h))
		}
	}
	return cfg, nil
}

// tool builds one declared tool with its executor.
func (a *agentLoop) tool(_ context.Context, tp *exprdv1.AgentTool, start *exprdv1.AgentStart, t *turn) (agent.Tool, error) {
	tool := agent.Tool{Name: tp.GetName(), Description: tp.GetDescription(), Parameters: tp.GetParametersJson(),
		NeedsApproval: tp.GetNeedsApproval(), Timeout: time.Duration(tp.GetTimeoutMs()) * time.Millisecond}
	switch tp.GetExecutor() {
	case exprdv1.AgentTool_EXECUTOR_UNSPECIFIED:
	case exprdv1.AgentTool_EXECUTOR_CLIENT:
		tool.Exec = agent.ExecutorFunc(t.runOnClient)
	case exprdv1.AgentTool_EXECUTOR_UTCP:
		if a.s.opts.registry == nil {
			return tool, errors.New("this server has no UTCP registry")
		}
		ut, err := a.s.opts.registry.Tool(tp.GetUtcpTool())
		if err != nil {
			return tool, err
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
			return tool, err
		}
		et, err := evaluator.NewTool(settings, a.s.opts.budgets, evaluator.ClientUnreachable())
		if err != nil {
			return tool, err
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
			return tool, errors.New("this server has no UTCP registry for codemode")
		}
		if len(tool.Parameters) == 0 {
			tool.Parameters = codemodeParameters
		}
		tool.Exec = agent.CodeModeExecutor(a.rt, tp.GetCodemodeTools())
	default:
		return tool, fmt.Errorf("unknown executor %v", tp.GetExecutor())
	}
	return tool, nil
}

// receive dispatches the client's messages until the stream ends. A reply
// nobody waits for fails the turn; Cancel aborts it.
func (t *turn) receive(cancel context.CancelFunc, aborted chan struct{}) error {
	for {
		m, err := t.stream.Recv()
		if err != nil {
			cancel()
			return nil
		}
		var bad error
		switch msg := m.GetMsg().(type) {
		case *exprdv1.AgentLoopRunRequest_ToolOutput:
			bad = deliver(t, t.outputs, msg.ToolOutput.GetCallId(), msg.ToolOutput, "tool output")
		case *exprdv1.AgentLoopRunRequest_HookReply:
			bad = deliver(t, t.hooks, msg.HookReply.GetHookId(), msg.HookReply, "hook reply")
		case *exprdv1.AgentLoopRunRequest_ApprovalReply:
			bad = deliver(t, t.approvals, msg.ApprovalReply.GetCallId(), msg.ApprovalReply, "approval reply")
		case *exprdv1.AgentLoopRunRequest_State:
			if err := t.state.Replace(msg.State.GetStateJson()); err != nil {
				bad = badRequest("state", err.Error())
			}
		case *exprdv1.AgentLoopRunRequest_StatePatch:
			if err := t.state.MergePatch(msg.StatePatch.GetPatchJson()); err != nil {
				bad = badRequest("state_patch", err.Error())
			}
		case *exprdv1.AgentLoopRunRequest_Cancel:
			close(aborted)
			cancel()
			return nil
		default:
			bad = badRequest("msg", "after Start: tool outputs, hook and approval replies, state, or cancel")
		}
		if bad != nil {
			cancel()
			return bad
		}
	}
}

func deliver[T any](t *turn, waiting map[string]chan T, id string, v T, what string) error {
	t.mu.Lock()
	ch := waiting[id]
	delete(waiting, id)
	t.mu.Unlock()
	if ch == nil {
		return badRequest(what, fmt.Sprintf("nothing is waiting for %q", id))
	}
	ch <- v
	return nil
}

// wait registers id, sends m, and waits for the reply or ctx.
func wait[T any](ctx context.Context, t *turn, waiting map[string]chan T, id string, m *exprdv1.AgentLoopRunResponse) (T, error) {
	var zero T
	ch := make(chan T, 1)
	t.mu.Lock()
	waiting[id] = ch
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(waiting, id)
		t.mu.Unlock()
	}()
	if err := t.send(m); err != nil {
		return zero, err
	}
	select {
	case v := <-ch:
		return v, nil
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

func (t *turn) runOnClient(ctx context.Context, call agent.ToolCall) (agent.Result, error) {
	out, err := wait(ctx, t, t.outputs, call.ID, &exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_ToolCallRequested{
		ToolCallRequested: &exprdv1.ToolCallRequested{Call: callProto(call), RunOnClient: true}}})
	if err != nil {
		return agent.Result{}, err
	}
	content := json.RawMessage(out.GetOutputJson())
	if !json.Valid(content) {
		content, _ = json.Marshal(string(out.GetOutputJson()))
	}
	return agent.Result{Content: content, IsError: out.GetIsError()}, nil
}

func (t *turn) approve(ctx context.Context, step int, call agent.ToolCall) (bool, string, error) {
	r, err := wait(ctx, t, t.approvals, call.ID, &exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_ApprovalRequest{
		ApprovalRequest: &exprdv1.AgentApprovalRequest{Step: uint32(step), Call: callProto(call)}}})
	if err != nil {
		return false, "", err
	}
	return r.GetApproved(), r.GetReason(), nil
}

func (t *turn) hook(ctx context.Context, req *exprdv1.HookRequest) (*exprdv1.HookReply, error) {
	t.mu.Lock()
	t.seq++
	req.HookId = strconv.Itoa(t.seq)
	t.mu.Unlock()
	r, err := wait(ctx, t, t.hooks, req.HookId, &exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_HookRequest{HookRequest: req}})
	if err != nil {
		return nil, err
	}
	if r.GetCallId() != req.GetCallId() {
		return nil, fmt.Errorf("%w: asked about %q, the reply names %q", errHookCallID, req.GetCallId(), r.GetCallId())
	}
	return r, nil
}

func (t *turn) prepareStep(ctx context.Context, p agent.PrepareStep) (agent.PrepareStep, error) {
	r, err := t.hook(ctx, &exprdv1.HookRequest{Hook: "prepare_step", Step: uint32(p.Step)})
	if err != nil {
		return p, err
	}
	if r.GetActiveTools() != nil {
		p.ActiveTools = r.GetActiveTools()
	}
	if r.GetToolChoice() != "" {
		p.ToolChoice = toolChoice(r.GetToolChoice())
	}
	if r.GetModel() != "" {
		p.Model = r.GetModel()
	}
	if len(r.GetMessages()) > 0 {
		p.Messages = p.Messages[:0:0]
		for _, m := range r.GetMessages() {
			p.Messages = append(p.Messages, messageFromProto(m))
		}
	}
	return p, nil
}

func (t *turn) preToolCall(ctx context.Context, step int, call agent.ToolCall) (agent.PreToolCall, error) {
	r, err := t.hook(ctx, &exprdv1.HookRequest{Hook: "pre_tool_call", Step: uint32(step), CallId: call.ID, Call: callProto(call)})
	if err != nil {
		return agent.PreToolCall{Call: call}, err
	}
	out := agent.PreToolCall{Call: call}
	if len(r.GetReplacementArgumentsJson()) > 0 {
		out.Call.Arguments = r.GetReplacementArgumentsJson()
	}
	if len(r.GetResultJson()) > 0 {
		out.Result = &agent.Result{Content: r.GetResultJson(), IsError: r.GetResultIsError()}
	}
	return out, nil
}

func (t *turn) postToolCall(ctx context.Context, step int, call agent.ToolCall, res agent.Result) (agent.Result, error) {
	r, err := t.hook(ctx, &exprdv1.HookRequest{Hook: "post_tool_call", Step: uint32(step), CallId: call.ID, Call: callProto(call),
		ResultJson: res.Content, ResultIsError: res.IsError})
	if err != nil {
		return res, err
	}
	if len(r.GetResultJson()) > 0 {
		return agent.Result{Content: r.GetResultJson(), IsError: r.GetResultIsError()}, nil
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
				Step: uint32(step), CallId: call.ID, Name: call.Name, OutputJson: r.Content, IsError: r.IsError}}})
		},
		StepFinished: func(s agent.Step) {
			send(&exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_StepFinished{StepFinished: stepProto(s)}})
		},
	}
}

// agentExprHost streams the expr tool's writes; nobody can confirm or run
// a client function inside an agent turn, so confirms are declined.
type agentExprHost struct{ t *turn }

func (h *agentExprHost) Write(_ context.Context, w evaluator.Write) error {
	return h.t.send(&exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_StateWrite{StateWrite: &exprdv1.StepWrite{
		Step: uint32(w.Step), Path: w.Path, ValueJson: w.ValueJSON}}})
}

func (h *agentExprHost) Confirm(context.Context, int, string) (bool, error) { return false, nil }

func (h *agentExprHost) CallClient(context.Context, string, map[string]any) (any, error) {
	return nil, errors.New("no client function can run inside an agent turn")
}

func toolChoice(s string) model.ToolChoice {
	switch s {
	case "", "auto":
		return model.ToolChoice{Mode: model.ToolChoiceAuto}
	case "none":
		return model.ToolChoice{Mode: model.ToolChoiceNone}
	case "required":
		return model.ToolChoice{Mode: model.ToolChoiceRequired}
	}
	return model.ChooseTool(s)
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

func messageFromProto(m *exprdv1.AgentMessage) model.Message {
	msg := model.Message{Role: model.Role(m.GetRole()), Content: m.GetContent(), ToolCallID: m.GetToolCallId()}
	for _, c := range m.GetToolCalls() {
		msg.ToolCalls = append(msg.ToolCalls, model.ToolCall{ID: c.GetId(), Name: c.GetName(), Arguments: string(c.GetArgumentsJson())})
	}
	return msg
}

func callProto(c agent.ToolCall) *exprdv1.AgentToolCall {
	return &exprdv1.AgentToolCall{Id: c.ID, Name: c.Name, ArgumentsJson: c.Arguments}
}

func usageProto(u model.Usage) *exprdv1.Usage {
	return &exprdv1.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
}

func stepProto(s agent.Step) *exprdv1.StepFinished {
	return &exprdv1.StepFinished{Step: uint32(s.Index), FinishReason: string(s.FinishReason), Usage: usageProto(s.Usage), Text: s.Text}
}
