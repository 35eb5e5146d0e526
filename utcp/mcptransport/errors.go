package mcptransport

import (
	"encoding/json"
	"fmt"

	"github.com/exprd/exprd/utcp"
)

// The failures of an MCP call that no other transport has (the rest are
// utcp's reasons: unreachable, broken, response-too-large, malformed,
// egress-refused, insecure-url).
const (
	// ReasonToolError: the tool answered with isError: true.
	ReasonToolError utcp.Reason = "tool-error"
	// ReasonRPCError: the server answered the request with a JSON-RPC
	// error (an unknown tool, invalid parameters).
	ReasonRPCError utcp.Reason = "mcp-error"
	// ReasonDrift: the server lists another definition of the tool than
	// the one registered (see Drift); the call is not sent.
	ReasonDrift utcp.Reason = "definition-changed"
	// ReasonInputRequired: the server asked for user input that was not
	// given: the call has no user to ask (or its request could not be
	// relayed: its size, its schema, URL mode, several calls in flight on
	// its session), the user did not answer, or it asked for what exprd
	// never gives (sampling, roots).
	ReasonInputRequired utcp.Reason = "input-required"
)

// toolError is a result with isError: true. Of its text, the server's,
// a caller is shown only, where the operator lets provider messages
// through, the error type and code of a JSON object
// (utcp.Env.ProviderFields): never the text itself, which stays behind
// Unwrap for logs.
func toolError(env utcp.Env, tool, text string) *utcp.TransportError {
	te := &utcp.TransportError{Tool: tool, Reason: ReasonToolError, Body: "the tool reported an error"}
	var parsed any
	if json.Unmarshal([]byte(text), &parsed) == nil {
		if f := env.ProviderFields(parsed); f != nil {
			raw, _ := json.Marshal(f)
			te.Body = "the tool reported an error: " + string(raw)
		}
	}
	return te.WithCause(serverText{"isError", text})
}

// rpcError is a JSON-RPC error the server answered: its code is shown,
// its message (free text) only logged.
func rpcError(tool string, code int64, msg string) *utcp.TransportError {
	body := fmt.Sprintf("the server answered error %d", code)
	return (&utcp.TransportError{Tool: tool, Reason: ReasonRPCError, Body: body}).WithCause(serverText{"error", msg})
}

// inputRequired is a call whose server asked for what no one here gives
// it.
func inputRequired(tool, what string) *utcp.TransportError {
	return &utcp.TransportError{Tool: tool, Reason: ReasonInputRequired,
		Body: "the MCP server asked for " + what + ", and exprd has no user to ask for this call (only a stream that relays requests for input has one)"}
}

// serverText is text a server sent, kept for logs only.
type serverText struct{ what, text string }

func (s serverText) Error() string {
	const max = utcp.MaxErrorBodyChars
	t := s.text
	if len(t) > max {
		t = utcp.CutRunes(t, max) + "…"
	}
	return "server " + s.what + ": " + t
}
