package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
)

// The defaults of Reconnect: at most 8 failed resumes in a row, waiting
// 250 ms before the first and twice as long before each next one, up to
// 5 s: about 23 s in all before a Turn gives up, well within exprd's
// --turn-detached-timeout (5 minutes).
const (
	DefaultReconnectAttempts   = 8
	DefaultReconnectBackoff    = 250 * time.Millisecond
	DefaultReconnectMaxBackoff = 5 * time.Second
)

// Reconnect says how a Turn follows its turn again after its stream broke
// (a transport error, not an answer of the server's): it resumes the turn
// after the last seq it has. Only a detached turn (AgentStart.Detach unset
// or true, the default) outlives the stream it was started on.
type Reconnect struct {
	// MaxAttempts is how many resumes in a row may fail before the Turn
	// gives up with the last error (0: DefaultReconnectAttempts). The
	// count starts again once a resumed stream has brought a message.
	MaxAttempts int
	// Backoff is the wait before the first attempt (0:
	// DefaultReconnectBackoff), doubled before each next one up to
	// MaxBackoff (0: DefaultReconnectMaxBackoff). Each wait is drawn at
	// random between half of it and all of it.
	Backoff, MaxBackoff time.Duration
}

// ToolFunc runs a call of a client-run tool (EXECUTOR_CLIENT). Its result
// is the tool's output, JSON in UTF-8 (nil: {}); an error is the call's
// error result, {"error": "..."}, for the model.
type ToolFunc = func(ctx context.Context, call *exprdv1.AgentToolCall) (json.RawMessage, error)

// TurnHandlers answer what an AgentLoop turn asks of its client, and are
// told what it does. Every field is optional. The answering handlers run
// each on its own goroutine, with a context that ends when the Turn ends.
type TurnHandlers struct {
	// OnEvent is told of every event of the turn but Rejected once, in
	// seq order, on the Turn's receive goroutine: it must not block. The
	// requests are told too, before their handler is asked; a request
	// sent again (pending) is not.
	OnEvent func(m *exprdv1.AgentLoopRunResponse)
	// Tools run the client-run tools by name. A call of a tool the map
	// lacks is answered with an error result.
	Tools map[string]ToolFunc
	// OnApproval approves a call, or denies it with a reason the model is
	// told. nil, or an error, denies.
	OnApproval func(ctx context.Context, r *exprdv1.AgentApprovalRequest) (approved bool, reason string, err error)
	// OnHook answers a hook (hook_id and call_id are filled in). nil
	// changes nothing; an error gives a tool-call hook's call the error
	// result and changes nothing of a prepare-step hook.
	OnHook func(ctx context.Context, r *exprdv1.HookRequest) (*exprdv1.HookReply, error)
	// OnInput answers a tool's request for user input (input_id is filled
	// in). nil declines; an error cancels.
	OnInput func(ctx context.Context, r *exprdv1.AgentInputRequest) (*exprdv1.AgentInputReply, error)
	// OnRejected is told of every Rejected once: the turn's (with a seq)
	// and a resumed stream's own (seq 0), but not the NOT_FOUND that
	// answers a reply the Turn sent again.
	OnRejected func(r *exprdv1.Rejected)
	// OnReconnect is told, before each attempt to resume the turn, why
	// the stream broke (or the last attempt failed), the attempt's number
	// from 1 and how long the Turn waits before it.
	OnReconnect func(err error, attempt int, wait time.Duration)
}

// Turn follows one AgentLoop turn: it prints nothing and decides nothing
// itself, but tells its TurnHandlers of each event once and sends their
// answers. Its methods are safe for concurrent use.
//
// A request of the turn (a client-run call, an approval, a hook, an input
// request) is answered once. On a stream that resumed the turn, the
// requests replayed from before it resumed are answered only when the
// server sends them again as pending (they still wait); those the turn
// makes later, when they come. A pending request answered on an earlier
// stream, whose reply may have been lost with it, gets the same reply
// again (the first reply wins; the server refuses the other).
type Turn struct {
	c  *Client
	h  TurnHandlers
	rc *Reconnect // nil: no reconnect

	ctx     context.Context // the Turn's: its streams and handlers
	cancel  context.CancelFunc
	id      string
	done    chan struct{}
	running sync.WaitGroup // the receive goroutine and the handlers

	sendMu sync.Mutex // one sender at a time on a stream

	mu        sync.Mutex
	stream    grpc.BidiStreamingClient[exprdv1.AgentLoopRunRequest, exprdv1.AgentLoopRunResponse]
	gen       int    // the stream's number: 1 for the first
	brought   bool   // the current stream brought a message
	last      uint64 // the highest seq told
	live      uint64 // events above this seq are new on the current stream
	requests  map[uint64]*turnRequest
	resent    map[string]int // replies sent again, by kind and id: their NOT_FOUNDs to drop
	result    *exprdv1.AgentDone
	err       error
	closeOnce sync.Once
}

// turnRequest is a request of the turn the Turn has seen.
type turnRequest struct {
	asked bool                         // its handler was started
	reply *exprdv1.AgentLoopRunRequest // nil until the handler returned
	gen   int                          // the stream the reply was sent on
}

type agentStream = grpc.BidiStreamingClient[exprdv1.AgentLoopRunRequest, exprdv1.AgentLoopRunResponse]

// StartTurn starts a turn and waits for its first event, which names it
// (Turn.ID). A start the server refuses is returned as its error. ctx
// bounds the whole Turn: when it ends, the stream ends, as by Close. With
// rc set, a broken stream is resumed (start.Detach must not be false for
// the turn to outlive it). A stream that breaks before the first event cannot
// be resumed: the turn's id is not known.
func (c *Client) StartTurn(ctx context.Context, start *exprdv1.AgentStart, h TurnHandlers, rc *Reconnect) (*Turn, error) {
	t := c.newTurn(ctx, "", h, rc)
	s, err := t.open()
	if err == nil {
		err = s.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: start}})
	}
	var first *exprdv1.AgentLoopRunResponse
	if err == nil || errors.Is(err, io.EOF) { // on io.EOF Recv says why
		first, err = s.Recv()
	}
	if err == nil && first.GetTurnId() == "" {
		err = fmt.Errorf("exprd client: the turn's first event names no turn: %v", first)
	}
	if err != nil {
		t.cancel()
		return nil, err
	}
	t.id = first.GetTurnId()
	t.use(s, 0)
	t.running.Add(1)
	go t.run(first)
	return t, nil
}

// ResumeTurn follows a turn started earlier: its events after afterSeq
// (0: all; negative: counting back from the latest), then the new ones.
// It first asks the server which seq is the latest (a short resume of the
// last event): an unknown turn, or another caller's, is its NOT_FOUND.
// ctx and rc are as for StartTurn.
func (c *Client) ResumeTurn(ctx context.Context, turnID string, afterSeq int64, h TurnHandlers, rc *Reconnect) (*Turn, error) {
	t := c.newTurn(ctx, turnID, h, rc)
	if afterSeq > 0 {
		t.last = uint64(afterSeq)
	}
	s, err := t.resume(afterSeq)
	if err != nil {
		t.cancel()
		return nil, err
	}
	t.mu.Lock()
	t.use(s, t.live)
	t.mu.Unlock()
	t.running.Add(1)
	go t.run(nil)
	return t, nil
}

func (c *Client) newTurn(ctx context.Context, id string, h TurnHandlers, rc *Reconnect) *Turn {
	tctx, cancel := context.WithCancel(ctx)
	t := &Turn{c: c, h: h, ctx: tctx, cancel: cancel, id: id, done: make(chan struct{}),
		requests: map[uint64]*turnRequest{}, resent: map[string]int{}}
	if rc != nil {
		r := *rc
		if r.MaxAttempts <= 0 {
			r.MaxAttempts = DefaultReconnectAttempts
		}
		if r.Backoff <= 0 {
			r.Backoff = DefaultReconnectBackoff
		}
		if r.MaxBackoff <= 0 {
			r.MaxBackoff = DefaultReconnectMaxBackoff
		}
		r.MaxBackoff = max(r.MaxBackoff, r.Backoff)
		t.rc = &r
	}
	return t
}

// ID is the turn's id, for ResumeTurn and AgentLoop.Cancel.
func (t *Turn) ID() string { return t.id }

// LastSeq is the seq of the last event told to OnEvent (or OnRejected):
// where a resume would go on from.
func (t *Turn) LastSeq() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}

// Send sends m (a state, a state patch) on the current stream. It is not
// sent again on a stream resumed later.
func (t *Turn) Send(m *exprdv1.AgentLoopRunRequest) error {
	t.mu.Lock()
	s := t.stream
	t.mu.Unlock()
	t.sendMu.Lock()
	defer t.sendMu.Unlock()
	return s.Send(m)
}

// Cancel stops the turn from anywhere (the unary AgentLoop.Cancel): the
// stream then ends CANCELED, which Wait returns. ended is true when the
// turn had ended before.
func (t *Turn) Cancel(ctx context.Context) (ended bool, err error) {
	resp, err := t.c.AgentLoop().Cancel(ctx, &exprdv1.AgentLoopCancelRequest{TurnId: t.id})
	return resp.GetEnded(), err
}

// Wait waits for the turn's end: its done, or why it ended without one
// (the status it ended with, the error that made the Turn give up, or
// ErrTurnClosed after Close).
func (t *Turn) Wait() (*exprdv1.AgentDone, error) {
	<-t.done
	t.running.Wait()
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.result, t.err
}

// Close stops following the turn: the stream ends and the handlers' context
// with it. A detached turn (the default) goes on without a client (it may
// be resumed); one started with Detach false ends CANCELED. Close returns once every goroutine of the
// Turn has, with what Wait would.
func (t *Turn) Close() (*exprdv1.AgentDone, error) {
	t.closeOnce.Do(func() {
		t.mu.Lock()
		if t.err == nil && t.result == nil {
			t.err = ErrTurnClosed
		}
		t.mu.Unlock()
		t.cancel()
	})
	return t.Wait()
}

// open opens a Run stream on the Turn's context.
func (t *Turn) open() (agentStream, error) {
	return t.c.AgentLoop().Run(t.ctx)
}

// use makes s the current stream; events above live are new on it.
// t.mu is held, or nothing else runs yet.
func (t *Turn) use(s agentStream, live uint64) {
	t.stream, t.live, t.brought = s, live, false
	t.gen++
}

// resume opens a stream following the turn after afterSeq. It first reads
// the turn's latest event on a stream of its own, so that the requests
// replayed up to it are told from those the turn makes later (t.live).
func (t *Turn) resume(afterSeq int64) (agentStream, error) {
	latest, err := t.latest()
	if err != nil {
		return nil, err
	}
	s, err := t.open()
	if err == nil {
		err = s.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Resume{Resume: &exprdv1.AgentResume{TurnId: t.id, AfterSeq: afterSeq}}})
	}
	if errors.Is(err, io.EOF) {
		err = nil // the stream has ended: Recv says why
	}
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.live = latest
	t.mu.Unlock()
	return s, nil
}

// latest is the seq of the turn's latest event.
func (t *Turn) latest() (uint64, error) {
	ctx, cancel := context.WithCancel(t.ctx)
	defer cancel()
	s, err := t.c.AgentLoop().Run(ctx)
	if err != nil {
		return 0, err
	}
	err = s.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Resume{Resume: &exprdv1.AgentResume{TurnId: t.id, AfterSeq: -1}}})
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	m, err := s.Recv()
	if err != nil {
		return 0, err
	}
	return m.GetSeq(), nil
}

// run reads the turn's streams to its end, resuming a broken one when rc
// allows. first is the first event, already read.
func (t *Turn) run(first *exprdv1.AgentLoopRunResponse) {
	defer t.running.Done()
	defer close(t.done)
	defer t.cancel()
	err := t.follow(first)
	failed := 0 // resumes in a row that brought nothing
	for err != nil && t.rc != nil && retryable(t.ctx, err) {
		t.mu.Lock()
		if t.brought {
			failed, t.brought = 0, false
		}
		after := int64(t.last)
		t.mu.Unlock()
		if failed == t.rc.MaxAttempts {
			err = fmt.Errorf("exprd client: gave up resuming turn %s after %d attempts: %w", t.id, failed, err)
			break
		}
		failed++
		wait := t.rc.backoff(failed)
		if t.h.OnReconnect != nil {
			t.h.OnReconnect(err, failed, wait)
		}
		timer := time.NewTimer(wait)
		select {
		case <-t.ctx.Done():
			timer.Stop()
			err = t.ctx.Err()
			continue
		case <-timer.C:
		}
		var s agentStream
		if s, err = t.resume(after); err != nil {
			continue
		}
		t.mu.Lock()
		t.use(s, t.live)
		t.mu.Unlock()
		err = t.follow(nil)
	}
	t.mu.Lock()
	if t.result == nil && t.err == nil {
		t.err = err
		if err == nil {
			t.err = errors.New("exprd client: the turn's stream ended without done")
		}
	}
	t.mu.Unlock()
}

// backoff is the wait before attempt n (from 1): Backoff doubled n-1
// times, at most MaxBackoff, drawn between half of it and all of it.
func (r *Reconnect) backoff(n int) time.Duration {
	wait := r.Backoff
	for i := 1; i < n && wait < r.MaxBackoff; i++ {
		wait *= 2
	}
	wait = min(wait, r.MaxBackoff)
	return wait/2 + rand.N(wait/2+1)
}

// follow reads the current stream to its end: nil once done came (or the
// stream ended OK), else why it ended.
func (t *Turn) follow(first *exprdv1.AgentLoopRunResponse) error {
	t.mu.Lock()
	s := t.stream
	t.mu.Unlock()
	m := first
	for {
		if m == nil {
			var err error
			if m, err = s.Recv(); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				t.mu.Lock()
				done := t.result != nil
				t.mu.Unlock()
				if done { // what ends the stream after done changes nothing
					return nil
				}
				return err
			}
		}
		t.receive(m)
		m = nil
	}
}

// receive handles one message of the current stream.
func (t *Turn) receive(m *exprdv1.AgentLoopRunResponse) {
	t.mu.Lock()
	t.brought = true
	if id := m.GetTurnId(); id != "" && t.id != "" && id != t.id {
		t.mu.Unlock()
		return // not this turn's: never sent by a server
	}
	seq := m.GetSeq()
	if r := m.GetRejected(); r != nil && seq == 0 {
		key := replyKey(r.GetKind(), r.GetCallId())
		if t.resent[key] > 0 && codes.Code(r.GetStatus().GetCode()) == codes.NotFound {
			t.resent[key]--
			t.mu.Unlock()
			return
		}
		t.mu.Unlock()
		if t.h.OnRejected != nil {
			t.h.OnRejected(r)
		}
		return
	}
	if m.GetPending() {
		t.pending(m) // unlocks
		return
	}
	if seq != 0 {
		if seq <= t.last {
			t.mu.Unlock()
			return // told already
		}
		t.last = seq
	}
	if d := m.GetDone(); d != nil {
		t.result = d
	}
	ask := seq > t.live && isRequest(m)
	if isRequest(m) {
		t.requests[seq] = &turnRequest{asked: ask}
	}
	t.mu.Unlock()
	if r := m.GetRejected(); r != nil {
		if t.h.OnRejected != nil {
			t.h.OnRejected(r)
		}
	} else if t.h.OnEvent != nil {
		t.h.OnEvent(m)
	}
	if ask {
		t.ask(seq, m)
	}
}

// pending handles a request sent again: asked when it never was, its reply
// sent again when that went on an earlier stream. t.mu is held; pending
// unlocks it.
func (t *Turn) pending(m *exprdv1.AgentLoopRunResponse) {
	seq := m.GetSeq()
	r := t.requests[seq]
	switch {
	case r == nil || !r.asked:
		t.requests[seq] = &turnRequest{asked: true}
		t.mu.Unlock()
		t.ask(seq, m)
	case r.reply != nil && r.gen != t.gen:
		reply := r.reply
		kind, id := replyOf(reply)
		t.resent[replyKey(kind, id)]++
		t.mu.Unlock()
		t.sendReply(seq, reply)
	default: // its handler runs, or its reply went on this stream
		t.mu.Unlock()
	}
}

// ask runs the request's handler on its own goroutine and sends its reply.
func (t *Turn) ask(seq uint64, m *exprdv1.AgentLoopRunResponse) {
	t.running.Add(1)
	go func() {
		defer t.running.Done()
		reply := t.answer(m)
		if reply == nil || t.ctx.Err() != nil {
			return
		}
		t.sendReply(seq, reply)
	}()
}

// sendReply sends the reply to request seq on the current stream. A send
// that fails goes with a broken stream: the request comes again (pending)
// on the next, and the reply with it.
func (t *Turn) sendReply(seq uint64, reply *exprdv1.AgentLoopRunRequest) {
	t.mu.Lock()
	if r := t.requests[seq]; r != nil {
		r.reply, r.gen = reply, t.gen
	}
	s := t.stream
	t.mu.Unlock()
	t.sendMu.Lock()
	_ = s.Send(reply)
	t.sendMu.Unlock()
}

// answer asks the handler for m's reply.
func (t *Turn) answer(m *exprdv1.AgentLoopRunResponse) *exprdv1.AgentLoopRunRequest {
	ctx := t.ctx
	switch {
	case m.GetToolCallRequested() != nil:
		call := m.GetToolCallRequested().GetCall()
		out := &exprdv1.ToolOutput{CallId: call.GetId()}
		fn := t.h.Tools[call.GetName()]
		var res json.RawMessage
		err := fmt.Errorf("the client has no tool %q", call.GetName())
		if fn != nil {
			res, err = fn(ctx, call)
		}
		if err == nil && !utf8.Valid(res) {
			err = errors.New("the client's result is not valid UTF-8")
		}
		if err != nil {
			msg := err.Error()
			if msg == "" {
				msg = "the tool failed"
			}
			b, _ := json.Marshal(map[string]string{"error": msg})
			out.OutputJson, out.IsError = string(b), true
		} else {
			out.OutputJson = string(res)
		}
		return &exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_ToolOutput{ToolOutput: out}}
	case m.GetApprovalRequest() != nil:
		r := m.GetApprovalRequest()
		reply := &exprdv1.AgentApprovalReply{CallId: r.GetCall().GetId(), Reason: "the client has nobody to approve the call"}
		if t.h.OnApproval != nil {
			ok, reason, err := t.h.OnApproval(ctx, r)
			reply.Approved, reply.Reason = ok && err == nil, reason
			if err != nil {
				reply.Reason = err.Error()
			}
		}
		if reply.Approved {
			reply.Reason = ""
		}
		return &exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_ApprovalReply{ApprovalReply: reply}}
	case m.GetHookRequest() != nil:
		r := m.GetHookRequest()
		reply := &exprdv1.HookReply{}
		if t.h.OnHook != nil {
			got, err := t.h.OnHook(ctx, r)
			switch {
			case err != nil && r.GetHook() != exprdv1.Hook_HOOK_PREPARE_STEP:
				b, _ := json.Marshal(map[string]string{"error": err.Error()})
				reply = &exprdv1.HookReply{ResultJson: string(b), ResultIsError: true}
			case err == nil && got != nil:
				reply = got
			}
		}
		reply.HookId, reply.CallId = r.GetHookId(), r.GetCallId()
		return &exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_HookReply{HookReply: reply}}
	case m.GetInputRequest() != nil:
		r := m.GetInputRequest()
		reply := &exprdv1.AgentInputReply{Action: exprdv1.AgentInputReply_ACTION_DECLINE}
		if t.h.OnInput != nil {
			got, err := t.h.OnInput(ctx, r)
			switch {
			case err != nil:
				reply.Action = exprdv1.AgentInputReply_ACTION_CANCEL
			case got != nil:
				reply = got
			}
		}
		reply.InputId = r.GetInputId()
		return &exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_InputReply{InputReply: reply}}
	}
	return nil
}

// isRequest reports whether m asks the client for a reply.
func isRequest(m *exprdv1.AgentLoopRunResponse) bool {
	return m.GetToolCallRequested().GetRunOnClient() || m.GetApprovalRequest() != nil ||
		m.GetHookRequest() != nil || m.GetInputRequest() != nil
}

// replyOf is a reply's kind and id, as a Rejected names them.
func replyOf(m *exprdv1.AgentLoopRunRequest) (kind, id string) {
	switch msg := m.GetMsg().(type) {
	case *exprdv1.AgentLoopRunRequest_ToolOutput:
		return "tool_output", msg.ToolOutput.GetCallId()
	case *exprdv1.AgentLoopRunRequest_HookReply:
		return "hook_reply", msg.HookReply.GetHookId()
	case *exprdv1.AgentLoopRunRequest_ApprovalReply:
		return "approval_reply", msg.ApprovalReply.GetCallId()
	case *exprdv1.AgentLoopRunRequest_InputReply:
		return "input_reply", msg.InputReply.GetInputId()
	}
	return "", ""
}

func replyKey(kind, id string) string { return kind + "\x00" + id }

// retryable reports whether err broke the stream rather than answered it:
// a status exprd did not send (every one of its own carries an ErrorInfo
// of domain "exprd"), of a code a dropped connection or a broken stream
// ends a call with; or exprd's TURN_STORE_UNAVAILABLE, which asks for a
// retry. ctx's own end is never retried.
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == "exprd" {
			return st.Code() == codes.Unavailable && info.GetReason() == exprdv1.ErrorReason_TURN_STORE_UNAVAILABLE.String()
		}
	}
	switch st.Code() {
	case codes.Unavailable, codes.Internal, codes.Unknown, codes.Canceled:
		return true
	}
	return false
}
