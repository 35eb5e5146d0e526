package scripted_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exprd/exprd/model/scripted"
)

func TestParseScript(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, script string
		wantErr      string
	}{
		{"minimal", `{"turns": [{"text": "hi"}]}`, ""},
		{"everything", `{"model": "m", "api_key": "k", "loop": true, "turns": [
			{"match": {"last_user": "x", "last_role": "user"}, "text": "ab", "text_chunks": ["a", "b"],
			 "tool_calls": [{"id": "c", "name": "f", "arguments": "{\"broken"}, {"name": "g", "arguments": {"a": 1}}],
			 "finish_reason": "length", "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
			 "delay_ms": 1, "chunk_delay_ms": 1, "cut_after": 2, "end_after": 3, "malformed": {"after": 1}},
			{"error": {"status": 503, "body": "down", "retry_after": "2"}},
			{"chunks": ["[DONE]"], "body": "{}", "ignore_stream": true, "omit_finish_reason": true}]}`, ""},
		{"unknown field", `{"turns": [{"txt": "hi"}]}`, `unknown field "txt"`},
		{"no turns", `{"turns": []}`, "turns: none"},
		{"trailing data", `{"turns": [{"text": "hi"}]} {}`, "data after the script object"},
		{"not an error status", `{"turns": [{"error": {"status": 200}}]}`, "turns[0].error.status: 200 is not an HTTP error status"},
		{"error body not JSON", `{"turns": [{"error": {"status": 500, "body": {"a": }}}]}`, "parse script"},
		{"negative delay", `{"turns": [{"delay_ms": -1}]}`, "turns[0].delay_ms: -1 is negative"},
		{"negative cut", `{"turns": [{}, {"cut_after": -2}]}`, "turns[1].cut_after: -2 is negative"},
		{"negative malformed", `{"turns": [{"malformed": {"after": -1}}]}`, "turns[0].malformed.after: -1 is negative"},
		{"negative date", `{"turns": [{"error": {"status": 429, "retry_after_date_ms": -5}}]}`, "turns[0].error.retry_after_date_ms: -5 is negative"},
		{"call without name", `{"turns": [{"tool_calls": [{"arguments": {}}]}]}`, "turns[0].tool_calls[0].name: empty"},
		{"chunks disagree", `{"turns": [{"text": "abc", "text_chunks": ["a", "b"]}]}`, "turns[0].text_chunks: do not add up to text"},
		{"unknown role", `{"turns": [{"match": {"last_role": "robot"}}]}`, `turns[0].match.last_role: unknown role "robot"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := scripted.ParseScript([]byte(tt.script))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("got %v, want no error", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestValidateRawArguments(t *testing.T) {
	t.Parallel()
	s := scripted.Script{Turns: []scripted.Turn{{ToolCalls: []scripted.ToolCall{{Name: "f", Arguments: json.RawMessage(`{oops`)}}}}}
	if _, err := scripted.Start(s); err == nil || !strings.Contains(err.Error(), "turns[0].tool_calls[0].arguments: not JSON") {
		t.Fatalf("got %v, want an error about the arguments", err)
	}
}

func TestArgumentsText(t *testing.T) {
	t.Parallel()
	tests := []struct{ raw, want string }{
		{``, `{}`},
		{`{"a": 1}`, `{"a":1}`},
		{`"{\"a\": "`, `{"a": `},
		{`[1]`, `[1]`},
	}
	for _, tt := range tests {
		if got := (scripted.ToolCall{Arguments: json.RawMessage(tt.raw)}).ArgumentsText(); got != tt.want {
			t.Errorf("ArgumentsText(%s): got %q, want %q", tt.raw, got, tt.want)
		}
	}
}

func TestLoadScript(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "s.json")
	if err := os.WriteFile(path, []byte(`{"turns": [{"text": "hi"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := scripted.LoadScript(path)
	if err != nil || len(s.Turns) != 1 {
		t.Fatalf("got %v, %v; want one turn", s, err)
	}
	if _, err := scripted.LoadScript(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("got no error for a missing file")
	}
}
