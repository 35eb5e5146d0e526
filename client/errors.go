package client

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
)

// ErrClosed is returned by a Session's methods once Close has begun.
var ErrClosed = errors.New("exprd client: session closed")

// ErrTurnClosed is what a Turn's Wait returns when Close stopped following
// the turn before its end.
var ErrTurnClosed = errors.New("exprd client: turn closed")

// ErrNotUTF8 is returned, wrapped, for JSON that is not valid UTF-8: exprd's
// *_json fields are proto strings, which must be. (encoding/json never
// writes such JSON; a json.RawMessage built by hand may hold it.)
var ErrNotUTF8 = errors.New("exprd client: the JSON is not valid UTF-8")

// RejectedError is a Call the server refused (a Rejected of kind "call"),
// e.g. RESOURCE_EXHAUSTED when too many calls are in flight. It carries the
// server's whole status, as a unary call's error would: status.Code,
// status.FromError and status.Convert see its code, message and details (a
// google.rpc.QuotaFailure naming the limit for RESOURCE_EXHAUSTED, a
// google.rpc.BadRequest naming the field for INVALID_ARGUMENT), also
// through errors that wrap it.
type RejectedError struct {
	Rejected *exprdv1.Rejected
}

func (e *RejectedError) Error() string {
	st := e.GRPCStatus()
	return fmt.Sprintf("exprd: %s %q rejected: %s: %s", e.Rejected.GetKind(), e.Rejected.GetCallId(), st.Code(), st.Message())
}

// GRPCStatus returns the rejection's status, details included. A Rejected
// without a status (or with code OK) is Unknown: a rejection is never OK.
func (e *RejectedError) GRPCStatus() *status.Status {
	st := e.Rejected.GetStatus()
	if codes.Code(st.GetCode()) == codes.OK {
		msg := st.GetMessage()
		if msg == "" {
			msg = "the server rejected the message without saying why"
		}
		return status.New(codes.Unknown, msg)
	}
	return status.FromProto(st)
}
