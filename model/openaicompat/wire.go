package openaicompat

import (
	"bytes"
	"encoding/json"
)

// The fields of a reply that a turn needs. Fields are as lenient
// as encoding/json allows: null is the zero value, and a field a server
// adds is ignored.
type (
	// wireChunk leaves out id and model, which a turn reads once, from its
	// first chunk (wireHead): decoding them from every chunk costs two
	// allocations a chunk.
	wireChunk struct {
		Choices []wireChoice    `json:"choices"`
		Usage   *wireUsage      `json:"usage"`
		Error   json.RawMessage `json:"error"`
	}
	wireHead struct {
		ID    string `json:"id"`
		Model string `json:"model"`
	}
	wireChoice struct {
		Index        int64     `json:"index"`
		Delta        wireDelta `json:"delta"`
		FinishReason string    `json:"finish_reason"`
	}
	wireDelta struct {
		Content   string         `json:"content"`
		Refusal   string         `json:"refusal"`
		ToolCalls []wireToolCall `json:"tool_calls"`
		// FunctionCall is the deprecated single call of older servers.
		FunctionCall *wireFunction `json:"function_call"`
	}
	wireToolCall struct {
		// Index is nil when the server sent none.
		Index    *int64       `json:"index"`
		ID       string       `json:"id"`
		Type     string       `json:"type"`
		Function wireFunction `json:"function"`
	}
	wireFunction struct {
		Name      string  `json:"name"`
		Arguments argText `json:"arguments"`
	}
	// wireCompletion is a reply that came in one piece: not streamed, or
	// from a server that ignores "stream". Its message has a delta's fields.
	wireCompletion struct {
		ID      string `json:"id"`
		Model   string `json:"model"`
		Choices []struct {
			Index        int64     `json:"index"`
			Message      wireDelta `json:"message"`
			FinishReason string    `json:"finish_reason"`
		} `json:"choices"`
		Usage *wireUsage `json:"usage"`
	}
	wireUsage struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
		TotalTokens      int64 `json:"total_tokens"`
	}
)

// argText is a call's arguments: a JSON string holding JSON text, as the
// protocol says, or (from servers that stray) the JSON object itself.
type argText string

// UnmarshalJSON keeps a string's content, and any other value's JSON text.
func (a *argText) UnmarshalJSON(b []byte) error {
	switch {
	case bytes.Equal(b, nullValue):
		*a = ""
	case len(b) > 1 && b[0] == '"' && bytes.IndexByte(b, '\\') < 0:
		// No escapes: the content is the text between the quotes (the
		// decoder has already checked the whole chunk).
		*a = argText(b[1 : len(b)-1])
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*a = argText(s)
	default:
		*a = argText(b)
	}
	return nil
}
