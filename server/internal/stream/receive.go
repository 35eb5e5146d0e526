package stream

// The stream's receiver, and how it ends the work when the client breaks
// the protocol or stops reading.

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc/status"

	"github.com/exprd/exprd/membudget"
	"github.com/exprd/exprd/server/internal/rpcstatus"
)

// Receive reads the client's messages after Start until the stream ends,
// handing each to handle until it says stop. The client's half-close calls
// halfClosed (its correlators: no reply can come) and cancels nothing; a
// failed Recv cancels the run with the status the stream ends with
// (RecvFailed); a panic ends the run INTERNAL.
//
// It is the one goroutine of a stream its handler does not join: it is
// blocked in Recv until the client sends or the stream ends, and gRPC ends
// the stream only when the handler returns. Then Recv fails, and what it
// might still send is refused (Outbox.Close).
func Receive[Req any](ctx context.Context, rec Recover, stream interface{ Recv() (*Req, error) }, cancel context.CancelCauseFunc,
	handle func(*Req) (stop bool), halfClosed ...func()) {
	defer func() {
		if p := recover(); p != nil {
			cancel(&Error{Status: rec(ctx, p)})
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
			cancel(RecvFailed(err))
			return
		}
		if handle(m) {
			return
		}
	}
}

// Error is the cause a bidi stream's receiving goroutine cancels the
// run with when the client broke the protocol: Status is the status the stream
// ends with. Setting it and cancelling are one atomic step, so a run that
// ended because of it always finds it (BrokenProtocol).
type Error struct{ Status error }

func (e *Error) Error() string { return e.Status.Error() }

// BrokenProtocol returns the status the run's receiver cancelled ctx with,
// or nil.
func BrokenProtocol(ctx context.Context) error {
	var se *Error
	if errors.As(context.Cause(ctx), &se) {
		return se.Status
	}
	return nil
}

// RecvFailed is the cause for a Recv that failed other than by the client's
// half-close: the status grpc gave (a message over the size limit, the
// client gone).
func RecvFailed(err error) error { return &Error{Status: status.Convert(err).Err()} }

// SendStatus is the status a stream ends with when sending on it failed:
// RESOURCE_EXHAUSTED for a client that stopped reading or whose queue the
// memory budget could not hold, else the error as gRPC gave it.
func SendStatus(err error) error {
	var spent *membudget.ExhaustedError
	switch {
	case errors.Is(err, ErrSlowReader):
		return rpcstatus.Exhausted(rpcstatus.QuotaSlowReader, "the client did not read what it was sent for the slow-reader timeout: the stream is ended")
	case errors.As(err, &spent):
		return rpcstatus.Memory(spent)
	}
	return err
}
