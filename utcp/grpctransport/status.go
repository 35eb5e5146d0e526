package grpctransport

// This is the one file that reads gRPC status codes: it turns a provider's
// status into a *utcp.TransportError. (Reading an upstream status is not
// the server's mapping of exprd's errors to codes, which stays in server/.)

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/exprd/exprd/utcp"
)

// httpStatus is the HTTP status equivalent to a gRPC code (the mapping of
// google.rpc.Code), so that a TransportError's Status reads the same for
// every transport.
var httpStatus = map[codes.Code]int{
	codes.Canceled:           499,
	codes.Unknown:            http.StatusInternalServerError,
	codes.InvalidArgument:    http.StatusBadRequest,
	codes.DeadlineExceeded:   http.StatusGatewayTimeout,
	codes.NotFound:           http.StatusNotFound,
	codes.AlreadyExists:      http.StatusConflict,
	codes.PermissionDenied:   http.StatusForbidden,
	codes.ResourceExhausted:  http.StatusTooManyRequests,
	codes.FailedPrecondition: http.StatusBadRequest,
	codes.Aborted:            http.StatusConflict,
	codes.OutOfRange:         http.StatusBadRequest,
	codes.Unimplemented:      http.StatusNotImplemented,
	codes.Internal:           http.StatusInternalServerError,
	codes.Unavailable:        http.StatusServiceUnavailable,
	codes.DataLoss:           http.StatusInternalServerError,
	codes.Unauthenticated:    http.StatusUnauthorized,
}

// Messages grpc-go itself gives a call whose response is over
// MaxCallRecvMsgSize.
var tooLargeMessages = []string{
	"grpc: received message larger than max",
	"grpc: received message after decompression larger than max",
}

// rpcError classifies a failed RPC. The caller's context ending is returned
// as ctx.Err() (the registry maps it to a timeout or a cancellation).
// Unavailable (and Canceled while ctx is live: the connection closed) is
// ReasonUnreachable, or ReasonBroken once a stream has begun, without the
// message, which is grpc-go's own and names addresses. Any other code is
// what the provider answered: ReasonStatus with the equivalent HTTP status
// and a body {code, message}, the message bounded and without the
// provider's host.
func (s *spec) rpcError(ctx context.Context, err error, tool string, midStream bool) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	st, ok := status.FromError(err)
	if !ok {
		return &utcp.TransportError{Tool: tool, Reason: utcp.ReasonFailed}
	}
	switch code := st.Code(); {
	case code == codes.DeadlineExceeded && deadlineNear(ctx):
		// The provider enforces the deadline we sent it (grpc-timeout) and
		// may answer a moment before our own timer fires: it is ours, so
		// report it as the caller's context does, a moment later.
		<-ctx.Done()
		return ctx.Err()
	case code == codes.Unavailable || code == codes.Canceled:
		if sc := s.conn.Load(); sc != nil && !midStream {
			if ee := sc.refused.Load(); ee != nil {
				return utcp.EgressError(tool, ee)
			}
		}
		if midStream {
			return &utcp.TransportError{Tool: tool, Reason: utcp.ReasonBroken}
		}
		return &utcp.TransportError{Tool: tool, Reason: utcp.ReasonUnreachable}
	case code == codes.ResourceExhausted && hasAnyPrefix(st.Message(), tooLargeMessages):
		return &utcp.TransportError{Tool: tool, Reason: utcp.ReasonTooLarge}
	default:
		return s.statusError(tool, code, st.Message())
	}
}

// statusError is the provider's answer with a code other than OK: the
// code, and, where the operator lets providers' messages through, the
// equivalent HTTP status's reason phrase (utcp.Env.ProviderError). Its
// message is free text, never shown: it stays behind Unwrap, for logs.
func (s *spec) statusError(tool string, code codes.Code, msg string) *utcp.TransportError {
	hs, ok := httpStatus[code]
	if !ok {
		hs = http.StatusInternalServerError
	}
	e := s.env.ProviderError(tool, hs, []byte(msg), nil)
	e.Body = map[string]any{"code": code.String()}
	return e
}

// reflectionError is a reflection server's error_response to req.
func (s *spec) reflectionError(tool string, req *rpb.ServerReflectionRequest, code int32, msg string) *utcp.TransportError {
	msg = protojsonNoise.ReplaceAllString(msg, "") // servers pass protobuf-go's errors on
	if codes.Code(code) == codes.NotFound && req.GetFileContainingSymbol() != "" {
		return s.notFound(tool, fmt.Sprintf("%s is not a service of the provider", req.GetFileContainingSymbol()))
	}
	return s.statusError(tool, codes.Code(code), msg)
}

// notFound is a service or method the provider's reflection does not know,
// said in exprd's words (msg).
func (s *spec) notFound(tool, msg string) *utcp.TransportError {
	return ourStatusError(tool, codes.NotFound, msg)
}

// unimplemented is something the provider does not offer, said in exprd's
// words (msg).
func (s *spec) unimplemented(tool, msg string) *utcp.TransportError {
	return ourStatusError(tool, codes.Unimplemented, msg)
}

// ourStatusError is a status error whose message exprd wrote: shown as it
// is, unlike a provider's own (statusError).
func ourStatusError(tool string, code codes.Code, msg string) *utcp.TransportError {
	hs, ok := httpStatus[code]
	if !ok {
		hs = http.StatusInternalServerError
	}
	return &utcp.TransportError{Tool: tool, Reason: utcp.ReasonStatus, Status: hs, Body: map[string]any{"code": code.String(), "message": msg}}
}

// isUnimplemented reports whether the provider said it has no such method.
func isUnimplemented(err error) bool {
	return status.Code(err) == codes.Unimplemented
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// deadlineNear reports whether ctx's deadline is at most deadlineSlack
// away, so that waiting for it costs nothing noticeable.
func deadlineNear(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ok && time.Until(d) <= deadlineSlack
}

// deadlineSlack is how early a provider may report our deadline as passed.
const deadlineSlack = 100 * time.Millisecond
