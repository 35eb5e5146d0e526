package model_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/exprd/exprd/model"
)

func ptr[T any](v T) *T { return &v }

func TestRequestValidate(t *testing.T) {
	t.Parallel()
	user := []model.Message{model.User("hi")}
	tools := []model.Tool{{Name: "search"}, {Name: "fetch", Parameters: json.RawMessage(`{"type":"object"}`)}}
	tests := []struct {
		name    string
		req     model.Request
		wantErr string // "" when valid; else a part of the message
	}{
		{"minimal", model.Request{Messages: user}, ""},
		{"a whole conversation", model.Request{
			Messages: []model.Message{
				model.System("be brief"), model.User("find lamps"),
				model.Assistant("", model.ToolCall{ID: "c1", Name: "search", Arguments: `{"q":"lamp"}`}),
				model.ToolResult("c1", `{"hits":2}`), model.Assistant("Two lamps."),
			},
			Tools: tools, ToolChoice: model.ChooseTool("fetch"),
		}, ""},
		{"no messages", model.Request{}, "messages: none"},
		{"unknown role", model.Request{Messages: []model.Message{{Role: "robot"}}}, `messages[0]: unknown role "robot"`},
		{"tool result without call id", model.Request{Messages: []model.Message{model.User("x"), {Role: model.RoleTool, Content: "r"}}}, "messages[1]: a tool message needs the tool_call_id"},
		{"user with tool calls", model.Request{Messages: []model.Message{{Role: model.RoleUser, ToolCalls: []model.ToolCall{{ID: "a", Name: "b"}}}}}, "messages[0]: a user message cannot carry tool calls"},
		{"assistant call without id", model.Request{Messages: []model.Message{model.Assistant("", model.ToolCall{Name: "search"})}}, "messages[0]: tool_calls[0]: a call needs an id and a name"},
		{"assistant with tool_call_id", model.Request{Messages: []model.Message{{Role: model.RoleAssistant, ToolCallID: "x"}}}, "messages[0]: an assistant message has no tool_call_id"},
		{"tool without name", model.Request{Messages: user, Tools: []model.Tool{{}}}, "tools[0]: no name"},
		{"duplicate tool", model.Request{Messages: user, Tools: []model.Tool{{Name: "a"}, {Name: "a"}}}, `tools[1]: duplicate name "a"`},
		{"parameters not an object", model.Request{Messages: user, Tools: []model.Tool{{Name: "a", Parameters: json.RawMessage(`[1]`)}}}, "tools[0] (a): parameters are not a JSON object"},
		{"parameters not JSON", model.Request{Messages: user, Tools: []model.Tool{{Name: "a", Parameters: json.RawMessage(`{`)}}}, "tools[0] (a): parameters are not a JSON object"},
		{"choice names a missing tool", model.Request{Messages: user, Tools: tools, ToolChoice: model.ChooseTool("nope")}, `tool_choice: names tool "nope"`},
		{"required without tools", model.Request{Messages: user, ToolChoice: model.ToolChoice{Mode: model.ToolChoiceRequired}}, "tool_choice: required, but the request has no tools"},
		{"required with tools", model.Request{Messages: user, Tools: tools, ToolChoice: model.ToolChoice{Mode: model.ToolChoiceRequired}}, ""},
		{"none", model.Request{Messages: user, Tools: tools, ToolChoice: model.ToolChoice{Mode: model.ToolChoiceNone}}, ""},
		{"unknown mode", model.Request{Messages: user, ToolChoice: model.ToolChoice{Mode: "sometimes"}}, `tool_choice: unknown mode "sometimes"`},
		{"name with mode auto", model.Request{Messages: user, Tools: tools, ToolChoice: model.ToolChoice{Mode: model.ToolChoiceAuto, Name: "search"}}, `tool_choice: a name ("search") goes only with mode "tool"`},
		{"bad params", model.Request{Messages: user, Params: model.Params{Temperature: ptr(3.0)}}, "params.temperature: 3 is out of range [0, 2]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.req.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
			}
			if !errors.Is(err, model.ErrInvalidRequest) {
				t.Errorf("got %v, want it to wrap ErrInvalidRequest", err)
			}
		})
	}
}

// TestParamsLimits checks each limit at the limit and one past it.
func TestParamsLimits(t *testing.T) {
	t.Parallel()
	up := func(v float64) float64 { return math.Nextafter(v, math.Inf(1)) }
	down := func(v float64) float64 { return math.Nextafter(v, math.Inf(-1)) }
	tests := []struct {
		name    string
		p       model.Params
		wantErr string
	}{
		{"temperature at max", model.Params{Temperature: ptr(model.MaxTemperature)}, ""},
		{"temperature past max", model.Params{Temperature: ptr(up(model.MaxTemperature))}, "temperature:"},
		{"temperature at min", model.Params{Temperature: ptr(model.MinTemperature)}, ""},
		{"temperature past min", model.Params{Temperature: ptr(down(model.MinTemperature))}, "temperature:"},
		{"temperature NaN", model.Params{Temperature: ptr(math.NaN())}, "temperature:"},
		{"top_p at max", model.Params{TopP: ptr(model.MaxTopP)}, ""},
		{"top_p past max", model.Params{TopP: ptr(up(model.MaxTopP))}, "top_p:"},
		{"top_p past min", model.Params{TopP: ptr(down(model.MinTopP))}, "top_p:"},
		{"frequency_penalty at max", model.Params{FrequencyPenalty: ptr(model.MaxPenalty)}, ""},
		{"frequency_penalty past max", model.Params{FrequencyPenalty: ptr(up(model.MaxPenalty))}, "frequency_penalty:"},
		{"presence_penalty at min", model.Params{PresencePenalty: ptr(model.MinPenalty)}, ""},
		{"presence_penalty past min", model.Params{PresencePenalty: ptr(down(model.MinPenalty))}, "presence_penalty:"},
		{"max_tokens at min", model.Params{MaxTokens: ptr(int64(model.MinMaxTokens))}, ""},
		{"max_tokens past min", model.Params{MaxTokens: ptr(int64(model.MinMaxTokens - 1))}, "max_tokens: 0 is less than 1"},
		{"empty stop", model.Params{Stop: []string{"\n", ""}}, "stop[1]: empty stop sequence"},
		{"extra of its own", model.Params{Extra: map[string]any{"top_k": 40, "min_p": 0.05}}, ""},
		{"extra names a field", model.Params{Extra: map[string]any{"top_k": 40, "temperature": 1}}, "extra.temperature: a field the provider sets itself"},
		{"extra names messages", model.Params{Extra: map[string]any{"messages": nil}}, "extra.messages:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.p.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("got %v, want no error", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestParamsMerge(t *testing.T) {
	t.Parallel()
	base := model.Params{Temperature: ptr(0.2), MaxTokens: ptr(int64(100)), Stop: []string{"x"},
		Extra: map[string]any{"top_k": 40, "min_p": 0.1}}
	got := base.Merge(model.Params{Temperature: ptr(0.7), Seed: ptr(int64(7)), Extra: map[string]any{"top_k": 10}})
	if *got.Temperature != 0.7 || *got.MaxTokens != 100 || *got.Seed != 7 || got.Stop[0] != "x" {
		t.Errorf("got temperature %v, max_tokens %v, seed %v, stop %v; want 0.7, 100, 7, [x]",
			*got.Temperature, *got.MaxTokens, *got.Seed, got.Stop)
	}
	if got.Extra["top_k"] != 10 || got.Extra["min_p"] != 0.1 {
		t.Errorf("got extra %v, want top_k 10 and min_p 0.1", got.Extra)
	}
	if base.Extra["top_k"] != 40 {
		t.Errorf("got base extra top_k %v after Merge, want 40 (unchanged)", base.Extra["top_k"])
	}
	if got := base.Merge(model.Params{}); *got.Temperature != 0.2 || len(got.Extra) != 2 {
		t.Errorf("merging nothing changed the params: got %+v", got)
	}
}

func TestNormalizeArguments(t *testing.T) {
	t.Parallel()
	tests := []struct {
		raw, want string
		wantErr   string
	}{
		{`{"q":"lamp"}`, `{"q":"lamp"}`, ""},
		{` { } `, ` { } `, ""},
		{"", "{}", ""},
		{" \n\t", "{}", ""},
		{`{"q":`, `{"q":`, "are not valid JSON"},
		{`{"q":"lamp"}}`, `{"q":"lamp"}}`, "are not valid JSON"},
		{`[1,2]`, `[1,2]`, "are JSON but not an object"},
		{`"{\"q\":1}"`, `"{\"q\":1}"`, "are JSON but not an object"},
		{`null`, `null`, "are JSON but not an object"},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			t.Parallel()
			got, err := model.NormalizeArguments(tt.raw)
			if got != tt.want {
				t.Errorf("got arguments %q, want %q", got, tt.want)
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Errorf("got %v, want no error", err)
				}
				return
			}
			if !errors.Is(err, model.ErrInvalidArguments) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("got error %v, want ErrInvalidArguments saying %q", err, tt.wantErr)
			}
			var ae *model.ArgumentsError
			if !errors.As(err, &ae) {
				t.Errorf("got %T, want *model.ArgumentsError", err)
			}
		})
	}
}
