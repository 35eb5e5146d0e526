package model

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
)

// Limits on sampling parameters: the ranges of the OpenAI API, which the
// compatible servers share.
const (
	MinTemperature = 0.0
	MaxTemperature = 2.0
	MinTopP        = 0.0
	MaxTopP        = 1.0
	MinPenalty     = -2.0
	MaxPenalty     = 2.0
	// MinMaxTokens is the smallest max_tokens there is any point in asking for.
	MinMaxTokens = 1
)

// Request is one model turn: the conversation so far, the tools on offer,
// and how to sample.
type Request struct {
	Messages   []Message
	Tools      []Tool
	ToolChoice ToolChoice
	// Model overrides the provider's model name for this turn; empty keeps it.
	Model string
	// Params override the provider's parameters field by field (see
	// [Params.Merge]).
	Params Params
}

// Params are sampling parameters. A nil field is unset: the provider's
// configured value applies, or else the server's default.
type Params struct {
	Temperature      *float64 `json:"temperature,omitempty"`
	TopP             *float64 `json:"top_p,omitempty"`
	MaxTokens        *int64   `json:"max_tokens,omitempty"`
	Seed             *int64   `json:"seed,omitempty"`
	FrequencyPenalty *float64 `json:"frequency_penalty,omitempty"`
	PresencePenalty  *float64 `json:"presence_penalty,omitempty"`
	Stop             []string `json:"stop,omitempty"`
	// ParallelToolCalls lets the model call several tools in one turn.
	ParallelToolCalls *bool `json:"parallel_tool_calls,omitempty"`
	// Extra fields are added to the request body as they are, for a server's
	// own parameters (top_k, min_p, repeat_penalty, ...). They cannot replace
	// a field the provider sets itself (see [ReservedBodyFields]).
	Extra map[string]any `json:"extra,omitempty"`
}

// ReservedBodyFields are the request body fields that providers set from the
// Request and its Params: Params.Extra may not name them.
var ReservedBodyFields = []string{
	"frequency_penalty", "max_completion_tokens", "max_tokens", "messages", "model",
	"parallel_tool_calls", "presence_penalty", "seed", "stop", "stream", "stream_options",
	"temperature", "tool_choice", "tools", "top_p",
}

// Merge returns p with every field that over sets replaced by over's value.
// Extra is merged key by key.
func (p Params) Merge(over Params) Params {
	out := p
	setIf(&out.Temperature, over.Temperature)
	setIf(&out.TopP, over.TopP)
	setIf(&out.MaxTokens, over.MaxTokens)
	setIf(&out.Seed, over.Seed)
	setIf(&out.FrequencyPenalty, over.FrequencyPenalty)
	setIf(&out.PresencePenalty, over.PresencePenalty)
	setIf(&out.ParallelToolCalls, over.ParallelToolCalls)
	if over.Stop != nil {
		out.Stop = over.Stop
	}
	if len(over.Extra) > 0 {
		merged := make(map[string]any, len(p.Extra)+len(over.Extra))
		for k, v := range p.Extra {
			merged[k] = v
		}
		for k, v := range over.Extra {
			merged[k] = v
		}
		out.Extra = merged
	}
	return out
}

func setIf[T any](dst **T, v *T) {
	if v != nil {
		*dst = v
	}
}

// Validate reports the first parameter out of range, naming it as in JSON.
func (p Params) Validate() error {
	checks := []struct {
		name     string
		v        *float64
		min, max float64
	}{
		{"temperature", p.Temperature, MinTemperature, MaxTemperature},
		{"top_p", p.TopP, MinTopP, MaxTopP},
		{"frequency_penalty", p.FrequencyPenalty, MinPenalty, MaxPenalty},
		{"presence_penalty", p.PresencePenalty, MinPenalty, MaxPenalty},
	}
	for _, c := range checks {
		if c.v == nil {
			continue
		}
		if math.IsNaN(*c.v) || *c.v < c.min || *c.v > c.max {
			return fmt.Errorf("%s: %v is out of range [%v, %v]", c.name, *c.v, c.min, c.max)
		}
	}
	if p.MaxTokens != nil && *p.MaxTokens < MinMaxTokens {
		return fmt.Errorf("max_tokens: %d is less than %d", *p.MaxTokens, MinMaxTokens)
	}
	for i, s := range p.Stop {
		if s == "" {
			return fmt.Errorf("stop[%d]: empty stop sequence", i)
		}
	}
	keys := make([]string, 0, len(p.Extra))
	for k := range p.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if slices.Contains(ReservedBodyFields, k) {
			return fmt.Errorf("extra.%s: a field the provider sets itself (use the parameter of that name)", k)
		}
	}
	return nil
}

// Validate reports the first reason the request cannot be sent, wrapping
// [ErrInvalidRequest] and naming the bad entry.
func (r *Request) Validate() error {
	if err := r.validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	return nil
}

func (r *Request) validate() error {
	if len(r.Messages) == 0 {
		return errors.New("messages: none")
	}
	for i, m := range r.Messages {
		if err := m.validate(); err != nil {
			return fmt.Errorf("messages[%d]: %w", i, err)
		}
	}
	names := make(map[string]bool, len(r.Tools))
	for i, t := range r.Tools {
		switch {
		case t.Name == "":
			return fmt.Errorf("tools[%d]: no name", i)
		case names[t.Name]:
			return fmt.Errorf("tools[%d]: duplicate name %q", i, t.Name)
		case len(t.Parameters) > 0 && !isJSONObject(t.Parameters):
			return fmt.Errorf("tools[%d] (%s): parameters are not a JSON object", i, t.Name)
		}
		names[t.Name] = true
	}
	if err := r.ToolChoice.validate(names); err != nil {
		return fmt.Errorf("tool_choice: %w", err)
	}
	if err := r.Params.Validate(); err != nil {
		return fmt.Errorf("params.%w", err)
	}
	return nil
}

func (m *Message) validate() error {
	switch m.Role {
	case RoleSystem, RoleUser:
		if len(m.ToolCalls) > 0 || m.ToolCallID != "" {
			return fmt.Errorf("a %s message cannot carry tool calls", m.Role)
		}
	case RoleAssistant:
		if m.ToolCallID != "" {
			return errors.New("an assistant message has no tool_call_id")
		}
		for j, c := range m.ToolCalls {
			if c.ID == "" || c.Name == "" {
				return fmt.Errorf("tool_calls[%d]: a call needs an id and a name", j)
			}
		}
	case RoleTool:
		if m.ToolCallID == "" {
			return errors.New("a tool message needs the tool_call_id it answers")
		}
	default:
		return fmt.Errorf("unknown role %q", m.Role)
	}
	return nil
}

func (c ToolChoice) validate(tools map[string]bool) error {
	switch c.Mode {
	case "", ToolChoiceAuto, ToolChoiceNone:
	case ToolChoiceRequired:
		if len(tools) == 0 {
			return errors.New("required, but the request has no tools")
		}
	case ToolChoiceTool:
		if !tools[c.Name] {
			return fmt.Errorf("names tool %q, which the request does not have", c.Name)
		}
		return nil
	default:
		return fmt.Errorf("unknown mode %q", c.Mode)
	}
	if c.Name != "" {
		return fmt.Errorf("a name (%q) goes only with mode %q", c.Name, ToolChoiceTool)
	}
	return nil
}
