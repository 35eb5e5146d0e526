// Package client is the Go SDK for exprd's ExprTool service. It wraps the
// generated stubs in gen/exprd/v1 and nothing else of exprd's.
//
// A Client is one gRPC connection (Dial; insecure credentials unless a
// credentials option is given). Describe and Call are the unary RPCs as they
// are. OpenSession starts a Session stream: it sends Open, waits for Opened,
// and then runs one receive goroutine that dispatches what the server sends:
//
//   - StepWrite goes to Handlers.OnWrite (on the receive goroutine, in
//     order) and into the Result of the Call it belongs to;
//   - ConfirmRequest asks Handlers.OnConfirm and FunctionCall runs the named
//     Handlers.Functions entry, each on its own goroutine, so a slow handler
//     holds up only its own call; a nil OnConfirm declines, a missing
//     function is answered with an error result (the model sees
//     host-function);
//   - Answer ends the Call waiting for it;
//   - Rejected of kind "call" fails that Call with a *RejectedError, which
//     carries the Rejected's whole google.rpc.Status (status.Code and
//     status.Convert read its code and details, as of any gRPC error);
//     every other Rejected goes to Handlers.OnRejected.
//
// Session.Call may be called from many goroutines: each call gets its own
// call_id and several run on the stream at once. When the Call's context
// ends first, the Session sends Cancel and waits up to CancelWait for the
// cancelled answer. SetState and PatchState only send: the server applies
// messages in order, so a Call sent after them sees the new state, and a
// state it refuses comes back as a Rejected through OnRejected.
//
// JSON goes in as []byte and json.RawMessage, as encoding/json makes it;
// the generated messages carry it in string fields named *_json, so it
// must be UTF-8 (else ErrNotUTF8, before anything is sent).
//
// StartTurn runs an AgentLoop turn on a Run stream and ResumeTurn follows
// one started earlier, by its id, from a seq; both return a Turn, which
// tells TurnHandlers.OnEvent of each event of the turn once, in seq order,
// and answers what the turn asks with the other handlers (Tools for
// client-run calls, OnApproval, OnHook, OnInput), each request once, each
// on its own goroutine. With a Reconnect, a stream that broke (a dropped
// connection, not an answer of the server's) is resumed after the last
// seq the Turn has, at most Reconnect.MaxAttempts times in a row, with a
// doubling backoff; a request the server sends again (pending) is answered
// only if it was not, and a reply lost with its stream is sent again.
// Wait returns the turn's done, or the status it ended with.
//
// The other services are the generated clients on the same connection
// (AgentLoop, CodeMode, ToolRegistry). Tools ranges over every page of
// ToolRegistry.ListTools.
//
// Session.Close half-closes the stream: the server lets the calls in flight
// finish (declining confirms and failing client-run functions, since nobody
// can answer any more), then ends the stream. Close returns once the stream
// has ended and every handler goroutine has returned, so a closed Session
// leaves no goroutine behind.
package client
