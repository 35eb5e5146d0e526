// Package server holds exprd's gRPC services: each handler decodes a
// request, hands it to the core (evaluator, codemode, agent, the UTCP
// registry), and encodes what comes back. Only this package turns core
// errors into gRPC statuses (errors.go), each built by
// server/internal/rpcstatus.
//
// What is not a service is in packages of its own: the machinery of a
// bidi stream (server/internal/stream), bearer tokens (server/auth), the
// rate limit (server/ratelimit), and the limits on connections and streams
// (server/limits). This package wires them: its options, the tap and the
// interceptor chain.
//
// # Services
//
// Server holds what the services share (options, the evaluator, telemetry,
// limits) and wires them on one grpc.Server, with grpc.health.v1 and
// reflection:
//
//   - ExprTool (exprTool: exprtool.go, session.go): Describe, Call, and
//     Session, which keeps a UI's state for the stream's life. Client
//     messages are handled in order on the stream's goroutine; each Call
//     runs on a worker, so several may be in flight
//     (DefaultMaxCallsInFlight), and all of them end before the handler
//     returns. A bad Open ends the stream INVALID_ARGUMENT.
//   - CodeMode (codeMode: codemode.go), with a UTCP registry: Execute,
//     CallTool, and Run, which streams a run's events and asks the client
//     to approve calls.
//   - AgentLoop (agentLoop: agentloop*.go): Run, one agent turn per stream;
//     the turn asks the client for hooks, approvals and client-run tools.
//     Served even without model providers (then FAILED_PRECONDITION).
//   - ToolRegistry (toolRegistry: toolregistry*.go), with a UTCP registry:
//     reads and searches for anyone, writes as an admin act.
//
// # Interceptors
//
// Outermost first (interceptors.go): recovery (a panic is INTERNAL, its
// stack logged), final errors (every status gets an ErrorInfo), logging,
// auth (bearer tokens and scopes, WithAuth; server/auth), the caller's rate
// limit (server/ratelimit), and the stream limits (per connection, and
// Session streams per server; server/limits). The tap (tap.go) has
// checked the token and taken the rate-limit token before any of them.
// Health and reflection skip auth and rate limits.
//
// # Errors
//
// errors.go is the one mapping from the core's typed errors to statuses:
// each carries a google.rpc.ErrorInfo (domain "exprd", a reason from
// proto/exprd/v1/errors.proto's ErrorReason), the details its code calls for, and a RetryInfo where a
// retry can help. What a client reads never holds a provider's or model
// server's own text; that goes to the log. An error the model should see
// is data in the answer, never a status.
//
// # Streams
//
// On Session, CodeMode.Run and AgentLoop.Run, each opened and closed by
// server/internal/stream's Stream:
//
//   - What the server sends is queued on the stream's outbox
//     and sent by a goroutine that runs while there is something to send:
//     no handler or worker blocks on a client that does not read. A queue
//     full for longer than the slow-reader timeout ends the stream
//     RESOURCE_EXHAUSTED.
//   - A request that waits for the client's reply (a confirm, a function
//     call, an approval, a hook, a client-run tool) is matched to it by a
//     correlator, under an id the server made or the
//     model's call id. A reply nobody waits for — late, repeated, unknown —
//     changes nothing and is answered with Rejected (NOT_FOUND, reason
//     REPLY_NOT_AWAITED); so is any other client message the stream cannot
//     use, and the stream goes on. The client's half-close cancels nothing:
//     what would wait for it is answered at once (declined, rejected, an
//     error result) and not sent.
//   - Every goroutine a handler starts is joined before it returns and
//     recovers its panics (the stream's Group, agent.Run for tool calls), but two: the
//     receiver of CodeMode.Run and AgentLoop.Run, blocked in Recv, and an
//     outbox sender blocked in Send. gRPC ends the stream when the handler
//     returns, and both then return; nothing they could still send is
//     taken.
//
// Defaults: evaluator.DefaultBudgets are the maxima a session may lower;
// the Default* constants of this package the rest.
package server
