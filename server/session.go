package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/exprd/exprd/server/internal/stream"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/exprd/exprd/evaluator"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/server/internal/rpcstatus"
)

var sessionSeq atomic.Uint64

type sessionStream = grpc.BidiStreamingServer[exprdv1.SessionRequest, exprdv1.SessionResponse]

// session is one Session stream: its state and its calls in flight.
type session struct {
	srv    *Server
	stream sessionStream
	ctx    context.Context
	tool   *evaluator.Tool
	state  *evaluator.State
	// sendMu orders what is queued on out: an answer and the call's
	// forgetting are one step, so a late Rejected about the call follows
	// the answer.
	sendMu sync.Mutex
	out    *stream.Outbox[*exprdv1.SessionResponse]

	mu    sync.Mutex
	calls map[string]*call
	// confirms and results are the replies the calls wait for: a confirm
	// by call and step, a function's result by call and function call id.
	confirms *stream.Correlator[confirmKey, bool]
	results  *stream.Correlator[functionKey, *exprdv1.FunctionResult]
	// work hands a call to an idle worker. Workers outlive their calls so
	// that the stack a run grew is kept, not grown again for every call;
	// workers joins them.
	work    chan func()
	workers *stream.Group
}

type confirmKey struct {
	call string
	step uint32
}

type functionKey struct{ call, function string }

// call is one call in flight.
type call struct {
	id     string
	cancel context.CancelFunc
}

// Session keeps a UI's state for the stream's life and runs calls on it.
func (e *exprTool) Session(rpc sessionStream) error {
	s := e.s
	first, err := stream.First(rpc, rpcstatus.BadRequest("open", "the stream ended before Open"))
	if err != nil {
		return err
	}
	open := first.GetOpen()
	if open == nil {
		return rpcstatus.BadRequest("open", "the stream's first message must be Open")
	}
	t, err := s.tool(rpc.Context(), open.GetSettings(), open.GetBudgets())
	if err != nil {
		return err
	}
	// The client that stops reading is found at its next message: its
	// calls are let go as their sends fail.
	s.metrics.sessions.Add(rpc.Context(), 1)
	defer s.metrics.sessions.Add(context.WithoutCancel(rpc.Context()), -1)
	st := stream.Open(s.streamConfig(), rpc, nil, stream.EndsNothing)
	defer st.Close() // after the workers: close work, wait, close out, give memory back, cancel
	ctx := st.Ctx
	ss := &session{srv: s, stream: rpc, ctx: ctx, tool: t, state: s.opts.initialState.Fork(s.opts.maxStateBytes),
		calls: map[string]*call{}, work: make(chan func()), workers: st.Group, out: st.Out,
		confirms: stream.NewCorrelator[confirmKey, bool](func(k confirmKey) string {
			return fmt.Sprintf("no confirm is waiting for call %q step %d", k.call, k.step)
		}),
		results: stream.NewCorrelator[functionKey, *exprdv1.FunctionResult](func(k functionKey) string {
			return fmt.Sprintf("no function call %q is waiting in call %q", k.function, k.call)
		})}
	ss.state.UseMemory(st.Memory("the session's state"))
	defer close(ss.work) // workers end when the work channel closes, then st.Close waits for them
	id := strconv.FormatUint(sessionSeq.Add(1), 10)
	if err := ss.send(&exprdv1.SessionResponse{Msg: &exprdv1.SessionResponse_Opened{Opened: &exprdv1.Opened{
		SessionId: id, Budgets: budgetsProto(t.Budgets()),
	}}}); err != nil {
		return err
	}
	for {
		req, err := rpc.Recv()
		if errors.Is(err, io.EOF) {
			// The client sent all it will: let the calls finish, declining
			// what would need its answer.
			ss.confirms.Close()
			ss.results.Close()
			return nil
		}
		if err != nil {
			st.Cancel(nil)
			return err
		}
		select {
		case <-ss.out.Dead():
			// The client stopped reading: its calls were let go, and its
			// next message ends the stream (or its connection does).
			st.Cancel(nil)
			return stream.SendStatus(ss.out.Err())
		default:
		}
		if err := ss.handle(req); err != nil {
			st.Cancel(nil)
			return stream.SendStatus(err)
		}
	}
}

// handle acts on one client message. Only a failure to send ends the stream.
func (ss *session) handle(req *exprdv1.SessionRequest) error {
	switch m := req.GetMsg().(type) {
	case *exprdv1.SessionRequest_State:
		if err := ss.state.ReplaceContext(ss.ctx, []byte(m.State.GetStateJson())); err != nil {
			return ss.rejectState("state", "state.state_json", err)
		}
	case *exprdv1.SessionRequest_StatePatch:
		if err := ss.state.MergePatchContext(ss.ctx, []byte(m.StatePatch.GetPatchJson())); err != nil {
			return ss.rejectState("state_patch", "state_patch.patch_json", err)
		}
	case *exprdv1.SessionRequest_Call:
		return ss.startCall(m.Call)
	case *exprdv1.SessionRequest_ConfirmReply:
		r := m.ConfirmReply
		if err := ss.confirms.Deliver(confirmKey{r.GetCallId(), r.GetStep()}, r.GetAccepted()); err != nil {
			return ss.reject("confirm_reply", r.GetCallId(), err)
		}
	case *exprdv1.SessionRequest_FunctionResult:
		r := m.FunctionResult
		if err := ss.results.Deliver(functionKey{r.GetCallId(), r.GetFunctionCallId()}, r); err != nil {
			return ss.reject("function_result", r.GetCallId(), err)
		}
	case *exprdv1.SessionRequest_Cancel:
		ss.mu.Lock()
		c := ss.calls[m.Cancel.GetCallId()]
		ss.mu.Unlock()
		if c == nil {
			return ss.reject("cancel", m.Cancel.GetCallId(), rpcstatus.New(codes.NotFound, fmt.Sprintf("no call %q is in flight", m.Cancel.GetCallId()), rpcstatus.Info(exprdv1.ErrorReason_REPLY_NOT_AWAITED)))
		}
		c.cancel()
	case *exprdv1.SessionRequest_Open:
		return ss.reject("open", "", alreadyStarted("open", "the session is already open; settings are fixed for the stream's life"))
	default:
		return ss.reject("", "", rpcstatus.New(codes.InvalidArgument, "the message has none of its fields set", rpcstatus.Info(exprdv1.ErrorReason_INVALID_FIELD)))
	}
	return nil
}

func (ss *session) startCall(m *exprdv1.Call) error {
	id := m.GetCallId()
	if id == "" {
		return ss.reject("call", id, rpcstatus.BadRequest("call.call_id", "call_id is empty"))
	}
	ss.mu.Lock()
	if _, busy := ss.calls[id]; busy {
		ss.mu.Unlock()
		return ss.reject("call", id, rpcstatus.New(codes.AlreadyExists, fmt.Sprintf("call %q is already in flight", id), rpcstatus.Info(exprdv1.ErrorReason_CALL_IN_FLIGHT)))
	}
	if len(ss.calls) >= ss.srv.opts.maxCallsInFlight {
		ss.mu.Unlock()
		desc := fmt.Sprintf("%d calls are in flight, the limit for one stream", ss.srv.opts.maxCallsInFlight)
		return ss.reject("call", id, rpcstatus.Exhausted(rpcstatus.QuotaCallsInFlight, desc))
	}
	ctx, cancel := context.WithCancel(ss.ctx)
	c := &call{id: id, cancel: cancel}
	ss.calls[id] = c
	ss.mu.Unlock()

	ss.goCall(func() {
		defer cancel()
		defer func() {
			// A panic here would end the process: contain it to the call.
			if p := recover(); p != nil {
				_ = ss.srv.recovered(ctx, p)
				ss.finish(id, evaluator.Answer{Err: &evaluator.Error{Reason: evaluator.ExpressionRuntime, Message: "internal error", Step: -1}})
			}
		}()
		a := ss.srv.eval.Run(ctx, ss.tool, ss.state, []byte(m.GetInputJson()), &streamHost{ss: ss, c: c})
		ss.srv.metrics.answered(ctx, "exprtool", a)
		ss.finish(id, a)
	})
	return nil
}

// goCall runs f on an idle worker, or on a new one when all are busy. Only
// the receiving goroutine calls it, before work is closed.
func (ss *session) goCall(f func()) {
	select {
	case ss.work <- f:
	default:
		ss.workers.Go(func() error {
			f()
			for f := range ss.work {
				f()
			}
			return nil
		})
	}
}

// finish forgets a call and sends its answer under the send lock, so that
// a Rejected for a message about the call that came too late (a Cancel, a
// reply) always follows the answer on the stream.
func (ss *session) finish(id string, a evaluator.Answer) {
	ss.sendMu.Lock()
	defer ss.sendMu.Unlock()
	ss.mu.Lock()
	delete(ss.calls, id)
	ss.mu.Unlock()
	if ss.ctx.Err() != nil {
		return // the stream is gone: nobody to answer
	}
	_ = ss.out.Put(ss.ctx, &exprdv1.SessionResponse{Msg: &exprdv1.SessionResponse_Answer{Answer: answerProto(id, a)}})
}

// reject answers a message the session could not use with Rejected,
// carrying st, the status a unary call would have ended with.
func (ss *session) reject(kind, callID string, st error) error {
	return ss.send(&exprdv1.SessionResponse{Msg: &exprdv1.SessionResponse_Rejected{Rejected: rejected(kind, callID, st)}})
}

// rejectState refuses a State or StatePatch: too large is
// RESOURCE_EXHAUSTED, anything else INVALID_ARGUMENT.
func (ss *session) rejectState(kind, field string, err error) error {
	return ss.reject(kind, "", stateStatus(field, err))
}

// send queues m for the stream (see outbox): it never blocks on a client
// that does not read for longer than the slow-reader timeout.
func (ss *session) send(m *exprdv1.SessionResponse) error {
	ss.sendMu.Lock()
	defer ss.sendMu.Unlock()
	return ss.out.Put(ss.ctx, m)
}

// streamHost asks the client over the stream.
type streamHost struct {
	ss *session
	c  *call
}

func (h *streamHost) Write(_ context.Context, w evaluator.Write) error {
	return h.ss.send(&exprdv1.SessionResponse{Msg: &exprdv1.SessionResponse_StepWrite{StepWrite: &exprdv1.StepWrite{
		CallId: h.c.id, Step: uint32(w.Step), Path: w.Path, ValueJson: jsonText(w.ValueJSON),
	}}})
}

// Confirm asks the user; after the client's half-close, the step is
// declined.
func (h *streamHost) Confirm(ctx context.Context, step int, text string) (bool, error) {
	ok, err := h.ss.confirms.Ask(ctx, confirmKey{h.c.id, uint32(step)}, nil, func() error {
		return h.ss.send(&exprdv1.SessionResponse{Msg: &exprdv1.SessionResponse_ConfirmRequest{ConfirmRequest: &exprdv1.ConfirmRequest{
			CallId: h.c.id, Step: uint32(step), Text: text,
		}}})
	})
	if errors.Is(err, stream.ErrClientGone) {
		return false, nil // nobody left to ask: declined
	}
	return ok, err
}

// CallClient asks the client to run a function, under a function call id
// the server makes: "<call_id>/<n>", n counting the stream's function
// calls.
func (h *streamHost) CallClient(ctx context.Context, name string, args map[string]any) (any, error) {
	argsJSON, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	fid := h.c.id + "/" + h.ss.results.ID()
	r, err := h.ss.results.Ask(ctx, functionKey{h.c.id, fid}, nil, func() error {
		return h.ss.send(&exprdv1.SessionResponse{Msg: &exprdv1.SessionResponse_FunctionCall{FunctionCall: &exprdv1.FunctionCall{
			CallId: h.c.id, FunctionCallId: fid, Name: name, ArgsJson: jsonText(argsJSON), TimeoutMs: timeoutMs(ctx),
		}}})
	})
	switch {
	case err != nil:
		return nil, err
	case r.GetError() != "":
		return nil, errors.New(r.GetError())
	case len(r.GetResultJson()) == 0:
		return nil, nil
	}
	v, err := decodeJSON([]byte(r.GetResultJson()))
	if err != nil {
		return nil, fmt.Errorf("the client's result is not valid JSON: %v", err)
	}
	return v, nil
}

var _ evaluator.Host = (*streamHost)(nil)
var _ evaluator.Host = (*unaryHost)(nil)

// timeoutMs is how long the server waits for a function's result.
func timeoutMs(ctx context.Context) uint32 {
	d, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	return uint32(max(time.Until(d).Milliseconds(), 1))
}
