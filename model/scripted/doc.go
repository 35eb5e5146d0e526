// Package scripted is a chat-completions server that replays a script: a
// real HTTP server on 127.0.0.1 speaking the OpenAI protocol, streamed (SSE
// "data: {...}" chunks ending with "data: [DONE]") and not. Tests of the
// model provider, CodeMode and AgentLoop point a provider at it and assert
// what the model was sent; `exprd --demo` uses [Demo] as its model.
//
// A script in JSON ([ParseScript]):
//
//	{"loop": false, "turns": [
//	  {"text": "Let me look.", "tool_calls": [{"id": "call_1", "name": "search",
//	     "arguments": {"q": "lamps"}}], "usage": {"prompt_tokens": 20, "completion_tokens": 9}},
//	  {"error": {"status": 429, "retry_after": "1"}},
//	  {"match": {"last_role": "tool"}, "text": "Two lamps.", "chunk_delay_ms": 5}
//	]}
//
// The contract:
//
//   - Each request gets the first unused turn, in order, that fits it (a
//     turn without Match fits any request); with Loop the script starts over
//     once no turn is left. A request no turn fits gets 400 with error type
//     "script_mismatch" and a message naming the request.
//   - A turn streams as OpenAI does: the role, the text piece by piece, each
//     tool call's id and name then its arguments in 16-byte pieces, the
//     finish reason (default: "tool_calls" with tool calls, else "stop"),
//     the usage when the request asked for it, then [DONE]. A non-streamed
//     request gets one chat.completion body.
//   - Faults are part of a turn: an HTTP error with body, Retry-After and
//     other headers, delays before the reply and between chunks, a
//     connection dropped mid-stream (CutAfter), a body that just stops
//     (EndAfter), a malformed chunk, a whole reply to a streamed request
//     (IgnoreStream); and for anything else raw chunks, a raw SSE body or a
//     raw JSON body.
//   - Every request is recorded ([Server.Requests]): headers, raw body, the
//     body decoded, the turn that answered, and whether the client went away
//     before the reply was complete (its deadline or cancellation reached
//     the server).
//   - The server answers POST /v1/chat/completions and GET /v1/models (with
//     or without /v1), checks the bearer token when the script sets APIKey,
//     and bounds request bodies to [MaxRequestBytes].
//
// It starts goroutines (one per connection); [Server.Close] ends them all
// and waits for them.
package scripted
