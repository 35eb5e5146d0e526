package server

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"google.golang.org/grpc"

	"github.com/exprd/exprd/agent"
	"github.com/exprd/exprd/codemode"
	"github.com/exprd/exprd/evaluator"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/server/internal/rpcstatus"
	"github.com/exprd/exprd/server/internal/stream"
	"github.com/exprd/exprd/turnstore"
	"github.com/exprd/exprd/utcp/toolscope"
	"github.com/exprd/exprd/utcp/userinput"
)

// agentLoop serves exprd.v1.AgentLoop: one agent turn per stream. The
// handler is here; the turn's protocol with the client (what it asks and
// how replies are matched) is in agentloop_turn.go, the wire conversions
// in agentloop_convert.go, its errors in agentloop_errors.go.
type agentLoop struct {
	exprdv1.UnimplementedAgentLoopServer
	s     *Server
	rt    *codemode.Runtime // nil without a UTCP registry
	turns liveTurns         // the turns running here
	// stopped ends with the server's Stop: detached turns end with it.
	stopped context.Context
	// holder names this replica to the turns' leases (takeover);
	// handingOver ends as the server begins to stop: its durable detached
	// turns are handed over to other replicas.
	holder      string
	handingOver context.Context
}

type agentStream = grpc.BidiStreamingServer[exprdv1.AgentLoopRunRequest, exprdv1.AgentLoopRunResponse]

// codemodeParameters is the built-in codemode tool's input.
var codemodeParameters = json.RawMessage(`{"type":"object","required":["code"],"additionalProperties":false,"properties":{"code":{"type":"string","description":"Expr source over codemode.CallTool, codemode.CallToolStream and codemode.Get; the last expression is the result."}}}`)

// Run runs one agent turn. The client's half-close only means no more
// messages: the turn goes on to its end, and what would wait for the
// client is answered at once (see the half-close cases of the hooks,
// approve and runOnClient). agent.Run returns only once every tool call
// it started has returned, so nothing of the turn runs after Run.
func (a *agentLoop) Run(rpc agentStream) (err error) {
	first, err := stream.First(rpc, errFirstNotStart)
	if err != nil {
		return err
	}
	if r := first.GetResume(); r != nil {
		return a.resume(rpc, r)
	}
	start := first.GetStart()
	if start == nil {
		return errFirstNotStart
	}
	provider, err := modelProvider(a.s.opts.models, start.GetProvider(), "start.provider")
	if err != nil {
		return err
	}
	// A detached turn's context does not end with its stream's: with the
	// detached timeout, or the server's Stop. The client going away (not
	// a protocol error) leaves it running: the outbox's and the
	// receiver's ends do not cancel it.
	streamCtx := rpc.Context()
	parent, ends := streamCtx, stream.EndsWork
	if detached(start) {
		parent, ends = context.WithoutCancel(streamCtx), stream.EndsWorkUnlessGone
		// A deadline the client set on the stream is the turn's: it
		// bounds the whole call, not the stream's connection.
		if dl, ok := streamCtx.Deadline(); ok {
			var cancelDeadline context.CancelFunc
			parent, cancelDeadline = context.WithDeadline(parent, dl)
			defer cancelDeadline()
		}
	}
	// What the turn sends is queued and sent by one goroutine: a client
	// that stops reading ends the turn after the slow-reader timeout.
	st := stream.Open(a.s.streamConfig(), rpc, parent, ends)
	defer st.Close()
	ctx, cancel := st.Ctx, st.Cancel
	t := newTurn(ctx, a.s.opts.initialState.Fork(a.s.opts.maxStateBytes))
	t.cancel, t.detach, t.detachedTimeout, t.attached, t.out = cancel, detached(start), a.s.opts.detachedTimeout, 1, st.Out
	if t.detach {
		defer context.AfterFunc(a.stopped, func() { cancel(errServerStopping) })()
		defer context.AfterFunc(streamCtx, t.release)()
		defer t.stopDetachTimer()
	}
	t.input = newInputAsker(a.s.opts.inputTimeout, t.askInput)
	if start.GetRelayInputRequests() {
		ctx = userinput.WithAsker(ctx, t.input)
	}
	t.state.UseMemory(st.Memory("the turn's state"))
	if js := start.GetStateJson(); len(js) > 0 {
		if err := t.state.ReplaceContext(ctx, []byte(js)); err != nil {
			return stateStatus("start.state_json", err)
		}
	}
	cfg, err := a.config(ctx, start, provider, t)
	if err != nil {
		return err
	}
	history, reserve := historyReservation(a.s.opts.memory)
	defer history.Close() // agent.Run has returned: nothing grows it after
	cfg.ReserveHistory = reserve
	t.owner = turnOwner(streamCtx)
	if !a.turns.admit(t.owner, a.s.opts.maxTurnsPerCaller) {
		return rpcstatus.Exhausted(rpcstatus.QuotaTurnsPerCaller, fmt.Sprintf("this caller has %d turns running on this replica, its limit (--turn-max-per-caller): cancel or finish one first", a.s.opts.maxTurnsPerCaller))
	}
	defer a.turns.leave(t.owner)
	t.useStore(a)
	create := func(ctx context.Context) error { return a.s.opts.turnStore.Create(ctx, t.id, t.owner) }
	if err := t.do(ctx, storeWrite{op: "create", do: create}); err != nil { // not kept: a turn does not start without its store
		return turnStoreStatus(err)
	}
	// Where turns can be taken over, the turn holds a lease and keeps a
	// journal to be taken over from (agentloop_takeover.go).
	d, err := a.hold(ctx, t, start)
	if err != nil {
		t.endRecord(err)
		return err
	}
	if d != nil {
		cfg.Events = d.events(cfg.Events)
		defer d.release()
		if t.detach {
			defer a.handOverOnStop(d, cancel)()
		}
	}
	// A stop recorded by Cancel, on this replica or another, ends the
	// turn as a cancel on its stream does.
	stopAsked := t.log.WatchCancel(ctx, t.id)
	go func() {
		select {
		case <-stopAsked:
			cancel(errAborted)
		case <-ctx.Done():
		}
	}()
	a.turns.add(t)
	defer func() {
		if d.ends() { // a turn another replica took, or this one handed over, is not ended here
			t.endRecord(err)
		}
		a.turns.remove(t.id)
	}()
	// Streams resumed on other replicas reach the turn's requests here.
	if relay, ok := t.log.(turnstore.Relay); ok {
		stop, err := relay.ServeTurn(t.id, t.serveRelay(relay.MaxRelayBytes()))
		if err != nil {
			return turnStoreStatus(err)
		}
		defer stop()
	}
	st.Receive(func(m *exprdv1.AgentLoopRunRequest) bool { return t.handle(m, cancel) }, t.halfClosed)

	out, err := agent.Run(ctx, cfg)
	if perr := stream.BrokenProtocol(ctx); perr != nil {
		return perr // the client broke the protocol: its status, not the turn's
	}
	if err != nil {
		return a.status(ctx, err)
	}
	done := &exprdv1.AgentDone{Text: out.Text, Usage: usageProto(out.Usage), StopReason: stopReasons[out.StopReason]}
	for _, s := range out.Steps {
		done.Steps = append(done.Steps, stepProto(s))
	}
	if err := t.send(&exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_Done{Done: done}}); err != nil {
		if perr := stream.BrokenProtocol(ctx); perr != nil {
			return perr // done could not be recorded
		}
		return stream.SendStatus(err)
	}
	return nil
}

// config turns Start into the loop's configuration.
func (a *agentLoop) config(ctx context.Context, start *exprdv1.AgentStart, p model.Provider, t *turn) (agent.Config, error) {
	choice, err := toolChoice(start.GetToolChoice(), "start.tool_choice")
	if err != nil {
		return agent.Config{}, err
	}
	if t.omit, err = omittedEvents(start.GetOmitEvents()); err != nil {
		return agent.Config{}, err
	}
	lim := a.s.opts.runLimits.agentLimits()
	cfg := agent.Config{
		Provider: p, Model: start.GetModel(), System: start.GetSystem(),
		ToolChoice:      choice,
		Parallelism:     int(start.GetParallelism()),
		StepLimit:       lim.MaxSteps,
		MaxCallsPerStep: lim.MaxCallsPerStep,
		MaxHistoryBytes: lim.MaxHistoryBytes,
		Events:          t.events(),
		Approve:         t.approve,
	}
	if n := start.GetMaxHistoryBytes(); n > 0 {
		if n > uint64(lim.MaxHistoryBytes) {
			return cfg, rpcstatus.BadRequest("start.max_history_bytes", fmt.Sprintf("%d bytes is above the server's maximum of %d (--agent-max-history-bytes)", n, lim.MaxHistoryBytes))
		}
		cfg.MaxHistoryBytes = int64(n)
	}
	for _, d := range []struct {
		field    string
		ms       uint32
		def, max time.Duration
		set      *time.Duration
	}{
		{"start.tool_timeout_ms", start.GetToolTimeoutMs(), agent.DefaultToolTimeout, lim.MaxToolTimeout, &cfg.ToolTimeout},
		{"start.step_timeout_ms", start.GetStepTimeoutMs(), agent.DefaultStepTimeout, lim.MaxStepTimeout, &cfg.StepTimeout},
		{"start.turn_timeout_ms", start.GetTurnTimeoutMs(), agent.DefaultTurnTimeout, lim.MaxTurnTimeout, &cfg.TurnTimeout},
	} {
		if *d.set, err = limitedTimeout(d.field, d.ms, d.def, d.max); err != nil {
			return cfg, err
		}
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
			return cfg, rpcstatus.BadRequest("start.stop", err.Error())
		}
		if err := checkStopSteps(start.GetStop(), "start.stop", lim.MaxSteps); err != nil {
			return cfg, err
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
			return cfg, rpcstatus.BadRequest("start.hooks", fmt.Sprintf("unknown hook %v: HOOK_PREPARE_STEP, HOOK_PRE_TOOL_CALL or HOOK_POST_TOOL_CALL", h))
		}
	}
	return cfg, nil
}

// tool builds the i-th declared tool with its executor; its error is the
// stream's status. A UTCP tool the caller does not see (its tools:
// scopes) is refused as an unknown one is; a codemode tool may call only
// those it sees, and an expr tool's host functions resolve only those.
func (a *agentLoop) tool(ctx context.Context, i int, tp *exprdv1.AgentTool, start *exprdv1.AgentStart, t *turn) (agent.Tool, error) {
	field := fmt.Sprintf("start.tools[%d]", i)
	view := toolscope.FromContext(ctx)
	tool := agent.Tool{Name: tp.GetName(), Description: tp.GetDescription(), Parameters: json.RawMessage(tp.GetParametersJson()),
		NeedsApproval: tp.GetNeedsApproval(), Idempotent: tp.GetIdempotent()}
	if ms := tp.GetTimeoutMs(); ms > 0 { // 0: the turn's tool_timeout_ms
		var err error
		if tool.Timeout, err = limitedTimeout(field+".timeout_ms", ms, 0, a.s.opts.runLimits.agentLimits().MaxToolTimeout); err != nil {
			return tool, err
		}
	}
	switch tp.GetExecutor() {
	case exprdv1.AgentTool_EXECUTOR_UNSPECIFIED:
	case exprdv1.AgentTool_EXECUTOR_CLIENT:
		tool.Exec = agent.ExecutorFunc(t.runOnClient)
	case exprdv1.AgentTool_EXECUTOR_UTCP:
		if a.s.opts.registry == nil {
			return tool, noRegistry(field, "this server has no UTCP registry")
		}
		ut, err := view.Tool(a.s.opts.registry, tp.GetUtcpTool())
		if err != nil {
			return tool, rpcstatus.BadRequest(field+".utcp_tool", clientText(err))
		}
		if len(tool.Parameters) == 0 {
			tool.Parameters = ut.Inputs
		}
		if tool.Description == "" {
			tool.Description = ut.Description
		}
		tool.Exec = agent.UTCPExecutor(a.s.opts.registry, tp.GetUtcpTool())
		if an := ut.Annotations; an != nil && (isTrue(an.IdempotentHint) || isTrue(an.ReadOnlyHint)) {
			tool.Idempotent = true // the provider says a call may be made again
		}
	case exprdv1.AgentTool_EXECUTOR_EXPR:
		settings, err := a.s.settings(view, start.GetExprSettings())
		if err != nil {
			// Its BadRequest names settings.*; in a turn they are Start's.
			return tool, refield(err, "settings", "start.expr_settings")
		}
		et, err := evaluator.NewTool(settings, a.s.opts.budgets, a.s.opts.toolOptions(evaluator.ClientUnreachable())...)
		if err != nil {
			return tool, rpcstatus.BadRequest("start.expr_settings", err.Error())
		}
		d := et.Describe()
		if len(tool.Parameters) == 0 {
			tool.Parameters = d.InputSchema
		}
		if tool.Description == "" {
			tool.Description = d.Description
		}
		tool.Exec = agent.ExprExecutor(a.s.eval, et, t.state, &agentExprHost{t: t})
		// Run again after a takeover, it reads the state as the step began
		// (the journal's), and writes what it wrote.
		tool.Idempotent = true
	case exprdv1.AgentTool_EXECUTOR_CODEMODE:
		if a.rt == nil {
			return tool, noRegistry(field, "this server has no UTCP registry for codemode")
		}
		if len(tool.Parameters) == 0 {
			tool.Parameters = codemodeParameters
		}
		tool.Exec = agent.CodeModeExecutor(a.rt, view.Filter(tp.GetCodemodeTools()), view.Func())
	default:
		return tool, rpcstatus.BadRequest(field+".executor", fmt.Sprintf("unknown executor %v", tp.GetExecutor()))
	}
	return tool, nil
}

func isTrue(b *bool) bool { return b != nil && *b }
