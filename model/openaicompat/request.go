package openaicompat

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/exprd/exprd/model"
)

// The request body, encoded with encoding/json into the fields servers
// know, and sent as it is.
type (
	wireRequest struct {
		Model               string          `json:"model"`
		Messages            []wireMessage   `json:"messages"`
		Tools               []wireTool      `json:"tools,omitempty"`
		ToolChoice          any             `json:"tool_choice,omitempty"`
		Temperature         *float64        `json:"temperature,omitempty"`
		TopP                *float64        `json:"top_p,omitempty"`
		MaxTokens           *int64          `json:"max_tokens,omitempty"`
		MaxCompletionTokens *int64          `json:"max_completion_tokens,omitempty"`
		Seed                *int64          `json:"seed,omitempty"`
		FrequencyPenalty    *float64        `json:"frequency_penalty,omitempty"`
		PresencePenalty     *float64        `json:"presence_penalty,omitempty"`
		Stop                []string        `json:"stop,omitempty"`
		ParallelToolCalls   *bool           `json:"parallel_tool_calls,omitempty"`
		Stream              bool            `json:"stream,omitempty"`
		StreamOptions       *wireStreamOpts `json:"stream_options,omitempty"`
	}
	wireStreamOpts struct {
		IncludeUsage bool `json:"include_usage"`
	}
	wireMessage struct {
		Role string `json:"role"`
		// Content is left out of an assistant message that only calls tools.
		Content    *string       `json:"content,omitempty"`
		ToolCalls  []wireCallOut `json:"tool_calls,omitempty"`
		ToolCallID string        `json:"tool_call_id,omitempty"`
	}
	wireCallOut struct {
		ID       string      `json:"id"`
		Type     string      `json:"type"`
		Function wireFuncOut `json:"function"`
	}
	wireFuncOut struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	wireTool struct {
		Type     string      `json:"type"`
		Function wireToolDef `json:"function"`
	}
	wireToolDef struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	wireNamedChoice struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
)

// emptySchema is sent for a tool without parameters: OpenAI accepts none,
// but some compatible servers require the field.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// buildBody encodes a validated request.
func (p *Provider) buildBody(req *model.Request) ([]byte, error) {
	w := wireRequest{Model: p.model, Stream: p.stream}
	if req.Model != "" {
		w.Model = req.Model
	}
	if p.stream && p.streamUsage {
		w.StreamOptions = &wireStreamOpts{IncludeUsage: true}
	}
	w.Messages = make([]wireMessage, len(req.Messages))
	for i := range req.Messages {
		m := &req.Messages[i]
		wm := wireMessage{Role: string(m.Role), ToolCallID: m.ToolCallID}
		if m.Content != "" || m.Role != model.RoleAssistant || len(m.ToolCalls) == 0 {
			wm.Content = &m.Content
		}
		for _, c := range m.ToolCalls {
			wm.ToolCalls = append(wm.ToolCalls, wireCallOut{ID: c.ID, Type: "function",
				Function: wireFuncOut{Name: c.Name, Arguments: c.Arguments}})
		}
		w.Messages[i] = wm
	}
	for _, t := range req.Tools {
		def := wireToolDef{Name: t.Name, Description: t.Description, Parameters: t.Parameters}
		if len(def.Parameters) == 0 {
			def.Parameters = emptySchema
		}
		w.Tools = append(w.Tools, wireTool{Type: "function", Function: def})
	}
	if len(req.Tools) > 0 { // without tools, a choice among them is noise some servers refuse
		switch c := req.ToolChoice; c.Mode {
		case model.ToolChoiceAuto, model.ToolChoiceNone, model.ToolChoiceRequired:
			w.ToolChoice = string(c.Mode)
		case model.ToolChoiceTool:
			named := wireNamedChoice{Type: "function"}
			named.Function.Name = c.Name
			w.ToolChoice = named
		}
	}
	pr := p.params.Merge(req.Params)
	w.Temperature, w.TopP, w.Seed = pr.Temperature, pr.TopP, pr.Seed
	w.FrequencyPenalty, w.PresencePenalty = pr.FrequencyPenalty, pr.PresencePenalty
	w.Stop = pr.Stop
	if p.maxTokensField == MaxCompletionTokensField {
		w.MaxCompletionTokens = pr.MaxTokens
	} else {
		w.MaxTokens = pr.MaxTokens
	}
	if len(req.Tools) > 0 {
		w.ParallelToolCalls = pr.ParallelToolCalls
	}

	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&w); err != nil {
		return nil, fmt.Errorf("%w: %w", model.ErrInvalidRequest, err)
	}
	body := bytes.TrimRight(buf.Bytes(), "\n")
	if len(pr.Extra) == 0 {
		return body, nil
	}
	// Extra fields go after the others; Params.Validate has made sure that
	// none of them is a field set above.
	extra, err := json.Marshal(pr.Extra)
	if err != nil {
		return nil, fmt.Errorf("%w: params.extra: %w", model.ErrInvalidRequest, err)
	}
	if len(extra) <= 2 {
		return body, nil
	}
	body = append(body[:len(body)-1], ',')
	return append(body, extra[1:]...), nil
}
