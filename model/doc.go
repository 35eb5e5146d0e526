// Package model is the language-model interface of exprd: one model turn
// (a [Request] of messages, tools and tool choice), streamed back as events
// and assembled into a [Response]. Providers live in subpackages
// (openaicompat for any OpenAI-compatible server); scripted is a server that
// replays fixed turns for tests and demos.
//
// A turn:
//
//	s, err := p.Stream(ctx, model.Request{
//		Messages: []model.Message{model.System("..."), model.User("Which products...?")},
//		Tools:    []model.Tool{{Name: "expr", Description: "...", Parameters: schema}},
//	})
//	for {
//		ev, err := s.Recv() // TextDelta, ToolCallDelta..., then one Response, then io.EOF
//		...
//	}
//
// or [Complete] for the Response alone. The contract every [Provider]
// keeps:
//
//   - A stream ends with exactly one [Response] and then io.EOF, or with an
//     error and no Response. A reply that breaks off (a dropped connection,
//     a body that stops before its finish reason) is [ErrStreamCut], never
//     a clean end.
//   - The Response's Message is the assistant message to send back as it is:
//     its text and its tool calls, each with an id (generated when the
//     server sent none) and its arguments as the model wrote them.
//   - Bad model output is data, not a failure: a call whose arguments are
//     not one JSON object carries them raw with [ToolCall.ArgumentsErr] set
//     ([ErrInvalidArguments]), so the caller answers it with an is_error
//     tool result; a finish reason this package does not know is
//     [FinishOther] with the server's word in RawFinishReason. A reply with
//     no choice at all is [ErrNoChoices]; a chunk that is not JSON is
//     [ErrMalformedChunk]; an error the server sends mid-stream is
//     [ErrModelReported]; a reply over the provider's size limit is
//     [ErrReplyTooLarge].
//   - Finish reasons are a closed set: stop, tool-calls, length,
//     content-filter, other. A reply that has tool calls but says "stop"
//     (or nothing) is tool-calls.
//   - Usage is zero when the server reports none.
//   - The caller's context bounds the whole turn, reading included; its
//     deadline and cancellation reach the HTTP request.
//   - An invalid Request is refused before anything is sent
//     ([ErrInvalidRequest], naming the bad entry).
//
// Providers are named in a [Registry] and picked per request by name;
// asking for a name it does not hold is an [*UnknownProviderError] that
// lists the names there are.
package model
