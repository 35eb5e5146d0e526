package model

import (
	"bytes"
	"encoding/json"
)

// Role is who speaks a [Message].
type Role string

// The roles of the chat-completions protocol.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one entry of a conversation.
type Message struct {
	Role Role `json:"role"`
	// Content is the text. An assistant message that only calls tools has none.
	Content string `json:"content,omitempty"`
	// ToolCalls are the calls an assistant message made.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID is, on a tool message, the id of the call it answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
}

// ToolCall is one call the model asked for.
type ToolCall struct {
	// ID names the call; the tool result answers it. A provider fills in an
	// id when the server sent none.
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments is the JSON text exactly as the model produced it (empty
	// arguments become "{}"). It may be malformed: see ArgumentsErr.
	Arguments string `json:"arguments"`
	// ArgumentsErr is nil when Arguments is one JSON object, else an
	// [*ArgumentsError] (errors.Is ErrInvalidArguments). The call is still
	// delivered, so the caller can answer it with an is_error tool result and
	// let the model fix it; a provider never fails a turn for it.
	ArgumentsErr error `json:"-"`
}

// System returns a system message.
func System(text string) Message { return Message{Role: RoleSystem, Content: text} }

// User returns a user message.
func User(text string) Message { return Message{Role: RoleUser, Content: text} }

// Assistant returns an assistant message with text, tool calls or both.
func Assistant(text string, calls ...ToolCall) Message {
	return Message{Role: RoleAssistant, Content: text, ToolCalls: calls}
}

// ToolResult returns the tool message that answers the call with that id.
func ToolResult(callID, content string) Message {
	return Message{Role: RoleTool, Content: content, ToolCallID: callID}
}

// NormalizeArguments returns the arguments to keep for a call whose model
// output was raw, and an [*ArgumentsError] when they are not one JSON
// object. Blank arguments, which several servers send for a tool without
// parameters, become "{}".
func NormalizeArguments(raw string) (string, error) {
	b := bytes.TrimSpace([]byte(raw))
	if len(b) == 0 {
		return "{}", nil
	}
	if !json.Valid(b) {
		return raw, &ArgumentsError{Reason: "are not valid JSON"}
	}
	if b[0] != '{' {
		return raw, &ArgumentsError{Reason: "are JSON but not an object"}
	}
	return raw, nil
}
