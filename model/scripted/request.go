package scripted

import (
	"encoding/json"
	"net/http"
	"strings"
)

// Request is a request the server got, as it got it.
type Request struct {
	// N is the request's place in the order of arrival, from 0.
	N int
	// Turn is the index of the turn that answered it, -1 when none did (a
	// malformed request, a bad key, no matching turn).
	Turn   int
	Method string
	Path   string
	Header http.Header
	// Body is the raw body.
	Body json.RawMessage
	// Chat is the body decoded (the zero value when it was not JSON).
	Chat ChatRequest
	// Aborted is true when the client went away (deadline, cancellation,
	// closing the stream) before the reply was complete.
	Aborted bool
}

// ChatRequest is a chat-completions request body.
type ChatRequest struct {
	Model         string          `json:"model"`
	Messages      []ChatMessage   `json:"messages"`
	Tools         []ChatTool      `json:"tools,omitempty"`
	ToolChoice    json.RawMessage `json:"tool_choice,omitempty"`
	Stream        bool            `json:"stream,omitempty"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options,omitempty"`
	// Fields holds every top-level field, raw, for anything else
	// (temperature, max_tokens, a server's own parameters).
	Fields map[string]json.RawMessage `json:"-"`
}

// IncludeUsage reports whether a streamed request asked for usage.
func (r *ChatRequest) IncludeUsage() bool {
	return r.StreamOptions != nil && r.StreamOptions.IncludeUsage
}

// LastUser returns the text of the last user message, "" when there is none.
func (r *ChatRequest) LastUser() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Content
		}
	}
	return ""
}

// ChatMessage is one message of a request.
type ChatMessage struct {
	Role string
	// Content is the text; content parts are joined.
	Content    string
	ToolCalls  []ChatToolCall
	ToolCallID string
}

// UnmarshalJSON accepts content as a string, null, or an array of parts.
func (m *ChatMessage) UnmarshalJSON(b []byte) error {
	var raw struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCalls  []ChatToolCall  `json:"tool_calls"`
		ToolCallID string          `json:"tool_call_id"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*m = ChatMessage{Role: raw.Role, ToolCalls: raw.ToolCalls, ToolCallID: raw.ToolCallID}
	if len(raw.Content) == 0 || string(raw.Content) == "null" {
		return nil
	}
	if raw.Content[0] == '"' {
		return json.Unmarshal(raw.Content, &m.Content)
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw.Content, &parts); err != nil {
		return err
	}
	var sb strings.Builder
	for _, p := range parts {
		sb.WriteString(p.Text)
	}
	m.Content = sb.String()
	return nil
}

// ChatToolCall is a tool call in an assistant message of a request.
type ChatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// ChatTool is a tool definition of a request.
type ChatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	} `json:"function"`
}

func decodeChat(body []byte) (ChatRequest, error) {
	var c ChatRequest
	if err := json.Unmarshal(body, &c); err != nil {
		return ChatRequest{}, err
	}
	if err := json.Unmarshal(body, &c.Fields); err != nil {
		return ChatRequest{}, err
	}
	return c, nil
}
