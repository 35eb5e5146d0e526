package model

// FinishReason says why the model stopped. Providers map the server's value
// onto this closed set; the server's own word stays in
// Response.RawFinishReason.
type FinishReason string

// The finish reasons.
const (
	// FinishStop: the model finished its answer (or hit a stop sequence).
	FinishStop FinishReason = "stop"
	// FinishToolCalls: the model stopped to have its tool calls run.
	FinishToolCalls FinishReason = "tool-calls"
	// FinishLength: the reply hit max_tokens or the context length; its tool
	// calls, if any, are likely cut short.
	FinishLength FinishReason = "length"
	// FinishContentFilter: the server withheld (part of) the reply.
	FinishContentFilter FinishReason = "content-filter"
	// FinishOther: a reason this package does not know; see RawFinishReason.
	FinishOther FinishReason = "other"
)

// Usage counts tokens. A server that reports none leaves it zero.
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

// Response is a whole model turn: the last event of a [Stream], and what
// [Complete] returns.
type Response struct {
	// ID is the server's completion id, when it sent one.
	ID string
	// Model is the model that answered, as the server named it.
	Model string
	// Message is the assistant message, with Content and ToolCalls
	// assembled. Send it back as it is in the next request.
	Message Message
	// Refusal is the model's refusal text, when it refused.
	Refusal      string
	FinishReason FinishReason
	// RawFinishReason is the server's own finish reason, "" when it sent none.
	RawFinishReason string
	Usage           Usage
}

func (Response) event() {}
