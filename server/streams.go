package server

// What CodeMode's Run and AgentLoop's Run share: picking the model
// provider, and how a bidi stream's receiver ends the run when the client
// breaks the protocol.

import (
	"context"
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/exprd/exprd/model"
)

// modelProvider picks a model provider by name ("" is the default). A
// server with no providers at all, whether its registry is nil or empty,
// cannot plan prompts or run agent turns: FAILED_PRECONDITION, with a
// PreconditionFailure. An unknown name is the client's: INVALID_ARGUMENT
// naming field.
func modelProvider(models *model.Registry, name, field string) (model.Provider, error) {
	if models == nil || len(models.Names()) == 0 {
		const desc = "this server has no model providers configured: prompts and agent turns need one"
		return nil, statusErr(codes.FailedPrecondition, desc, errorInfo(reasonNoModels), &errdetails.PreconditionFailure{Violations: []*errdetails.PreconditionFailure_Violation{
			{Type: "MODEL_PROVIDERS", Subject: "models", Description: desc},
		}})
	}
	p, err := models.Get(name)
	if err != nil {
		return nil, badRequest(field, err.Error())
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
var errFirstNotStart = badRequest("start", "the stream's first message must be Start")
