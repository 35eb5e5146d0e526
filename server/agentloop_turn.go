package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/exprd/exprd/server/internal/stream"

	"google.golang.org/protobuf/proto"

	"github.com/exprd/exprd/agent"
	"github.com/exprd/exprd/evaluator"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/server/internal/rpcstatus"
	"github.com/exprd/exprd/turnstore"
	"github.com/exprd/exprd/utcp/userinput"
)

// turn is one Run stream's protocol with the client: what the turn sends,
// and the requests that wait for the client's replies, each kind matched
// by its correlator (tool outputs and approvals by the model's call id,
// which the requests carry; hooks by a hook id the server makes).
type turn struct {
	ctx    context.Context
	id     string // the turn id: 128 random bits, as hex
	owner  string // who may resume it (turnOwner)
	sendMu sync.Mutex
	seq    uint64 // the last event's seq
	// pending are the requests sent that wait for the client's reply, by
	// seq: a resumed stream sends them again. Each is in a correlator
	// too, so there are as many as requests waiting.
	pendMu  sync.Mutex
	pending map[uint64]*exprdv1.AgentLoopRunResponse
	log     turnstore.Store         // where the events are recorded; nil: nowhere
	unrec   *unrecorded             // what the store could not take yet (useStore)
	over    bool                    // its done is sent: nothing follows (sendMu)
	m       *metrics                // the turn store's latency is told here (nil: nowhere)
	cancel  context.CancelCauseFunc // ends the turn

	// detach: the turn outlives its client, for detachedTimeout without
	// any attached (its first stream, and the resumed ones here).
	detach          bool
	detachedTimeout time.Duration
	attachMu        sync.Mutex
	attached        int
	detachTimer     *time.Timer
	out             *stream.Outbox[*exprdv1.AgentLoopRunResponse]
	state           *evaluator.State
	outputs         *stream.Correlator[string, *exprdv1.ToolOutput]
	hooks           *stream.Correlator[string, *exprdv1.HookReply]
	approvals       *stream.Correlator[string, *exprdv1.AgentApprovalReply]
	input           *inputAsker // UTCP tools' requests for user input, by input id
	omit            eventSet    // the events Start asked not to be sent
}

// eventSet is a set of AgentEvent values.
type eventSet uint64

func (s eventSet) has(e exprdv1.AgentEvent) bool { return s&(1<<e) != 0 }

// omittedEvents reads start.omit_events: named events only.
func omittedEvents(evs []exprdv1.AgentEvent) (eventSet, error) {
	var s eventSet
	for _, e := range evs {
		if _, known := exprdv1.AgentEvent_name[int32(e)]; !known || e <= exprdv1.AgentEvent_AGENT_EVENT_UNSPECIFIED || e >= 64 {
			return 0, rpcstatus.BadRequest("start.omit_events", fmt.Sprintf("unknown event %v: want one of %s", e, strings.Join(omittableEvents(), ", ")))
		}
		s |= 1 << e
	}
	return s, nil
}

// omittableEvents are the names of the events omit_events may name: every
// AgentEvent but AGENT_EVENT_UNSPECIFIED, in their order.
func omittableEvents() []string {
	var names []string
	for n := int32(1); ; n++ {
		name, ok := exprdv1.AgentEvent_name[n]
		if !ok {
			return names
		}
		names = append(names, name)
	}
}

// newTurnID is a new turn id: 128 random bits as 32 lowercase hex digits.
func newTurnID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

func newTurn(ctx context.Context, state *evaluator.State) *turn {
	return &turn{ctx: ctx, state: state, id: newTurnID(),
		outputs:   stream.NewCorrelator[string, *exprdv1.ToolOutput](notAwaited("tool output")),
		hooks:     stream.NewCorrelator[string, *exprdv1.HookReply](notAwaited("hook")),
		approvals: stream.NewCorrelator[string, *exprdv1.AgentApprovalReply](notAwaited("approval")),
	}
}

func notAwaited(what string) func(string) string {
	return func(id string) string { return fmt.Sprintf("no %s is waiting for %q", what, id) }
}

// send numbers m, the turn's next event (seq; the first names the turn),
// records it in the turn store and queues it. One at a time: the events
// are recorded and queued in seq order. A detached turn's events go on
// being recorded when its first stream is gone.
func (t *turn) send(m *exprdv1.AgentLoopRunResponse) error {
	return t.sendEvent(m, false)
}

// sendRequest sends m, a request that waits for the client's reply, as
// send does, and keeps it as pending from before it is recorded (so a
// stream resuming after its seq finds it) until unpend.
func (t *turn) sendRequest(m *exprdv1.AgentLoopRunResponse) error {
	return t.sendEvent(m, true)
}

func (t *turn) sendEvent(m *exprdv1.AgentLoopRunResponse, request bool) error {
	t.sendMu.Lock()
	defer t.sendMu.Unlock()
	if err := t.emit(m, request); err != nil {
		return err
	}
	t.noticeIfDue()
	return nil
}

// emit is sendEvent's work. t.sendMu is held.
func (t *turn) emit(m *exprdv1.AgentLoopRunResponse, request bool) error {
	if t.over {
		return errTurnOver
	}
	m.Seq = t.seq + 1
	if m.Seq == 1 {
		m.TurnId = t.id
	}
	if request {
		t.pendMu.Lock()
		if t.pending == nil {
			t.pending = map[uint64]*exprdv1.AgentLoopRunResponse{}
		}
		t.pending[m.Seq] = m
		t.pendMu.Unlock()
	}
	if err := t.record(m); err != nil {
		t.unpend(m.Seq)
		return err
	}
	t.seq = m.Seq
	t.over = m.GetDone() != nil
	if t.out == nil { // a turn taken over: its clients read the store
		return nil
	}
	if err := t.out.Put(t.ctx, m); err != nil && !t.detach {
		return err
	}
	return nil
}

// errTurnOver is an event after the turn's done: not sent.
var errTurnOver = errors.New("the turn is over")

// unpend is a request's wait over: it is not sent again.
func (t *turn) unpend(seq uint64) {
	t.pendMu.Lock()
	delete(t.pending, seq)
	t.pendMu.Unlock()
}

// pendingAfter is the waiting request with the least seq in (after,
// upTo], marked pending, or nil. The one returned may be answered
// meanwhile: its reply then is Rejected, as a repeated one is.
func (t *turn) pendingAfter(after, upTo uint64) *exprdv1.AgentLoopRunResponse {
	t.pendMu.Lock()
	defer t.pendMu.Unlock()
	var next *exprdv1.AgentLoopRunResponse
	for seq, m := range t.pending { // as many as requests waiting: a few
		if seq > after && seq <= upTo && (next == nil || seq < next.GetSeq()) {
			next = m
		}
	}
	if next == nil {
		return nil
	}
	next = proto.Clone(next).(*exprdv1.AgentLoopRunResponse)
	next.TurnId, next.Pending = "", true
	return next
}

// halfClosed is the client's half-close: no reply can come.
func (t *turn) halfClosed() {
	t.outputs.Close()
	t.hooks.Close()
	t.approvals.Close()
	t.input.replies.Close()
}

// handle acts on one client message after Start. A message the turn
// cannot use (a reply nobody waits for, a state the turn refuses) is
// answered with Rejected and changes nothing; Cancel aborts the turn, and
// nothing more is read.
func (t *turn) handle(m *exprdv1.AgentLoopRunRequest, cancel context.CancelCauseFunc) (stop bool) {
	kind, callID := replyOf(m)
	var bad error
	switch msg := m.GetMsg().(type) {
	case *exprdv1.AgentLoopRunRequest_ToolOutput, *exprdv1.AgentLoopRunRequest_HookReply,
		*exprdv1.AgentLoopRunRequest_ApprovalReply, *exprdv1.AgentLoopRunRequest_InputReply:
		bad = t.deliver(m)
	case *exprdv1.AgentLoopRunRequest_State:
		kind = "state"
		if err := t.state.ReplaceContext(t.ctx, []byte(msg.State.GetStateJson())); err != nil {
			bad = stateStatus("state.state_json", err)
		}
	case *exprdv1.AgentLoopRunRequest_StatePatch:
		kind = "state_patch"
		if err := t.state.MergePatchContext(t.ctx, []byte(msg.StatePatch.GetPatchJson())); err != nil {
			bad = stateStatus("state_patch.patch_json", err)
		}
	case *exprdv1.AgentLoopRunRequest_Cancel:
		cancel(errAborted)
		return true
	case *exprdv1.AgentLoopRunRequest_Start:
		kind, bad = "start", alreadyStarted("start", "the turn has started; Start comes once")
	default:
		bad = rpcstatus.BadRequest("msg", "after Start: tool outputs, hook, approval and input replies, state, or cancel")
	}
	if bad != nil {
		_ = t.send(&exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_Rejected{Rejected: rejected(kind, callID, bad)}})
	}
	return false
}

// replyOf names a reply to a request of the turn: its field name and
// the id it answers (a call id, hook id or input id); "" for a message
// that is not a reply.
func replyOf(m *exprdv1.AgentLoopRunRequest) (kind, id string) {
	switch msg := m.GetMsg().(type) {
	case *exprdv1.AgentLoopRunRequest_ToolOutput:
		return "tool_output", msg.ToolOutput.GetCallId()
	case *exprdv1.AgentLoopRunRequest_HookReply:
		return "hook_reply", msg.HookReply.GetHookId() // hook replies are matched by hook id
	case *exprdv1.AgentLoopRunRequest_ApprovalReply:
		return "approval_reply", msg.ApprovalReply.GetCallId()
	case *exprdv1.AgentLoopRunRequest_InputReply:
		return "input_reply", msg.InputReply.GetInputId() // matched by input id
	}
	return "", ""
}

// deliver hands a reply to the request waiting for it: nil, or why it
// is refused (nothing waits for it: NOT_FOUND; it does not fit the
// request, which waits on). It never blocks. Whichever stream it came
// on, the first reply to a request wins.
func (t *turn) deliver(m *exprdv1.AgentLoopRunRequest) error {
	_, id := replyOf(m)
	switch msg := m.GetMsg().(type) {
	case *exprdv1.AgentLoopRunRequest_ToolOutput:
		return t.outputs.Deliver(id, msg.ToolOutput)
	case *exprdv1.AgentLoopRunRequest_HookReply:
		return t.hooks.Deliver(id, msg.HookReply)
	case *exprdv1.AgentLoopRunRequest_ApprovalReply:
		return t.approvals.Deliver(id, msg.ApprovalReply)
	case *exprdv1.AgentLoopRunRequest_InputReply:
		return t.input.deliver(id, int32(msg.InputReply.GetAction()), msg.InputReply.GetContentJson())
	}
	return rpcstatus.BadRequest("msg", "a tool output, or a hook, approval or input reply")
}

// ask sends m and waits for the reply to it that c matches under id; m
// is pending while it waits.
func ask[V any](ctx context.Context, t *turn, c *stream.Correlator[string, V], id string, check func(V) error, m *exprdv1.AgentLoopRunResponse) (V, error) {
	defer func() {
		if m.GetSeq() != 0 {
			t.unpend(m.GetSeq())
		}
	}()
	return c.Ask(ctx, id, check, func() error { return t.sendRequest(m) })
}

// askInput sends a UTCP tool's request for user input (Start's
// relay_input_requests), naming the step and the model's call it comes
// from.
func (t *turn) askInput(ctx context.Context, id string, req *userinput.Request) error {
	step, _ := agent.CallStep(ctx)
	m := &exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_InputRequest{InputRequest: &exprdv1.AgentInputRequest{
		InputId: id, Step: uint32(step), CallId: agent.CallID(ctx), Tool: req.Tool, Message: req.Message, RequestedSchemaJson: string(req.Schema)}}}
	err := t.sendRequest(m)
	if m.GetSeq() != 0 {
		// ctx is the request's own: it ends when the request stops waiting.
		context.AfterFunc(ctx, func() { t.unpend(m.GetSeq()) })
	}
	return err
}

// runOnClient asks the client to run a call: the second ToolCallRequested
// of the call, with run_on_client, sent once hooks and approval let it
// run. After the client's half-close the call is an error result.
func (t *turn) runOnClient(ctx context.Context, call agent.ToolCall) (agent.Result, error) {
	step, _ := agent.CallStep(ctx)
	out, err := ask(ctx, t, t.outputs, call.ID, nil, &exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_ToolCallRequested{
		ToolCallRequested: &exprdv1.ToolCallRequested{Step: uint32(step), Call: callProto(call), RunOnClient: true}}})
	if errors.Is(err, stream.ErrClientGone) {
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
	r, err := ask(ctx, t, t.approvals, call.ID, nil, &exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_ApprovalRequest{
		ApprovalRequest: &exprdv1.AgentApprovalRequest{Step: uint32(step), Call: callProto(call)}}})
	if errors.Is(err, stream.ErrClientGone) {
		return false, "the client closed its side of the stream before approving the call", nil
	}
	if err != nil {
		return false, "", err
	}
	return r.GetApproved(), r.GetReason(), nil
}

// hook asks the client a hook; after its half-close, stream.ErrClientGone.
func (t *turn) hook(ctx context.Context, req *exprdv1.HookRequest) (*exprdv1.HookReply, error) {
	req.HookId = t.hooks.ID()
	check := func(r *exprdv1.HookReply) error {
		if r.GetCallId() != req.GetCallId() {
			return rpcstatus.BadRequest("hook_reply.call_id", fmt.Sprintf("hook %s asked about call %q, the reply names %q", req.HookId, req.GetCallId(), r.GetCallId()))
		}
		return nil
	}
	return ask(ctx, t, t.hooks, req.HookId, check, &exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_HookRequest{HookRequest: req}})
}

func (t *turn) prepareStep(ctx context.Context, p agent.PrepareStep) (agent.PrepareStep, error) {
	r, err := t.hook(ctx, &exprdv1.HookRequest{Hook: exprdv1.Hook_HOOK_PREPARE_STEP, Step: uint32(p.Step)})
	if errors.Is(err, stream.ErrClientGone) {
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
	if errors.Is(err, stream.ErrClientGone) {
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
	if errors.Is(err, stream.ErrClientGone) {
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

// events are the loop's events the client did not omit, sent as they
// happen.
func (t *turn) events() agent.Events {
	send := func(m *exprdv1.AgentLoopRunResponse) { _ = t.send(m) }
	var ev agent.Events
	if !t.omit.has(exprdv1.AgentEvent_AGENT_EVENT_STEP_STARTED) {
		ev.StepStarted = func(step int) {
			send(&exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_StepStarted{StepStarted: &exprdv1.StepStarted{Step: uint32(step)}}})
		}
	}
	if !t.omit.has(exprdv1.AgentEvent_AGENT_EVENT_TEXT_DELTA) {
		ev.TextDelta = func(step int, text string) {
			send(&exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_TextDelta{TextDelta: &exprdv1.TextDelta{Step: uint32(step), Text: text}}})
		}
	}
	if !t.omit.has(exprdv1.AgentEvent_AGENT_EVENT_TOOL_CALL_ANNOUNCED) {
		ev.ToolCallRequested = func(step int, call agent.ToolCall) {
			send(&exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_ToolCallRequested{ToolCallRequested: &exprdv1.ToolCallRequested{Step: uint32(step), Call: callProto(call)}}})
		}
	}
	if !t.omit.has(exprdv1.AgentEvent_AGENT_EVENT_TOOL_RESULT) {
		ev.ToolResult = func(step int, call agent.ToolCall, r agent.Result) {
			send(&exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_ToolResult{ToolResult: &exprdv1.ToolResult{
				Step: uint32(step), CallId: call.ID, Name: call.Name, OutputJson: jsonText(r.Content), IsError: r.IsError}}})
		}
	}
	if !t.omit.has(exprdv1.AgentEvent_AGENT_EVENT_STEP_FINISHED) {
		ev.StepFinished = func(s agent.Step) {
			send(&exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_StepFinished{StepFinished: stepProto(s)}})
		}
	}
	return ev
}

// agentExprHost streams the expr tool's writes; nobody can confirm or run
// a client function inside an agent turn, so confirms are declined.
type agentExprHost struct{ t *turn }

func (h *agentExprHost) Write(ctx context.Context, w evaluator.Write) error {
	if h.t.omit.has(exprdv1.AgentEvent_AGENT_EVENT_STATE_WRITE) {
		return nil
	}
	step, _ := agent.CallStep(ctx)
	return h.t.send(&exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_StateWrite{StateWrite: &exprdv1.AgentStateWrite{
		Step: uint32(step), CallId: agent.CallID(ctx), ExprStep: uint32(w.Step), Path: w.Path, ValueJson: jsonText(w.ValueJSON)}}})
}

func (h *agentExprHost) Confirm(context.Context, int, string) (bool, error) { return false, nil }

func (h *agentExprHost) CallClient(context.Context, string, map[string]any) (any, error) {
	return nil, errors.New("no client function can run inside an agent turn")
}
