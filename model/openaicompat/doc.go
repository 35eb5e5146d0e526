// Package openaicompat is the [model.Provider] for OpenAI-compatible
// chat-completions servers: hosted APIs, Ollama, vLLM, llama.cpp and the
// like, over net/http.
//
// Providers are named in a config file ([LoadConfig], YAML or JSON) and
// built into a [model.Registry] ([NewRegistry]):
//
//	default: hosted
//	providers:
//	  hosted: {base_url: "https://api.openai.com/v1", api_key_env: OPENAI_API_KEY, model: gpt-4.1-mini}
//	  local:  {base_url: "http://127.0.0.1:11434/v1", model: "qwen3:8b", params: {temperature: 0.2}}
//
// API keys come only from the environment, by the variable's name in
// api_key_env; a key in the file is an error, and so is an api_key_env whose
// variable is unset. Nothing else is read from the environment: not
// OpenAI's OPENAI_* variables, so a hosted key never reaches a local server.
// Errors name the bad key as a path. Defaults: streamed replies with usage
// (stream, stream_usage), [DefaultMaxRetries] retries, backoff and
// Retry-After capped at [DefaultMaxRetryDelay], no per-attempt timeout (the
// caller's context bounds the turn), max_tokens sent as "max_tokens".
//
// A request is one POST of a body encoded here (request.go) to the base
// URL's chat/completions, with the bearer key, the config's headers and
// the retry's number (X-Stainless-Retry-Count, as OpenAI's clients send
// it). Redirects are not followed. Retries (retry.go): connection errors,
// 408, 409, 429 and 5xx, or whatever the server's X-Should-Retry says;
// never once a 2xx has arrived (so never after a stream has started), nor
// after a per-attempt timeout. The wait is the server's Retry-After-Ms or
// Retry-After (seconds or HTTP-date); one longer than the max retry delay,
// or ending past the caller's deadline, gets no retry, so the caller gets
// the 429 at once. Without one it is an exponential backoff from 0.5s, with
// jitter, up to the max retry delay. Waits end with the caller's context.
// Replies are read with encoding/json into the few fields a turn needs
// (wire.go), streams through internal/sse.
//
// The provider was built on github.com/openai/openai-go until it was
// measured: the SDK served one POST, its retry loop and its error type
// (its request params, SSE decoder and chunk types had already gone, for
// costing 2.9 times a bare net/http client's turn, BenchmarkStreamTurn),
// and it took 37 of the stripped exprd binary's 63 MB (expr's reflection
// keeps every exported method of its many types); exprd also started
// about 3 ms (10%) faster without it.
//
// Streams are read as servers really send them, not as the protocol says:
// the role only in the first chunk; a tool call's id and name only in its
// first delta, or on every delta, or never (an id is then generated, and
// a call that never gets a name is left out); an id two calls share (the
// second gets its own); tool calls without an index, or all at index 0
// each with its own id;
// arguments as a JSON object rather than a string; the deprecated
// function_call; usage missing, in the last chunk, or running on every chunk
// (the last report wins); chunks whose ids differ; a finish reason missing,
// or "stop" on a turn with tool calls; no [DONE] after the finish reason,
// or [DONE] as the body's last line without its blank line (any other
// event the body ends inside is a cut stream); comments, event names, CRLF
// or CR line ends; a JSON reply to a streamed request.
// Finish reasons map onto model's closed set: stop (also eos, end_turn,
// stop_sequence, none), tool_calls (also function_call, tool_use), length
// (also max_tokens, model_length), content_filter (also safety); any other
// is other. Only choice 0 is read.
//
// Errors: a refused request is a [*model.HTTPError] (status, upstream type,
// code and message from the first 64 KiB of its body, Retry-After,
// attempts made); the caller's deadline or
// cancellation is the context's error; no status at all (the connection
// failed, after any retries) is [model.ErrUnreachable]; the rest wrap
// model's sentinels. Every error names the provider.
//
// A request offering no tools carries neither "tools" nor "tool_choice":
// some compatible servers refuse a tool choice without tools.
//
// A stream starts no goroutine: Recv reads in the caller's goroutine, and
// Close aborts the request. [Provider.Close] releases idle connections.
package openaicompat
