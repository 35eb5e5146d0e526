package client

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
	"unicode/utf8"

	"google.golang.org/grpc"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
)

// CancelWait is how long Session.Call waits for the cancelled answer after
// its context ended and it sent Cancel.
const CancelWait = 2 * time.Second

// Function runs a client-run host function: args is the call's one object
// argument as JSON; the result must be JSON in UTF-8 (nil: null). An error
// is shown to the model as host-function.
type Function = func(ctx context.Context, args json.RawMessage) (json.RawMessage, error)

// Handlers answer what the server asks of a Session. Every field is
// optional.
type Handlers struct {
	// OnWrite is told of every write, in order, on the receive goroutine:
	// it must not block.
	OnWrite func(callID string, w *exprdv1.StepWrite)
	// OnConfirm asks the user whether step of call may run. nil, or an
	// error, declines. ctx ends when the call ends or the session closes.
	OnConfirm func(ctx context.Context, callID string, step int, text string) (bool, error)
	// Functions run the session's client-run functions by name. A function
	// the map lacks is answered with an error result. ctx ends when the call
	// ends or the session closes.
	Functions map[string]Function
	// OnRejected is told of the server's Rejected messages that fail no
	// Call: a refused State or StatePatch, a reply that came too late. Its
	// status says why: status.FromProto(r.GetStatus()) reads the code,
	// message and details.
	OnRejected func(r *exprdv1.Rejected)
}

// Result is the outcome of a Session call.
type Result struct {
	// Answer is what the model sees (answer_json), with its reason and
	// whether a Cancel stopped the call.
	Answer *exprdv1.Answer
	// Writes are the call's writes, in the order the steps made them.
	Writes []*exprdv1.StepWrite
}

// Session is one Session stream: the server keeps a state for it and runs
// its calls. Its methods are safe for concurrent use.
type Session struct {
	stream grpc.BidiStreamingClient[exprdv1.SessionRequest, exprdv1.SessionResponse]
	opened *exprdv1.Opened
	h      Handlers
	// stop ends the stream; hctx is the parent of the handlers' contexts
	// and ends when the session can no longer send their replies.
	stop    context.CancelFunc
	hctx    context.Context
	hcancel context.CancelFunc

	sendMu     sync.Mutex
	sendClosed bool

	mu    sync.Mutex
	calls map[string]*pending
	ended bool  // the receive loop has returned
	err   error // why the stream ended; nil after a clean end

	seq       atomic.Uint64
	recvDone  chan struct{}
	handlers  sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// pending is a Call waiting for its answer.
type pending struct {
	ctx    context.Context // the handlers' context for this call
	cancel context.CancelFunc
	writes []*exprdv1.StepWrite
	answer *exprdv1.Answer
	err    error
	done   chan struct{}
}

// OpenSession opens a Session stream with settings and budgets (nil: the
// server's defaults) and waits for Opened. A bad Open (an unknown server
// function, a budget over the server's maximum) ends the stream; its error
// (INVALID_ARGUMENT) is returned. ctx bounds the opening only; the stream
// lives until Close, keeping ctx's values (e.g. outgoing metadata).
func (c *Client) OpenSession(ctx context.Context, settings *exprdv1.Settings, budgets *exprdv1.Budgets, h Handlers) (*Session, error) {
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	stream, err := c.et.Session(sctx)
	if err != nil {
		stop()
		return nil, err
	}
	type recvd struct {
		m   *exprdv1.SessionResponse
		err error
	}
	first := make(chan recvd, 1)
	go func() {
		err := stream.Send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_Open{Open: &exprdv1.Open{Settings: settings, Budgets: budgets}}})
		if err != nil && !errors.Is(err, io.EOF) {
			first <- recvd{err: err}
			return
		}
		// On io.EOF the server has ended the stream; Recv returns why.
		m, err := stream.Recv()
		first <- recvd{m, err}
	}()
	var r recvd
	select {
	case r = <-first:
	case <-ctx.Done():
		stop()
		<-first
		return nil, ctx.Err()
	}
	if r.err == nil && r.m.GetOpened() == nil {
		r.err = fmt.Errorf("exprd client: the server answered Open with %T, want Opened", r.m.GetMsg())
	}
	if r.err != nil {
		stop()
		return nil, r.err
	}
	hctx, hcancel := context.WithCancel(sctx)
	s := &Session{
		stream: stream, opened: r.m.GetOpened(), h: h, stop: stop, hctx: hctx, hcancel: hcancel,
		calls: map[string]*pending{}, recvDone: make(chan struct{}),
	}
	go s.recvLoop()
	return s, nil
}

// Opened returns the server's Opened: the session's id and the budgets in
// force.
func (s *Session) Opened() *exprdv1.Opened { return s.opened }

// SetState replaces the session's state with a JSON object. It only sends:
// a state the server refuses comes back through Handlers.OnRejected.
func (s *Session) SetState(_ context.Context, stateJSON []byte) error {
	state, err := jsonText(stateJSON, "the state")
	if err != nil {
		return err
	}
	return s.send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_State{State: &exprdv1.State{StateJson: state}}})
}

// PatchState applies an RFC 7386 JSON merge patch to the session's state.
// Like SetState it only sends; a refusal comes through Handlers.OnRejected.
func (s *Session) PatchState(_ context.Context, patchJSON []byte) error {
	patch, err := jsonText(patchJSON, "the patch")
	if err != nil {
		return err
	}
	return s.send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_StatePatch{StatePatch: &exprdv1.StatePatch{PatchJson: patch}}})
}

// jsonText is JSON for a *_json field: a proto string, which must be UTF-8.
// Whether it is JSON is the server's to say.
func jsonText(b []byte, what string) (string, error) {
	if !utf8.Valid(b) {
		return "", fmt.Errorf("%w: %s", ErrNotUTF8, what)
	}
	return string(b), nil
}

// Call sends one tool call (the model's input JSON) and waits for its
// answer. An error the model should see is in the Result, not the error.
//
// When ctx ends first, Call sends Cancel and waits up to CancelWait: if the
// cancelled answer comes, it is returned along with an error wrapping
// ctx.Err() (the Result holds the writes made before the cancel); if the
// call finished anyway, its Result is returned with a nil error.
func (s *Session) Call(ctx context.Context, inputJSON []byte) (*Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	input, err := jsonText(inputJSON, "the call's input")
	if err != nil {
		return nil, err
	}
	id := "c" + strconv.FormatUint(s.seq.Add(1), 10)
	pctx, pcancel := context.WithCancel(s.hctx)
	p := &pending{ctx: pctx, cancel: pcancel, done: make(chan struct{})}
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		pcancel()
		return nil, s.endErr()
	}
	s.calls[id] = p
	s.mu.Unlock()

	if err := s.send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_Call{Call: &exprdv1.Call{CallId: id, InputJson: input}}}); err != nil {
		s.forget(id)
		return nil, err
	}
	select {
	case <-p.done:
		return p.result()
	case <-ctx.Done():
	}
	if err := s.send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_Cancel{Cancel: &exprdv1.Cancel{CallId: id}}}); err != nil {
		s.forget(id)
		return nil, ctx.Err()
	}
	t := time.NewTimer(CancelWait)
	defer t.Stop()
	select {
	case <-p.done:
		res, err := p.result()
		if err == nil && res.Answer.GetCancelled() {
			err = fmt.Errorf("exprd client: call %s cancelled: %w", id, ctx.Err())
		}
		return res, err
	case <-t.C:
		s.forget(id)
		return nil, ctx.Err()
	}
}

func (p *pending) result() (*Result, error) {
	if p.err != nil {
		return nil, p.err
	}
	return &Result{Answer: p.answer, Writes: p.writes}, nil
}

// forget drops a call that will not wait for its answer.
func (s *Session) forget(id string) {
	s.mu.Lock()
	p := s.calls[id]
	delete(s.calls, id)
	s.mu.Unlock()
	if p != nil {
		p.cancel()
	}
}

// Close half-closes the stream, waits for the server to finish the calls in
// flight and end the stream, and for every handler to return. It returns
// why the stream ended (nil after a clean end). Calls after Close get
// ErrClosed.
func (s *Session) Close() error {
	s.closeOnce.Do(func() {
		s.sendMu.Lock()
		s.sendClosed = true
		_ = s.stream.CloseSend()
		s.sendMu.Unlock()
		// Replies can no longer be sent: stop the handlers waiting on a user
		// or on work.
		s.hcancel()
		<-s.recvDone
		s.handlers.Wait()
		s.stop()
		s.mu.Lock()
		s.closeErr = s.err
		s.mu.Unlock()
	})
	return s.closeErr
}

// send serialises sends: a gRPC stream allows one sender at a time.
func (s *Session) send(m *exprdv1.SessionRequest) error {
	s.sendMu.Lock()
	if s.sendClosed {
		s.sendMu.Unlock()
		return ErrClosed
	}
	err := s.stream.Send(m)
	s.sendMu.Unlock()
	if errors.Is(err, io.EOF) {
		// The stream has ended; its status comes from Recv.
		<-s.recvDone
		return s.endErr()
	}
	return err
}

// endErr is the error for using a session whose stream has ended.
func (s *Session) endErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	return ErrClosed
}

// recvLoop dispatches what the server sends until the stream ends.
func (s *Session) recvLoop() {
	defer close(s.recvDone)
	for {
		m, err := s.stream.Recv()
		if err != nil {
			s.end(err)
			return
		}
		switch msg := m.GetMsg().(type) {
		case *exprdv1.SessionResponse_StepWrite:
			w := msg.StepWrite
			s.mu.Lock()
			if p := s.calls[w.GetCallId()]; p != nil {
				p.writes = append(p.writes, w)
			}
			s.mu.Unlock()
			if s.h.OnWrite != nil {
				s.h.OnWrite(w.GetCallId(), w)
			}
		case *exprdv1.SessionResponse_ConfirmRequest:
			s.handlers.Add(1)
			go s.confirm(msg.ConfirmRequest)
		case *exprdv1.SessionResponse_FunctionCall:
			s.handlers.Add(1)
			go s.function(msg.FunctionCall)
		case *exprdv1.SessionResponse_Answer:
			s.finish(msg.Answer.GetCallId(), msg.Answer, nil)
		case *exprdv1.SessionResponse_Rejected:
			s.rejected(msg.Rejected)
		}
	}
}

// end fails the calls still waiting: no answer will come.
func (s *Session) end(err error) {
	if errors.Is(err, io.EOF) {
		err = nil
	}
	s.mu.Lock()
	s.ended, s.err = true, err
	calls := s.calls
	s.calls = nil
	s.mu.Unlock()
	callErr := err
	if callErr == nil {
		callErr = errors.New("exprd client: the server ended the session before answering")
	}
	for _, p := range calls {
		p.err = callErr
		p.cancel()
		close(p.done)
	}
	s.hcancel()
}

// finish ends a call with its answer or an error.
func (s *Session) finish(id string, a *exprdv1.Answer, err error) bool {
	s.mu.Lock()
	p := s.calls[id]
	delete(s.calls, id)
	s.mu.Unlock()
	if p == nil {
		return false
	}
	p.answer, p.err = a, err
	p.cancel()
	close(p.done)
	return true
}

func (s *Session) rejected(r *exprdv1.Rejected) {
	switch r.GetKind() {
	case "call":
		if s.finish(r.GetCallId(), nil, &RejectedError{Rejected: r}) {
			return
		}
	case "cancel":
		// Only Call sends Cancel; refused, it raced the call's own answer,
		// which arrives or has arrived: nothing for anyone to do.
		return
	}
	if s.h.OnRejected != nil {
		s.h.OnRejected(r)
	}
}

// callCtx is the handlers' context for a call: it ends with the call.
func (s *Session) callCtx(id string) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.calls[id]; p != nil {
		return p.ctx
	}
	return s.hctx
}

func (s *Session) confirm(r *exprdv1.ConfirmRequest) {
	defer s.handlers.Done()
	accepted := false
	if s.h.OnConfirm != nil {
		ok, err := s.h.OnConfirm(s.callCtx(r.GetCallId()), r.GetCallId(), int(r.GetStep()), r.GetText())
		accepted = ok && err == nil
	}
	// A failed send means the stream is ending; the call ends with it.
	_ = s.send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_ConfirmReply{ConfirmReply: &exprdv1.ConfirmReply{
		CallId: r.GetCallId(), Step: r.GetStep(), Accepted: accepted,
	}}})
}

func (s *Session) function(fc *exprdv1.FunctionCall) {
	defer s.handlers.Done()
	res := &exprdv1.FunctionResult{CallId: fc.GetCallId(), FunctionCallId: fc.GetFunctionCallId()}
	if fn := s.h.Functions[fc.GetName()]; fn == nil {
		res.Error = fmt.Sprintf("the client has no function %q", fc.GetName())
	} else if out, err := fn(s.callCtx(fc.GetCallId()), json.RawMessage(fc.GetArgsJson())); err != nil {
		res.Error = err.Error()
		if res.Error == "" {
			res.Error = "failed"
		}
	} else if !utf8.Valid(out) {
		// Unsendable as a proto string: the model is told, as it is of a
		// result that is not JSON.
		res.Error = "the client's result is not valid UTF-8"
	} else {
		res.ResultJson = string(out)
	}
	_ = s.send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_FunctionResult{FunctionResult: res}})
}
