package model

import (
	"bytes"
	"encoding/json"
)

// Tool describes a function the model may call.
type Tool struct {
	// Name is what the model calls it by. OpenAI accepts only
	// [a-zA-Z0-9_-]{1,64}; other servers are laxer, so this package only
	// requires a name, unique within a request.
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Parameters is the JSON Schema of the call's argument object. Empty
	// means no parameters: providers send {"type":"object","properties":{}},
	// which every compatible server accepts.
	Parameters json.RawMessage `json:"parameters,omitempty"`
}

// ToolChoiceMode says whether and which tool the model must call.
type ToolChoiceMode string

// The tool choices. The zero ToolChoice sends none, and servers then choose
// auto when the request has tools.
const (
	ToolChoiceAuto     ToolChoiceMode = "auto"
	ToolChoiceNone     ToolChoiceMode = "none"
	ToolChoiceRequired ToolChoiceMode = "required"
	// ToolChoiceTool forces the tool named by ToolChoice.Name.
	ToolChoiceTool ToolChoiceMode = "tool"
)

// ToolChoice constrains the model's use of the request's tools. A request
// without tools sends no choice at all, whatever its mode (auto and none
// then mean the same, and required or a named tool are refused).
type ToolChoice struct {
	Mode ToolChoiceMode `json:"mode,omitempty"`
	// Name is the tool to call, with ToolChoiceTool only.
	Name string `json:"name,omitempty"`
}

// ChooseTool forces the model to call the named tool.
func ChooseTool(name string) ToolChoice { return ToolChoice{Mode: ToolChoiceTool, Name: name} }

// isJSONObject reports whether b is one valid JSON object.
func isJSONObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}
