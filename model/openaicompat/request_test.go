package openaicompat_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/model/openaicompat"
	"github.com/exprd/exprd/model/scripted"
)

// sent runs a turn and returns the request the server got.
func sent(t *testing.T, edit func(*openaicompat.ProviderConfig), req model.Request, opts ...openaicompat.Option) scripted.Request {
	t.Helper()
	srv := serve(t, ok)
	p := provider(t, srv, edit, opts...)
	if _, _, err := turn(t, p, req); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("got %d requests, want 1", len(reqs))
	}
	return reqs[0]
}

func TestRequestMessages(t *testing.T) {
	t.Parallel()
	req := model.Request{
		Messages: []model.Message{
			model.System("Be brief. <b>HTML</b> & co."),
			model.User("Find lamps under 50."),
			model.Assistant("Looking.", model.ToolCall{ID: "c1", Name: "search", Arguments: `{"q":"lamp"}`}),
			model.ToolResult("c1", `{"hits":2}`),
			model.Assistant("", model.ToolCall{ID: "c2", Name: "rate", Arguments: `{"q": broken`}),
			model.ToolResult("c2", `{"error":"invalid JSON arguments"}`),
			model.Assistant("Two lamps."),
			model.User(""),
		},
		Tools: []model.Tool{
			{Name: "search", Description: "Searches products.", Parameters: json.RawMessage(`{"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}`)},
			{Name: "now"},
		},
	}
	r := sent(t, nil, req)
	var body struct {
		Messages []json.RawMessage `json:"messages"`
		Tools    []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"role":"system","content":"Be brief. <b>HTML</b> & co."}`,
		`{"role":"user","content":"Find lamps under 50."}`,
		`{"role":"assistant","content":"Looking.","tool_calls":[{"id":"c1","type":"function","function":{"name":"search","arguments":"{\"q\":\"lamp\"}"}}]}`,
		`{"role":"tool","content":"{\"hits\":2}","tool_call_id":"c1"}`,
		`{"role":"assistant","tool_calls":[{"id":"c2","type":"function","function":{"name":"rate","arguments":"{\"q\": broken"}}]}`,
		`{"role":"tool","content":"{\"error\":\"invalid JSON arguments\"}","tool_call_id":"c2"}`,
		`{"role":"assistant","content":"Two lamps."}`,
		`{"role":"user","content":""}`,
	}
	if len(body.Messages) != len(want) {
		t.Fatalf("got %d messages, want %d", len(body.Messages), len(want))
	}
	for i, m := range body.Messages {
		if string(m) != want[i] {
			t.Errorf("message %d:\n got %s\nwant %s", i, m, want[i])
		}
	}
	wantTools := []string{
		`{"type":"function","function":{"name":"search","description":"Searches products.","parameters":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}}}`,
		`{"type":"function","function":{"name":"now","parameters":{"type":"object","properties":{}}}}`,
	}
	for i, tool := range body.Tools {
		if string(tool) != wantTools[i] {
			t.Errorf("tool %d:\n got %s\nwant %s", i, tool, wantTools[i])
		}
	}
	if !strings.Contains(string(r.Body), "<b>HTML</b> & co.") {
		t.Errorf("the body escapes HTML: %s", r.Body)
	}
}

func TestRequestToolChoice(t *testing.T) {
	t.Parallel()
	tools := []model.Tool{{Name: "search"}}
	tests := []struct {
		choice model.ToolChoice
		want   string
	}{
		{model.ToolChoice{}, ""},
		{model.ToolChoice{Mode: model.ToolChoiceAuto}, `"auto"`},
		{model.ToolChoice{Mode: model.ToolChoiceNone}, `"none"`},
		{model.ToolChoice{Mode: model.ToolChoiceRequired}, `"required"`},
		{model.ChooseTool("search"), `{"type":"function","function":{"name":"search"}}`},
	}
	for _, tt := range tests {
		t.Run(string(tt.choice.Mode), func(t *testing.T) {
			t.Parallel()
			r := sent(t, nil, model.Request{Messages: ask.Messages, Tools: tools, ToolChoice: tt.choice})
			if got := string(r.Chat.ToolChoice); got != tt.want {
				t.Errorf("got tool_choice %s, want %s", got, tt.want)
			}
		})
	}
}

// A turn without tools sends neither tools nor tool_choice, whatever the
// mode: some OpenAI-compatible servers refuse "tool_choice":"auto" with no
// tools.
func TestRequestNoToolsNoToolChoice(t *testing.T) {
	t.Parallel()
	for _, mode := range []model.ToolChoiceMode{"", model.ToolChoiceAuto, model.ToolChoiceNone} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			r := sent(t, nil, model.Request{Messages: ask.Messages, ToolChoice: model.ToolChoice{Mode: mode}})
			var body map[string]json.RawMessage
			if err := json.Unmarshal(r.Body, &body); err != nil {
				t.Fatal(err)
			}
			for _, field := range []string{"tools", "tool_choice", "parallel_tool_calls"} {
				if v, ok := body[field]; ok {
					t.Errorf("got %s %s in a request without tools, want none: %s", field, v, r.Body)
				}
			}
		})
	}
}

func TestRequestParams(t *testing.T) {
	t.Parallel()
	tools := []model.Tool{{Name: "search"}}
	tests := []struct {
		name string
		edit func(*openaicompat.ProviderConfig)
		req  model.Request
		want map[string]string // field: JSON, "-" for absent
	}{
		{"defaults", nil, ask, map[string]string{
			"model": `"test-model"`, "stream": "true", "stream_options": `{"include_usage":true}`,
			"temperature": "-", "max_tokens": "-", "tools": "-", "tool_choice": "-", "parallel_tool_calls": "-"}},
		{"the provider's params", func(c *openaicompat.ProviderConfig) {
			c.Params = model.Params{Temperature: ptr(0.2), TopP: ptr(0.9), MaxTokens: ptr(int64(512)), Seed: ptr(int64(7)),
				FrequencyPenalty: ptr(0.5), PresencePenalty: ptr(-0.5), Stop: []string{"\n\n"}, ParallelToolCalls: ptr(false),
				Extra: map[string]any{"top_k": 40, "repeat_penalty": 1.1}}
		}, model.Request{Messages: ask.Messages, Tools: tools}, map[string]string{
			"temperature": "0.2", "top_p": "0.9", "max_tokens": "512", "seed": "7", "frequency_penalty": "0.5",
			"presence_penalty": "-0.5", "stop": `["\n\n"]`, "parallel_tool_calls": "false", "top_k": "40", "repeat_penalty": "1.1"}},
		{"the request's params win", func(c *openaicompat.ProviderConfig) {
			c.Params = model.Params{Temperature: ptr(0.2), MaxTokens: ptr(int64(512)), Extra: map[string]any{"top_k": 40}}
		}, model.Request{Messages: ask.Messages, Model: "other-model", Params: model.Params{Temperature: ptr(1.0), Extra: map[string]any{"top_k": 5}}},
			map[string]string{"model": `"other-model"`, "temperature": "1", "max_tokens": "512", "top_k": "5"}},
		{"parallel_tool_calls only with tools", func(c *openaicompat.ProviderConfig) {
			c.Params = model.Params{ParallelToolCalls: ptr(true)}
		}, ask, map[string]string{"parallel_tool_calls": "-"}},
		{"max_completion_tokens", func(c *openaicompat.ProviderConfig) {
			c.MaxTokensField = openaicompat.MaxCompletionTokensField
			c.Params = model.Params{MaxTokens: ptr(int64(64))}
		}, ask, map[string]string{"max_tokens": "-", "max_completion_tokens": "64"}},
		{"no stream usage", func(c *openaicompat.ProviderConfig) { c.StreamUsage = ptr(false) }, ask,
			map[string]string{"stream": "true", "stream_options": "-"}},
		{"not streamed", func(c *openaicompat.ProviderConfig) { c.Stream = ptr(false) }, ask,
			map[string]string{"stream": "-", "stream_options": "-"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fields := sent(t, tt.edit, tt.req).Chat.Fields
			for k, want := range tt.want {
				got, ok := fields[k]
				switch {
				case want == "-" && ok:
					t.Errorf("got %s: %s, want it absent", k, got)
				case want != "-" && string(got) != want:
					t.Errorf("got %s: %s, want %s", k, got, want)
				}
			}
		})
	}
}

func TestRequestHeadersAndKey(t *testing.T) {
	t.Parallel()
	env := func(name string) (string, bool) {
		if name == "EXPRD_TEST_KEY" {
			return "sk-from-env", true
		}
		return "", false
	}
	tests := []struct {
		name     string
		edit     func(*openaicompat.ProviderConfig)
		wantAuth string
	}{
		{"no key", nil, ""},
		{"key from the environment", func(c *openaicompat.ProviderConfig) { c.APIKeyEnv = "EXPRD_TEST_KEY" }, "Bearer sk-from-env"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := sent(t, func(c *openaicompat.ProviderConfig) {
				c.Headers = map[string]string{"X-Team": "search"}
				if tt.edit != nil {
					tt.edit(c)
				}
			}, ask, openaicompat.WithLookupEnv(env))
			if got := r.Header.Get("Authorization"); got != tt.wantAuth {
				t.Errorf("got Authorization %q, want %q", got, tt.wantAuth)
			}
			if got := r.Header.Get("X-Team"); got != "search" {
				t.Errorf("got X-Team %q, want search", got)
			}
			if r.Header.Get("X-Stainless-Os") != "" || r.Path != "/v1/chat/completions" {
				t.Errorf("got headers %v for %s", r.Header, r.Path)
			}
		})
	}
}

func TestAPIKeyAccepted(t *testing.T) {
	t.Parallel()
	srv, err := scripted.Start(scripted.Script{APIKey: "sk-right", Turns: []scripted.Turn{ok}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	env := func(name string) (string, bool) {
		return map[string]string{"RIGHT": "sk-right", "WRONG": "sk-wrong"}[name], true
	}
	for _, tt := range []struct {
		env  string
		want int
	}{{"WRONG", http.StatusUnauthorized}, {"RIGHT", 0}} {
		p := provider(t, srv, func(c *openaicompat.ProviderConfig) { c.APIKeyEnv = tt.env }, openaicompat.WithLookupEnv(env))
		_, _, err := turn(t, p, ask)
		if tt.want == 0 {
			if err != nil {
				t.Errorf("%s: got %v, want a reply", tt.env, err)
			}
			continue
		}
		if he := httpErr(t, err); he.StatusCode != tt.want {
			t.Errorf("%s: got %d, want %d", tt.env, he.StatusCode, tt.want)
		}
	}
}

// TestOpenAIEnvironmentIgnored: OpenAI's OPENAI_* variables reach no
// server: a hosted key must not go to a local one.
func TestOpenAIEnvironmentIgnored(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-hosted-secret")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	t.Setenv("OPENAI_ORG_ID", "org-x")
	r := sent(t, nil, ask)
	for _, h := range []string{"Authorization", "OpenAI-Organization"} {
		if v := r.Header.Get(h); v != "" {
			t.Errorf("got %s %q, want none", h, v)
		}
	}
}

func TestInvalidRequestNotSent(t *testing.T) {
	t.Parallel()
	srv := serve(t, ok)
	p := provider(t, srv, nil)
	_, err := p.Stream(context.Background(), model.Request{Messages: ask.Messages, ToolChoice: model.ChooseTool("missing")})
	if !errors.Is(err, model.ErrInvalidRequest) {
		t.Fatalf("got %v, want ErrInvalidRequest", err)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("got %d requests sent, want 0", n)
	}
}
