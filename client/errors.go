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

// RejectedError is a Call the server refused (a Rejected of kind "call"),
// e.g. RESOURCE_EXHAUSTED when too many calls are in flight. status.Code and
// status.FromError see its code.
type RejectedError struct {
	Rejected *exprdv1.Rejected
}

func (e *RejectedError) Error() string {
	st := e.Rejected.GetStatus()
	return fmt.Sprintf("exprd: %s %q rejected: %s: %s", e.Rejected.GetKind(), e.Rejected.GetCallId(),
		codes.Code(st.GetCode()), st.GetMessage())
}

// GRPCStatus returns the rejection as a gRPC status, with its details.
func (e *RejectedError) GRPCStatus() *status.Status {
	return status.FromProto(e.Rejected.GetStatus())
}
