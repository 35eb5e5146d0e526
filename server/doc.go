// Package server holds exprd's gRPC services. It is thin: it decodes a
// request, hands it to the core (evaluator/), and encodes what comes back.
// Only this package turns core errors into gRPC status codes.
//
// ExprTool's Session keeps a UI's state for the stream's life. Client
// messages are handled in order on the stream's goroutine; each Call runs on
// its own goroutine, so several calls may be in flight, and every one of
// them ends before the handler returns. A client message that cannot be used
// after Open is answered with Rejected and changes nothing; only a bad Open
// ends the stream (InvalidArgument).
//
// Defaults: evaluator.DefaultBudgets are the maxima a session may lower;
// DefaultMaxCallsInFlight calls per stream.
package server
