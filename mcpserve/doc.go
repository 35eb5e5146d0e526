// Package mcpserve serves exprd's tool registry to MCP hosts: one
// streamable-HTTP endpoint (/mcp) on the official Go SDK, stateless, so
// that any replica answers any request and clients of the 2026-07-28
// revision (server/discover, no session) and of the older ones
// (2025-11-25, 2025-06-18: initialize, then each request on its own) get
// the same tools.
//
// What it serves (Config.Expose):
//
//   - code mode: three tools, named as @utcp/code-mode-mcp names them.
//     search_tools(task_description, limit) ranks the registry with its one
//     search and renders each tool in a line (name, signature,
//     description); tools_info(names) gives the full schemas;
//     call_tool_chain(code, timeout) runs an Expr program through CodeMode
//     (codemode.Runtime.Run, as CodeMode.Execute does), its whitelist the
//     tools its source names, under every budget of a CodeMode run, and
//     answers the value and the trace of its calls as structuredContent.
//   - gateway mode: the registry's tools themselves, listed a page at a
//     time, each call made by the registry (the same executor, egress
//     policy and answer limits as a CodeMode call) under a time budget.
//
// A tool that needs approval (Config.NeedsApproval) is never run unasked:
// a client of the 2026-07-28 revision that can elicit is asked through
// input_required, with a request state signed by Config.ApprovalKey that
// carries what was asked (approval.go); any other is refused with a tool
// error. Nothing writes the registry.
//
// Every request passes, in order: the bound on requests in flight, the
// bearer token (before any byte of the body is read), the caller's rate
// limit (gRPC's buckets, Config.RateLimit), its bound on requests in
// flight, the overload manager, and the memory budget for its body; then the SDK reads at most
// Limits.MaxBodyBytes of it. Mistakes the model should fix are tool
// results with isError; malformed requests are JSON-RPC errors.
//
// Each request is an OpenTelemetry server span, the child of the trace
// context its _meta carries (tracing.go).
package mcpserve
