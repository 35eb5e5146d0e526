package mcptransport

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/userinput"
)

// elicit answers a server's request for user input (form-mode
// elicitation) by relaying it to the user of the stream the call comes
// from (userinput.AskerOf its context), and fails the call saying why
// when it cannot:
//
//   - The call it is for: on the 2026-07-28 revision the request comes in
//     the call's input-required result, and the SDK asks it under the
//     call's own context. On a session (2025-11-25, 2025-06-18) it comes
//     as a request of its own, which the SDK does not tie to the call it
//     was sent for: it is the call's when that call is the only one in
//     flight on the session, and otherwise nobody's (the calls of several
//     streams share a session; asking the wrong stream's user would show
//     one caller another's request).
//   - The call's user: a stream that has one and opted in put an asker in
//     the call's context; ExprTool host functions, CodeMode's Execute and
//     streams that did not opt in have none: ReasonInputRequired.
//   - The request: at most userinput.MaxRequestBytes, its schema compiled
//     as every tool schema is (userinput.NewRequest); URL mode is not
//     relayed (exprd does not advertise it).
//
// The reply is checked against the requested schema before it comes back
// here (the asker's userinput.Request.CheckReply), and the SDK checks it
// again before it is sent. The wait is bounded by the asker, by the call's
// deadline, and by the server's withdrawing its request.
func (s *server) elicit(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	st := callStateOf(ctx)
	if st == nil {
		st = s.onlyCall()
	}
	if st == nil {
		s.markAsked("user input (elicitation), while several calls were in flight on its session")
		return nil, refusal("exprd cannot tell which of its calls this request is for")
	}
	fail := func(err *utcp.TransportError) (*mcp.ElicitResult, error) {
		st.fail(err)
		return nil, refusal("exprd could not ask a user for this input")
	}
	if req.Params == nil || req.Params.Mode == "url" {
		return fail(inputRequired(st.tool, "a visit to a URL (URL-mode elicitation), which exprd does not relay"))
	}
	asker := userinput.AskerOf(st.ctx)
	if asker == nil {
		return fail(inputRequired(st.tool, "user input (elicitation)"))
	}
	var schema json.RawMessage
	if req.Params.RequestedSchema != nil {
		raw, err := json.Marshal(req.Params.RequestedSchema)
		if err != nil {
			return fail(&utcp.TransportError{Tool: st.tool, Reason: ReasonInputRequired, Body: "the MCP server's request for user input has a schema that is not JSON"})
		}
		schema = raw
	}
	ir, err := userinput.NewRequest(st.tool, req.Params.Message, schema)
	if err != nil {
		return fail(&utcp.TransportError{Tool: st.tool, Reason: ReasonInputRequired, Body: "the MCP server asked for user input: " + err.Error()})
	}
	actx, cancel := context.WithCancel(st.ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel) // the server withdrew its request
	defer stop()
	reply, err := asker.AskInput(actx, ir)
	if err != nil {
		if st.ctx.Err() != nil || ctx.Err() != nil {
			// The call ended (its caller, its deadline) or the server
			// withdrew the request: the call's own outcome says which.
			return nil, refusal("the request was withdrawn")
		}
		return fail(&utcp.TransportError{Tool: st.tool, Reason: ReasonInputRequired, Body: "the MCP server asked for user input: " + err.Error()})
	}
	res := &mcp.ElicitResult{Action: string(reply.Action)}
	if reply.Action == userinput.Accept {
		res.Content = reply.Content
	}
	return res, nil
}

// onlyCall is the call in flight on the session when there is exactly
// one; else nil.
func (s *server) onlyCall() *callState {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.calls) != 1 {
		return nil
	}
	for st := range s.calls {
		return st
	}
	return nil
}

// markAsked records on every call in flight that the server asked for
// what, which a call that then fails reports (ReasonInputRequired).
func (s *server) markAsked(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for st := range s.calls {
		st.asked.Store(what)
	}
}

// refusal is what the server is answered when its request is not
// relayed.
func refusal(msg string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: msg}
}

// inputRounds reports an error of the SDK's multi-round-trip: the
// requests of an input-required result it could not answer (sampling,
// more rounds than it allows).
func inputRounds(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "multi round-trip") || strings.Contains(msg, "multi-round-trip")
}
