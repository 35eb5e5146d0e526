package server

import (
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc/status"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/server/internal/rpcstatus"
)

// rejected is the Rejected event for a client message a stream could not
// use: kind names the message, st is the gRPC status a unary call would
// have ended with, its reason named where it was made.
func rejected(kind, callID string, st error) *exprdv1.Rejected {
	return &exprdv1.Rejected{Kind: kind, CallId: callID, Status: rpcstatus.WithReason(status.Convert(st)).Proto()}
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
