// Package stream is the machinery of exprd's bidi streams (ExprTool's
// Session, CodeMode's Run, AgentLoop's Run), in one place so that each
// service only says what its messages mean:
//
//   - First reads the message that opens a stream.
//   - Open starts a Stream: the work's context, the outbox that sends
//     what the work produces (Outbox: never blocks on a client that does
//     not read for longer than the slow-reader timeout, and holds what it
//     queues past FreeBytes in the memory budget), the goroutines the
//     handler joins (Group), the memory it reserves (Memory), and the
//     receiver (Receive) for streams whose work runs on the handler's
//     goroutine.
//   - Close releases them in one order: the handler's goroutines are
//     joined, what they queued is sent (bounded by the slow-reader
//     timeout), the stream's reservations are given back, and the work's
//     context is cancelled.
//
// Replies a client sends to the server's requests (confirms, function
// results, approvals, hooks, client-run tools, input) are matched to
// them by a Correlator each. A client that breaks the protocol ends the
// work with the status its stream ends with (Error, BrokenProtocol).
package stream

import (
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/exprd/exprd/membudget"
)

// Config is what every stream of a server shares.
type Config struct {
	// OutboxBytes bounds the bytes queued for a stream.
	OutboxBytes int
	// SlowReaderTimeout is how long a stream's queue may stay full before
	// its client counts as not reading.
	SlowReaderTimeout time.Duration
	// Memory is the server's memory budget (nil: none).
	Memory *membudget.Budget
	// Recover turns a panic in a stream's goroutines into its status.
	Recover Recover
}

// Ends says what a stream's end does to the work it serves: the client
// stopped reading (its outbox died) or its Recv failed.
type Ends int

const (
	// EndsWork cancels the work, with the stream's status as the cause.
	EndsWork Ends = iota
	// EndsWorkUnlessGone cancels it only when the client broke the
	// protocol: the client gone (its stream's context ended, or it
	// cancelled the call) leaves the work running (a detached turn).
	EndsWorkUnlessGone
	// EndsNothing leaves the work to the handler, which receives on its
	// own goroutine and finds the outbox dead at the next message
	// (Session).
	EndsNothing
)

// RPC is the server side of a bidi stream of Req from the client and Resp
// to it (grpc.BidiStreamingServer).
type RPC[Req, Resp any] interface {
	Context() context.Context
	Recv() (*Req, error)
	Send(*Resp) error
}

// Stream is one bidi stream's machinery.
type Stream[Req, Resp any] struct {
	// Ctx is the work's context: a child of the stream's own, or for work
	// that outlives its stream, of the parent Open was given.
	Ctx    context.Context
	cancel context.CancelCauseFunc
	// Out queues what the stream sends.
	Out *Outbox[*Resp]
	// Group joins the goroutines the handler starts.
	Group *Group

	rpc  RPC[Req, Resp]
	cfg  Config
	ends Ends
	mems []*membudget.Reservation
}

// First reads a stream's first message; missing is the status when the
// stream ends before one.
func First[Req any](rpc interface{ Recv() (*Req, error) }, missing error) (*Req, error) {
	m, err := rpc.Recv()
	if errors.Is(err, io.EOF) {
		return nil, missing
	}
	return m, err
}

// Open starts a stream's machinery for work whose context is a child of
// parent (the stream's own context when nil). The handler defers Close
// right after: what it defers later runs before Close.
func Open[Req, Resp any](cfg Config, rpc RPC[Req, Resp], parent context.Context, ends Ends) *Stream[Req, Resp] {
	if parent == nil {
		parent = rpc.Context()
	}
	ctx, cancel := context.WithCancelCause(parent)
	st := &Stream[Req, Resp]{Ctx: ctx, cancel: cancel, rpc: rpc, cfg: cfg, ends: ends, Group: NewGroup(ctx, cfg.Recover)}
	var onDead func(error)
	if ends != EndsNothing {
		onDead = func(err error) { st.Ended(&Error{Status: SendStatus(err)}) }
	}
	st.Out = NewOutbox(cfg.OutboxBytes, cfg.SlowReaderTimeout, func(m *Resp) int { return proto.Size(any(m).(proto.Message)) },
		recoveredSend(ctx, cfg.Recover, rpc.Send), onDead, st.Memory(MemoryWhat))
	return st
}

// Send queues m (see Outbox.Put).
func (st *Stream[Req, Resp]) Send(m *Resp) error { return st.Out.Put(st.Ctx, m) }

// Cancel cancels the work with cause.
func (st *Stream[Req, Resp]) Cancel(cause error) { st.cancel(cause) }

// Ended is what the stream's end, with cause, does to the work (Ends).
func (st *Stream[Req, Resp]) Ended(cause error) {
	switch st.ends {
	case EndsNothing:
	case EndsWorkUnlessGone:
		if !ClientGone(st.rpc.Context(), cause) {
			st.cancel(cause)
		}
	default:
		st.cancel(cause)
	}
}

// Memory is an empty reservation of the memory budget for what (as the
// budget names it), given back by Close: a change arriving after the
// handler returns reserves nothing.
func (st *Stream[Req, Resp]) Memory(what string) *membudget.Reservation {
	r := st.cfg.Memory.EmptyFor(st.Ctx, what)
	st.mems = append(st.mems, r)
	return r
}

// Receive reads the client's messages in a goroutine of its own (see
// Receive), a failed Recv ending the work as Ends says.
func (st *Stream[Req, Resp]) Receive(handle func(*Req) (stop bool), halfClosed ...func()) {
	go Receive(st.Ctx, st.cfg.Recover, st.rpc, st.Ended, handle, halfClosed...)
}

// Close releases the stream's machinery in its order: the handler's
// goroutines joined, what they queued sent (Outbox.Close bounds the
// wait), the reservations given back, the work's context cancelled.
func (st *Stream[Req, Resp]) Close() {
	_ = st.Group.Wait()
	st.Out.Close()
	for _, r := range st.mems {
		r.Close()
	}
	st.cancel(nil)
}

// ClientGone reports whether a stream ended, with cause, because its
// client went away (its context ended, or it cancelled the call) rather
// than by breaking the protocol.
func ClientGone(streamCtx context.Context, cause error) bool {
	if streamCtx.Err() != nil {
		return true
	}
	var se *Error
	if errors.As(cause, &se) {
		return status.Code(se.Status) == codes.Canceled
	}
	return false
}
