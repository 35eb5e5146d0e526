// Package mcptransport is the `mcp` call template of exprd's UTCP adapter:
// the tools of MCP servers, over the official Go SDK
// (github.com/modelcontextprotocol/go-sdk), as a utcp.Transport. A
// registry gets it with utcp.WithTransport(Type, New); utcpall.New does.
//
// # Template
//
//	{"call_template_type": "mcp",
//	 "config": {"mcpServers": {
//	   "docs":  {"transport": "http", "url": "https://mcp.example.com/mcp",
//	             "headers": {"Authorization": "Bearer ${TOKEN}"}, "timeout": 30},
//	   "files": {"transport": "stdio", "command": "/usr/bin/node",
//	             "args": ["server.js"], "env": {"ROOT": "/srv"}, "cwd": "/srv"}}},
//	 "auth": {"auth_type": "api_key", ...}}
//
// UTCP's shape. `transport` is "http" (streamable HTTP), "sse" (the
// 2024-11-05 HTTP+SSE transport) or "stdio"; without it, a server with a
// `command` is stdio and any other http. A server's `timeout` is in
// seconds (or a duration string) and becomes its tools' call timeout.
// `auth` is api_key (header, query or cookie) or basic, sent on every HTTP
// request; oauth2 is refused. ${VAR}s are the operator's variables bound
// to the manual, as in every template.
//
// Registering the template (utcp.FromTemplate; a --manuals-dir file; an
// inline manual_json over the API) connects to each server and reads
// every page of its tools/list (at most MaxListPages pages and
// MaxToolsPerServer tools, a clear error past either). Each tool is
// registered as `<manual>.<server>.<tool>`: its inputSchema and
// outputSchema are its inputs and outputs, compiled as every tool's are;
// its title and annotations (readOnlyHint, destructiveHint,
// idempotentHint, openWorldHint) are kept on the manual.Tool. Its own
// template is the registered template's one server as written, variables
// unresolved (utcp.DiscoveryTemplate), with `tool_name` (its name on the
// server) and `fingerprint` (of its definition): the manual a store
// shares holds no secret, and every replica connects to the server itself.
//
// # Calls
//
// A call is tools/call on the server's session. Its result is the
// structuredContent when it has one; else its one content item, or the
// list of them: text parsed as JSON when it is JSON, else the text; image
// and audio as {"type", "mime_type", "data" (base64)}; resource links and
// embedded resources as typed objects. isError: true is a
// *utcp.TransportError with ReasonToolError, whose text (the server's) is
// never shown: only its error type and code when it is a JSON object and
// the operator lets provider messages through (utcp.Env.ProviderFields).
// A JSON-RPC error is ReasonRPCError, shown with its code, never its
// message. A call whose context ends (its
// deadline, its caller's cancellation) makes the SDK send
// notifications/cancelled to the server and end the call's HTTP request:
// a server with sessions cancels the call on the notification; a
// stateless (2026-07-28) one sees its request end (a go-sdk server
// cancels its handler then only with PropagateRequestCancellation). Stream sends a progress token:
// each notifications/progress is a chunk, the result the last one.
//
// # User input
//
// exprd advertises elicitation in form mode (the SDK's default for an
// ElicitationHandler; not over HTTP+SSE, whose revision has none) and no
// sampling, roots or URL mode. A server's request for input is relayed to
// the user of the stream the call comes from: a stream that has one puts a
// userinput.Asker in the call's context (userinput.WithAsker; CodeMode.Run
// and AgentLoop.Run when their start sets relay_input_requests). On the
// 2026-07-28 revision the request comes in the call's input-required
// result and the SDK's multi-round-trip asks it under the call's own
// context, then calls again with the answer. On a session (2025-11-25,
// 2025-06-18) it is a request of its own that the SDK does not tie to a
// call: it is the call's when that call is the only one in flight on the
// session, and is otherwise refused (one caller's user is never asked
// another's question). The request is checked by userinput.NewRequest
// (userinput.MaxRequestBytes, its schema compiled as every tool schema
// is); the asker checks the reply against it (userinput.Request.CheckReply,
// userinput.MaxReplyBytes), and the SDK checks it again before it is sent.
// A call with no user to ask, a request that cannot be relayed, a user who
// does not answer, and what exprd never gives (sampling) fail the call
// with ReasonInputRequired, saying why; the session goes on.
//
// # Protocol revisions
//
// The SDK negotiates: it first asks server/discover at 2026-07-28 (the
// stateless revision, no session); a server that does not answer it, or
// has no common revision of that era, gets the legacy initialize
// handshake at 2025-11-25, and the server picks its revision (2025-11-25,
// 2025-06-18, 2025-03-26 or 2024-11-05), with a session.
//
// # Sessions
//
// One client session per server of a manual per registry, made on first
// use (a call or the registration) and reused by every call; one
// connection is made at a time, under ConnectTimeout, and every page of
// tools/list is read again on each. A session that ends is made again on
// the next call; a server that failed (a connection refused, a process
// that exited, a session that ended within StableAfter) is tried again
// only after a back-off from MinBackoff, doubled at each failure in a
// row, up to MaxBackoff; until then its error is returned at once. A
// session unused for IdleTimeout is closed (its process stopped). Close
// of the registry closes every session and stops every process.
//
// # Drift
//
// What a server lists is fingerprinted (name, title, description, input
// and output schemas, annotations). When it later lists another
// definition of a registered tool, or none (seen at a list_changed
// notification, RelistInterval apart at most, or at a reconnection), the
// registered definition is not replaced and the tool's calls are refused
// with ReasonDrift, nothing sent: the schema its arguments were checked
// against and the description its caller was shown are the registered
// ones, and a server that changes a tool after registration may have
// changed what a call does. Each change is logged and counted once
// (exprd.mcp.tool.drift; refused calls: exprd.mcp.drift.refused) and
// reported by utcp.Registry.Drift, which ListTools shows. Registering the
// manual again with replace adopts what the server lists.
//
// # Trust and limits
//
// Every HTTP connection goes through the registry's HTTP client: its
// egress dialer and policy, its redirect rule, no proxy; plain http://
// only to hosts the policy lists (refused at registration otherwise). An
// answer is bounded as every provider's: a JSON answer is read whole
// within the call's response limit (utcp.Env.ResponseLimit, so
// utcp.WithResponseLimit) and reserved from the memory budget as it is
// read; a call's event stream is bounded as a whole by the same limit,
// each event by the registry's WithMaxResponseBytes, and reserved as it is
// read; a stdio line by WithMaxResponseBytes, its result by the call's
// limit. What is not valid UTF-8 fails the call (ReasonMalformed). A
// server that sends more than NotificationRate messages a second unasked
// (NotificationBurst at once) has its session closed; a call that gets
// more than MaxProgressPerCall progress notifications fails.
//
// A stdio server runs a process on exprd's host, so only the operator may
// configure one: its template must be registered under utcp.WithOperator
// (LoadDir, for --manuals-dir), and is refused otherwise, at registration,
// saying why. Its environment is exactly the template's `env` (not
// exprd's, not even PATH); it runs in a process group of its own, its
// stderr logged line by line (MaxStderrLineBytes, StderrLinesPerMinute);
// at most MaxStdioServers run at once; it is stopped (stdin closed, then
// SIGTERM, then SIGKILL, StopGrace apart) when its session ends.
package mcptransport
