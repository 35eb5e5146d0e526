package server

// What CodeMode's Run and AgentLoop's Run share: picking the model
// provider, the stream's receiver, and how it ends the run when the
// client breaks the protocol.

import (
	"context"
	"errors"
	"io"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"

	"google.golang.org/grpc/status"

	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/server/internal/rpcstatus"
)

// receive reads the client's messages after Start until the stream ends,
// handing each to handle until it says stop. The client's half-close calls
// halfClosed (its correlators: no reply can come) and cancels nothing; a
// failed Recv cancels the run with the status the stream ends with
// (recvFailed); a panic ends the run INTERNAL.
//
// It is the one goroutine of a stream its handler does not join: it is
// blocked in Recv until the client sends or the stream ends, and gRPC ends
// the stream only when the handler returns. Then Recv fails, and what it
// might still send is refused (outbox.close).
func receive[Req any](ctx context.Context, s *Server, stream interface{ Recv() (*Req, error) }, cancel context.CancelCauseFunc,
	handle func(*Req) (stop bool), halfClosed ...func()) {
	defer func() {
		if p := recover(); p != nil {
			cancel(&streamError{st: s.recovered(ctx, p)})
		}
	}()
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			for _, f := range halfClosed {
				f()
			}
			return
		}
		if err != nil {
			cancel(recvFailed(err))
			return
		}
		if handle(m) {
			return
		}
	}
}

// cancelOnDead is an outbox's onDead for a run: the run ends with the
// stream, with the slow-reader status as its cause when the client stopped
// reading.
func cancelOnDead(cancel context.CancelCauseFunc) func(error) {
	return func(err error) { cancel(&streamError{st: sendStatus(err)}) }
}

// modelProvider picks a model provider by name ("" is the default). A
// server with no providers at all, whether its registry is nil or empty,
// cannot plan prompts or run agent turns: FAILED_PRECONDITION, with a
// PreconditionFailure. An unknown name is the client's: INVALID_ARGUMENT
// naming field.
func modelProvider(models *model.Registry, name, field string) (model.Provider, error) {
	if models == nil || len(models.Names()) == 0 {
		const desc = "this server has no model providers configured: prompts and agent turns need one"
		return nil, rpcstatus.FailedPrecondition(desc, rpcstatus.Info(exprdv1.ErrorReason_NO_MODEL_PROVIDERS), "MODEL_PROVIDERS", "models", desc)
	}
	p, err := models.Get(name)
	if err != nil {
		return nil, rpcstatus.BadRequest(field, err.Error())
	}
	return p, nil
}

// streamError is the cause a bidi stream's receiving goroutine cancels the
// run with when the client broke the protocol: st is the status the stream
// ends with. Setting it and cancelling are one atomic step, so a run that
// ended because of it always finds it (brokenProtocol).
type streamError struct{ st error }

func (e *streamError) Error() string { return e.st.Error() }

// brokenProtocol returns the status the run's receiver cancelled ctx with,
// or nil.
func brokenProtocol(ctx context.Context) error {
	var se *streamError
	if errors.As(context.Cause(ctx), &se) {
		return se.st
	}
	return nil
}

// recvFailed is the cause for a Recv that failed other than by the client's
// half-close: the status grpc gave (a message over the size limit, the
// client gone).
func recvFailed(err error) error { return &streamError{st: status.Convert(err).Err()} }

// errFirstNotStart ends a stream whose first message is not Start, or
// that ended before any.
var errFirstNotStart = rpcstatus.BadRequest("start", "the stream's first message must be Start")
