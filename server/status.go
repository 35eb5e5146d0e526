package server

import (
	"strings"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
)

// badRequest is InvalidArgument with a BadRequest detail naming the field.
func badRequest(field, desc string) error {
	st := status.New(codes.InvalidArgument, field+": "+desc)
	if d, err := st.WithDetails(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
		{Field: field, Description: desc},
	}}); err == nil {
		st = d
	}
	return st.Err()
}

// rejected is the Rejected event for a client message a stream could not
// use: kind names the message, st is the gRPC status a unary call would
// have ended with.
func rejected(kind, callID string, st error) *exprdv1.Rejected {
	return &exprdv1.Rejected{Kind: kind, CallId: callID, Status: status.Convert(st).Proto()}
}

// jsonText is JSON for a *_json field. A proto string must be UTF-8, and
// JSON from a provider or a model may hold bytes that are not (encoding/json
// passes them through): each such byte, which can only be inside a JSON
// string, becomes U+FFFD, so the JSON stays valid and the message can be
// sent.
func jsonText(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
