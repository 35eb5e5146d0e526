package scripted_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/exprd/exprd/model/scripted"
)

func TestStreamedTurn(t *testing.T) {
	t.Parallel()
	srv := start(t, scripted.Script{Turns: []scripted.Turn{{
		Text:      "Let me look it up.",
		ToolCalls: []scripted.ToolCall{{ID: "call_x", Name: "search", Arguments: json.RawMessage(`{"query": "cheapest lamps in stock"}`)}},
		Usage:     &scripted.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15},
	}}})
	data, err := events(t, post(t, client(t), srv.BaseURL(), chatBody(true)))
	if err != nil {
		t.Fatal(err)
	}
	if got := data[len(data)-1]; got != "[DONE]" {
		t.Fatalf("got last event %q, want [DONE]", got)
	}
	chunks := decodeChunks(t, data)
	first := chunks[0].Choices[0]
	if first.Delta.Role != "assistant" {
		t.Errorf("first chunk: got role %q, want assistant", first.Delta.Role)
	}
	var text, args strings.Builder
	var ids, names []string
	var finish string
	for i, c := range chunks {
		if c.Object != "chat.completion.chunk" || c.ID != "chatcmpl-scripted-0" || c.Model != "test-model" {
			t.Errorf("chunk %d: got object %q id %q model %q", i, c.Object, c.ID, c.Model)
		}
		if i > 0 && len(c.Choices) > 0 && c.Choices[0].Delta.Role != "" {
			t.Errorf("chunk %d repeats the role", i)
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil {
				text.WriteString(*ch.Delta.Content)
			}
			for _, tc := range ch.Delta.ToolCalls {
				if tc.ID != "" {
					ids = append(ids, tc.ID)
				}
				if tc.Function.Name != "" {
					names = append(names, tc.Function.Name)
				}
				args.WriteString(tc.Function.Arguments)
			}
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	if got, want := text.String(), "Let me look it up."; got != want {
		t.Errorf("got text %q, want %q", got, want)
	}
	if strings.Join(ids, ",") != "call_x" || strings.Join(names, ",") != "search" {
		t.Errorf("got ids %v and names %v, want each once: [call_x] [search]", ids, names)
	}
	if got, want := args.String(), `{"query":"cheapest lamps in stock"}`; got != want {
		t.Errorf("got arguments %q, want %q", got, want)
	}
	if finish != "tool_calls" {
		t.Errorf("got finish reason %q, want tool_calls", finish)
	}
	last := chunks[len(chunks)-1]
	if last.Usage == nil || *last.Usage != (scripted.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}) || len(last.Choices) != 0 {
		t.Errorf("got last chunk %+v, want the usage with no choices", last)
	}
}

func TestStreamedUsageOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	srv := start(t, scripted.Script{Turns: []scripted.Turn{{Text: "hi", Usage: &scripted.Usage{TotalTokens: 3}}}})
	body := chatBody(true)
	delete(body, "stream_options")
	data, err := events(t, post(t, client(t), srv.BaseURL(), body))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range decodeChunks(t, data) {
		if c.Usage != nil {
			t.Errorf("got usage %+v in a stream that did not ask for it", c.Usage)
		}
	}
}

func TestNonStreamedTurn(t *testing.T) {
	t.Parallel()
	srv := start(t, scripted.Script{Model: "scripted-7", Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{{Name: "f", Arguments: json.RawMessage(`"{\"a\":"`)}}},
		{Text: "done", Usage: &scripted.Usage{PromptTokens: 1, CompletionTokens: 1, TotalTokens: 2}},
	}})
	c := client(t)
	var got struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Model   string `json:"model"`
		Choices []struct {
			Message struct {
				Role      string  `json:"role"`
				Content   *string `json:"content"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Type     string `json:"type"`
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage *scripted.Usage `json:"usage"`
	}
	if err := json.Unmarshal([]byte(readAll(t, post(t, c, srv.BaseURL(), chatBody(false)))), &got); err != nil {
		t.Fatal(err)
	}
	m := got.Choices[0].Message
	if got.Object != "chat.completion" || got.Model != "scripted-7" || m.Content != nil || got.Usage != nil {
		t.Errorf("got object %q model %q content %v usage %v; want chat.completion, scripted-7, null, none", got.Object, got.Model, m.Content, got.Usage)
	}
	if len(m.ToolCalls) != 1 || m.ToolCalls[0].ID != "call_0_0" || m.ToolCalls[0].Function.Arguments != `{"a":` || got.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("got %+v, want one call call_0_0 with arguments {\"a\": and finish tool_calls", got.Choices[0])
	}
	got.Usage = nil
	if err := json.Unmarshal([]byte(readAll(t, post(t, c, srv.BaseURL(), chatBody(false)))), &got); err != nil {
		t.Fatal(err)
	}
	if m := got.Choices[0].Message; m.Content == nil || *m.Content != "done" || got.Usage == nil || got.Usage.TotalTokens != 2 {
		t.Errorf("got %+v, want text done with usage", got)
	}
}

func TestErrorTurns(t *testing.T) {
	t.Parallel()
	srv := start(t, scripted.Script{Turns: []scripted.Turn{
		{Error: &scripted.ErrorReply{Status: 429, RetryAfter: "3"}},
		{Error: &scripted.ErrorReply{Status: 400, Body: json.RawMessage(`{"error": {"message": "bad tool", "type": "invalid_request_error", "code": "bad"}}`)}},
		{Error: &scripted.ErrorReply{Status: 502, Body: json.RawMessage(`"upstream down"`)}},
		{Error: &scripted.ErrorReply{Status: 503, RetryAfterDateMS: 2000}},
	}})
	c := client(t)
	tests := []struct {
		status           int
		body, retryAfter string
	}{
		{429, `{"error":{"message":"Too Many Requests (scripted)","type":"rate_limit_error","code":null}}`, "3"},
		{400, `{"error": {"message": "bad tool", "type": "invalid_request_error", "code": "bad"}}`, ""},
		{502, "upstream down", ""},
		{503, `{"error":{"message":"Service Unavailable (scripted)","type":"server_error","code":null}}`, "date"},
	}
	for i, tt := range tests {
		res := post(t, c, srv.BaseURL(), chatBody(true))
		body := readAll(t, res)
		if res.StatusCode != tt.status || body != tt.body {
			t.Errorf("reply %d: got %d %q, want %d %q", i, res.StatusCode, body, tt.status, tt.body)
		}
		ra := res.Header.Get("Retry-After")
		if tt.retryAfter == "date" {
			at, err := http.ParseTime(ra)
			if err != nil || time.Until(at) <= 0 || time.Until(at) > 3*time.Second {
				t.Errorf("reply %d: got Retry-After %q, want an HTTP-date about 2s ahead", i, ra)
			}
		} else if ra != tt.retryAfter {
			t.Errorf("reply %d: got Retry-After %q, want %q", i, ra, tt.retryAfter)
		}
	}
}

func TestFaults(t *testing.T) {
	t.Parallel()
	text := "one two three four"
	tests := []struct {
		name    string
		turn    scripted.Turn
		want    int  // data events
		wantErr bool // the body broke off
		check   func(t *testing.T, data []string)
	}{
		// role, four pieces, finish, usage, [DONE]
		{"whole", scripted.Turn{Text: text, Usage: &scripted.Usage{}}, 8, false, nil},
		{"cut", scripted.Turn{Text: text, CutAfter: intp(2)}, 2, true, nil},
		{"cut before anything", scripted.Turn{Text: text, CutAfter: intp(0)}, 0, true, nil},
		{"end", scripted.Turn{Text: text, EndAfter: intp(3)}, 3, false, func(t *testing.T, data []string) {
			if data[len(data)-1] == "[DONE]" {
				t.Error("got [DONE] from a body that should just stop")
			}
		}},
		{"malformed", scripted.Turn{Text: text, Malformed: &scripted.Malformed{After: 1}}, 8, false, func(t *testing.T, data []string) {
			if data[1] != "{not json" {
				t.Errorf("got second event %q, want {not json", data[1])
			}
		}},
		{"malformed data", scripted.Turn{Text: "x", Malformed: &scripted.Malformed{After: 0, Data: `{"choices": 5}`}}, 5, false, func(t *testing.T, data []string) {
			if data[0] != `{"choices": 5}` {
				t.Errorf("got first event %q", data[0])
			}
		}},
		{"raw chunks", scripted.Turn{Chunks: []string{`{"a":1}`, "[DONE]"}}, 2, false, nil},
		{"no finish reason", scripted.Turn{Text: "x", OmitFinishReason: true}, 3, false, func(t *testing.T, data []string) {
			for _, d := range data {
				if strings.Contains(d, `"finish_reason":"`) {
					t.Errorf("got a finish reason in %s", d)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := start(t, scripted.Script{Turns: []scripted.Turn{tt.turn}})
			data, err := events(t, post(t, client(t), srv.BaseURL(), chatBody(true)))
			if (err != nil) != tt.wantErr {
				t.Fatalf("got read error %v, want an error: %v", err, tt.wantErr)
			}
			if tt.wantErr && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("got %v, want io.ErrUnexpectedEOF", err)
			}
			if len(data) != tt.want {
				t.Fatalf("got %d events %q, want %d", len(data), data, tt.want)
			}
			if tt.check != nil {
				tt.check(t, data)
			}
		})
	}
}

func TestDelays(t *testing.T) {
	t.Parallel()
	srv := start(t, scripted.Script{Turns: []scripted.Turn{{Text: "a b c", DelayMS: 60, ChunkDelayMS: 20}}})
	t0 := time.Now()
	res := post(t, client(t), srv.BaseURL(), chatBody(true))
	if d := time.Since(t0); d < 60*time.Millisecond {
		t.Errorf("got headers after %v, want at least 60ms", d)
	}
	if _, err := events(t, res); err != nil {
		t.Fatal(err)
	}
	// role, a, b, c, finish, [DONE]: five gaps of 20ms after the first 60ms
	if d := time.Since(t0); d < 160*time.Millisecond {
		t.Errorf("got the whole stream in %v, want at least 160ms", d)
	}
}

func TestIgnoreStream(t *testing.T) {
	t.Parallel()
	srv := start(t, scripted.Script{Turns: []scripted.Turn{{Text: "whole", IgnoreStream: true}}})
	res := post(t, client(t), srv.BaseURL(), chatBody(true))
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("got Content-Type %q, want application/json", ct)
	}
	if body := readAll(t, res); !strings.Contains(body, `"content":"whole"`) {
		t.Errorf("got %s, want a whole reply", body)
	}
}

func TestTurnSelection(t *testing.T) {
	t.Parallel()
	user := func(s string) map[string]any { return map[string]any{"role": "user", "content": s} }
	tool := map[string]any{"role": "tool", "tool_call_id": "c", "content": "{}"}
	tests := []struct {
		name   string
		script scripted.Script
		asks   [][]map[string]any
		want   []string // each reply's text, or "mismatch"
	}{
		{"in order",
			scripted.Script{Turns: []scripted.Turn{{Text: "one"}, {Text: "two"}}},
			[][]map[string]any{{user("a")}, {user("b")}, {user("c")}},
			[]string{"one", "two", "mismatch"}},
		{"loop",
			scripted.Script{Loop: true, Turns: []scripted.Turn{{Text: "one"}, {Text: "two"}}},
			[][]map[string]any{{user("a")}, {user("b")}, {user("c")}},
			[]string{"one", "two", "one"}},
		{"match on the last user message",
			scripted.Script{Turns: []scripted.Turn{{Match: &scripted.Match{LastUser: "LAMP"}, Text: "lamps"}, {Text: "other"}}},
			[][]map[string]any{{user("hi")}, {user("any lamps?")}, {user("x")}},
			[]string{"other", "lamps", "mismatch"}},
		{"match on the last role",
			scripted.Script{Loop: true, Turns: []scripted.Turn{
				{Match: &scripted.Match{LastRole: "user"}, Text: "calling"},
				{Match: &scripted.Match{LastRole: "tool"}, Text: "answer"}}},
			[][]map[string]any{{user("q")}, {user("q"), tool}, {user("q2")}, {user("q3")}},
			[]string{"calling", "answer", "calling", "calling"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := start(t, tt.script)
			c := client(t)
			for i, msgs := range tt.asks {
				res := post(t, c, srv.BaseURL(), chatBody(false, msgs...))
				body := readAll(t, res)
				var got string
				if res.StatusCode == http.StatusBadRequest && strings.Contains(body, "script_mismatch") {
					got = "mismatch"
				} else {
					var r struct {
						Choices []struct{ Message struct{ Content string } }
					}
					_ = json.Unmarshal([]byte(body), &r)
					if len(r.Choices) > 0 {
						got = r.Choices[0].Message.Content
					}
				}
				if got != tt.want[i] {
					t.Errorf("request %d: got %q (%s), want %q", i, got, body, tt.want[i])
				}
			}
			reqs := srv.Requests()
			if len(reqs) != len(tt.asks) {
				t.Fatalf("got %d requests recorded, want %d", len(reqs), len(tt.asks))
			}
			for i, r := range reqs {
				if r.N != i || (tt.want[i] == "mismatch") != (r.Turn == -1) {
					t.Errorf("request %d: got N %d and turn %d", i, r.N, r.Turn)
				}
			}
		})
	}
}

func TestAPIKey(t *testing.T) {
	t.Parallel()
	srv := start(t, scripted.Script{APIKey: "sk-test", Loop: true, Turns: []scripted.Turn{{Text: "ok"}}})
	c := client(t)
	tests := []struct {
		header []string
		want   int
	}{
		{nil, http.StatusUnauthorized},
		{[]string{"Authorization", "Bearer sk-wrong"}, http.StatusUnauthorized},
		{[]string{"Authorization", "Bearer sk-test"}, http.StatusOK},
	}
	for _, tt := range tests {
		res := post(t, c, srv.BaseURL(), chatBody(false), tt.header...)
		_ = readAll(t, res)
		if res.StatusCode != tt.want {
			t.Errorf("with %v: got %d, want %d", tt.header, res.StatusCode, tt.want)
		}
	}
}

func TestRecordsRequests(t *testing.T) {
	t.Parallel()
	srv := start(t, scripted.Script{Turns: []scripted.Turn{{Text: "ok"}}})
	body := map[string]any{
		"model": "m", "temperature": 0.5, "tool_choice": "required", "stream": true,
		"stream_options": map[string]any{"include_usage": true},
		"messages": []map[string]any{
			{"role": "system", "content": []map[string]any{{"type": "text", "text": "be "}, {"type": "text", "text": "brief"}}},
			{"role": "user", "content": "find lamps"},
			{"role": "assistant", "content": nil, "tool_calls": []map[string]any{
				{"id": "c1", "type": "function", "function": map[string]any{"name": "search", "arguments": `{"q":"lamp"}`}}}},
			{"role": "tool", "tool_call_id": "c1", "content": "2 hits"},
		},
		"tools": []map[string]any{{"type": "function", "function": map[string]any{"name": "search", "parameters": map[string]any{"type": "object"}}}},
	}
	if _, err := events(t, post(t, client(t), srv.BaseURL(), body, "X-Trace", "t-1")); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("got %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Method != http.MethodPost || r.Path != "/v1/chat/completions" || r.Header.Get("X-Trace") != "t-1" || r.Turn != 0 || r.Aborted {
		t.Errorf("got %s %s header %q turn %d aborted %v", r.Method, r.Path, r.Header.Get("X-Trace"), r.Turn, r.Aborted)
	}
	c := r.Chat
	if c.Model != "m" || !c.Stream || !c.IncludeUsage() || string(c.ToolChoice) != `"required"` || string(c.Fields["temperature"]) != "0.5" {
		t.Errorf("got model %q stream %v usage %v tool_choice %s temperature %s", c.Model, c.Stream, c.IncludeUsage(), c.ToolChoice, c.Fields["temperature"])
	}
	if len(c.Messages) != 4 || c.Messages[0].Content != "be brief" || c.Messages[2].Content != "" ||
		c.Messages[2].ToolCalls[0].Function.Arguments != `{"q":"lamp"}` || c.Messages[3].ToolCallID != "c1" {
		t.Errorf("got messages %+v", c.Messages)
	}
	if c.LastUser() != "find lamps" || len(c.Tools) != 1 || c.Tools[0].Function.Name != "search" {
		t.Errorf("got last user %q and tools %+v", c.LastUser(), c.Tools)
	}
	var raw map[string]any
	if err := json.Unmarshal(r.Body, &raw); err != nil || raw["model"] != "m" {
		t.Errorf("got raw body %s", r.Body)
	}
	reqs[0].Header.Set("X-Trace", "changed")
	if srv.Requests()[0].Header.Get("X-Trace") != "t-1" {
		t.Error("Requests returned the server's own header map")
	}
}

func TestAbortedRecorded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		turn scripted.Turn
	}{
		{"before the reply", scripted.Turn{Text: "late", DelayMS: 10_000}},
		{"mid-stream", scripted.Turn{Text: "a b c d e f", ChunkDelayMS: 10_000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := start(t, scripted.Script{Turns: []scripted.Turn{tt.turn}})
			ctx, cancel := context.WithCancel(context.Background())
			c := client(t)
			done := make(chan struct{})
			go func() {
				defer close(done)
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.BaseURL()+"/chat/completions",
					strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`))
				if res, err := c.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
				}
			}()
			waitFor(t, "the request", func() bool { return len(srv.Requests()) == 1 })
			cancel()
			<-done
			waitFor(t, "the server to see the client go", func() bool { return srv.Requests()[0].Aborted })
		})
	}
}

func TestRoutesAndBadRequests(t *testing.T) {
	t.Parallel()
	srv := start(t, scripted.Script{Model: "demo-1", Turns: []scripted.Turn{{Text: "x"}}})
	c := client(t)
	for _, path := range []string{"/v1/models", "/models"} {
		res, err := c.Get(srv.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		if body := readAll(t, res); res.StatusCode != 200 || !strings.Contains(body, `"id":"demo-1"`) {
			t.Errorf("GET %s: got %d %s", path, res.StatusCode, body)
		}
	}
	res, err := c.Get(srv.URL() + "/v1/embeddings")
	if err != nil {
		t.Fatal(err)
	}
	if _ = readAll(t, res); res.StatusCode != http.StatusNotFound {
		t.Errorf("unknown route: got %d, want 404", res.StatusCode)
	}
	tests := []struct {
		name string
		body []byte
		want int
	}{
		{"not JSON", []byte(`{"model":`), http.StatusBadRequest},
		{"no model", []byte(`{"messages":[{"role":"user","content":"x"}]}`), http.StatusBadRequest},
		{"no messages", []byte(`{"model":"m","messages":[]}`), http.StatusBadRequest},
		{"too large", []byte(`{"model":"` + strings.Repeat("m", scripted.MaxRequestBytes) + `"}`), http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		res := post(t, c, srv.BaseURL(), tt.body)
		if body := readAll(t, res); res.StatusCode != tt.want {
			t.Errorf("%s: got %d %s, want %d", tt.name, res.StatusCode, body, tt.want)
		}
	}
	for i, r := range srv.Requests() {
		if r.Turn != -1 {
			t.Errorf("bad request %d: got turn %d, want -1", i, r.Turn)
		}
	}
}

func TestCloseEndsRepliesInFlight(t *testing.T) {
	t.Parallel()
	srv, err := scripted.Start(scripted.Script{Turns: []scripted.Turn{{Text: "slow", DelayMS: 30_000}}})
	if err != nil {
		t.Fatal(err)
	}
	c := client(t)
	errc := make(chan error, 1)
	go func() {
		res, err := c.Post(srv.BaseURL()+"/chat/completions", "application/json",
			strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"x"}]}`))
		if err == nil {
			_, err = io.ReadAll(res.Body)
			res.Body.Close()
		}
		errc <- err
	}()
	waitFor(t, "the request", func() bool { return len(srv.Requests()) == 1 })
	t0 := time.Now()
	srv.Close()
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("Close took %v, want it prompt", d)
	}
	if err := <-errc; err == nil {
		t.Error("got a reply from a closed server, want an error")
	}
	srv.Close() // twice is fine
}

func TestDemo(t *testing.T) {
	t.Parallel()
	srv, err := scripted.Demo()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	c := client(t)
	ask := func(msgs ...map[string]any) (string, []string) {
		var r struct {
			Choices []struct {
				Message struct {
					Content   string
					ToolCalls []struct {
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				}
			}
		}
		body := chatBody(false, msgs...)
		body["tools"] = []any{map[string]any{"type": "function", "function": map[string]any{"name": "expr", "description": "Runs Expr steps on the state."}}}
		if err := json.Unmarshal([]byte(readAll(t, post(t, c, srv.BaseURL(), body))), &r); err != nil {
			t.Fatal(err)
		}
		var calls []string
		for _, tc := range r.Choices[0].Message.ToolCalls {
			calls = append(calls, tc.Function.Name+" "+tc.Function.Arguments)
		}
		return r.Choices[0].Message.Content, calls
	}
	question := map[string]any{"role": "user", "content": "Select the five cheapest products."}
	for round := range 2 {
		text, calls := ask(question)
		if len(calls) != 1 || !strings.HasPrefix(calls[0], `expr {"steps":[{"set":"scopes.root.selected"`) {
			t.Fatalf("round %d: got %q and calls %q, want one expr call", round, text, calls)
		}
		var args map[string]any
		if err := json.Unmarshal([]byte(strings.TrimPrefix(calls[0], "expr ")), &args); err != nil {
			t.Fatalf("round %d: the expr arguments are not JSON: %v", round, err)
		}
		text, calls = ask(question, map[string]any{"role": "assistant", "content": text, "tool_calls": []any{map[string]any{
			"id": "x", "type": "function", "function": map[string]any{"name": "expr", "arguments": strings.TrimPrefix(calls[0], "expr ")}}}},
			map[string]any{"role": "tool", "tool_call_id": "x", "content": "{}"})
		if len(calls) != 0 || !strings.Contains(text, "five cheapest products") {
			t.Errorf("round %d: got %q and calls %q, want the final answer", round, text, calls)
		}
	}
}

// TestRequestLimit checks MaxRequestBytes at the limit and one past it.
func TestRequestLimit(t *testing.T) {
	t.Parallel()
	srv := start(t, scripted.Script{Loop: true, Turns: []scripted.Turn{{Text: "ok"}}})
	c := client(t)
	const prefix, suffix = `{"model":"m","messages":[{"role":"user","content":"`, `"}]}`
	for _, tt := range []struct {
		size int
		want int
	}{
		{scripted.MaxRequestBytes, http.StatusOK},
		{scripted.MaxRequestBytes + 1, http.StatusRequestEntityTooLarge},
	} {
		body := prefix + strings.Repeat("x", tt.size-len(prefix)-len(suffix)) + suffix
		res := post(t, c, srv.BaseURL(), []byte(body))
		if _ = readAll(t, res); res.StatusCode != tt.want {
			t.Errorf("a body of %d bytes: got %d, want %d", tt.size, res.StatusCode, tt.want)
		}
	}
}
