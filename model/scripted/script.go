package scripted

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// DefaultModel is the model name replies carry when neither the script nor
// the request names one.
const DefaultModel = "scripted"

// Script is what a [Server] replays.
type Script struct {
	// Model, when set, is the model name every reply carries; else a reply
	// echoes the request's model.
	Model string `json:"model,omitempty"`
	// APIKey, when set, is the bearer token every request must carry; a
	// request without it gets 401.
	APIKey string `json:"api_key,omitempty"`
	// Created is the "created" time replies carry; default: the server's
	// start, in Unix seconds.
	Created int64 `json:"created,omitempty"`
	// Loop starts over at the first turn once every turn has been used.
	Loop bool `json:"loop,omitempty"`
	// Turns are used in order, each once per pass (see [Match]).
	Turns []Turn `json:"turns"`
}

// Turn is the reply to one request: a normal reply (text, tool calls,
// finish reason, usage), an HTTP error, or raw chunks; plus faults to inject.
type Turn struct {
	// Match, when set, makes the turn answer only a request it fits; turns
	// that do not fit are skipped over (and stay unused).
	Match *Match `json:"match,omitempty"`

	// Follow makes the reply's text and tool calls from the request, as
	// the demo model does (see follow.go): a plan for CodeMode, a call of
	// the declared tool that matches the user's message, an answer with a
	// tool's result. Text and ToolCalls must be empty; the rest applies.
	Follow bool `json:"follow,omitempty"`

	// Text is the assistant's text.
	Text string `json:"text,omitempty"`
	// TextChunks is how the text streams, piece by piece. Empty: Text is
	// cut after each space.
	TextChunks []string `json:"text_chunks,omitempty"`
	// ToolCalls are the calls the model makes.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// FinishReason is sent as it is. Empty: "tool_calls" when the turn has
	// tool calls, else "stop".
	FinishReason string `json:"finish_reason,omitempty"`
	// OmitFinishReason sends no finish reason at all.
	OmitFinishReason bool `json:"omit_finish_reason,omitempty"`
	// Usage is reported when set: in a non-streamed reply, and in a
	// streamed one whose request asked for it (stream_options.include_usage).
	Usage *Usage `json:"usage,omitempty"`

	// Error answers with an HTTP error instead of a reply.
	Error *ErrorReply `json:"error,omitempty"`

	// Chunks, when set, replace the generated stream: each is sent as one
	// "data: " event, verbatim, and nothing else is sent (add "[DONE]" to end
	// the stream properly). For protocol variants and broken servers.
	Chunks []string `json:"chunks,omitempty"`
	// SSE, when set, is the whole body of a streamed reply, verbatim: for
	// line-level variants (comments, event names, CRLF, a last line without
	// its blank line). Only DelayMS applies to it.
	SSE string `json:"sse,omitempty"`
	// Body, when set, is the whole body of a non-streamed reply, verbatim.
	Body string `json:"body,omitempty"`
	// IgnoreStream answers a streamed request with a non-streamed reply, as
	// some servers do.
	IgnoreStream bool `json:"ignore_stream,omitempty"`

	// DelayMS waits before the reply starts (before the status line).
	DelayMS int `json:"delay_ms,omitempty"`
	// ChunkDelayMS waits between streamed chunks.
	ChunkDelayMS int `json:"chunk_delay_ms,omitempty"`
	// CutAfter drops the connection after that many chunks, mid-stream,
	// as a crashed server or a broken proxy would.
	CutAfter *int `json:"cut_after,omitempty"`
	// EndAfter ends the body cleanly after that many chunks, without a
	// finish reason or "[DONE]".
	EndAfter *int `json:"end_after,omitempty"`
	// Malformed sends a broken chunk after some chunks.
	Malformed *Malformed `json:"malformed,omitempty"`
}

// Match selects the requests a turn answers. Every field set must fit.
type Match struct {
	// LastUser must occur (case-insensitively) in the last user message.
	LastUser string `json:"last_user,omitempty"`
	// LastRole must be the role of the request's last message: "user" for
	// a new question, "tool" for a request that carries tool results.
	LastRole string `json:"last_role,omitempty"`
}

// ToolCall is a call the scripted model makes.
type ToolCall struct {
	// ID defaults to "call_<request>_<index>": the request's N and the
	// call's place in the turn, so ids never repeat on one server.
	ID   string `json:"id,omitempty"`
	Name string `json:"name"`
	// Arguments is sent as the call's arguments text: a JSON string is sent
	// as its content (which may be malformed JSON, on purpose), any other
	// JSON value as its JSON text. Absent: "{}".
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// ArgumentsText is the arguments text the server sends for the call: a
// string's content as it is, any other value compacted, as models write it.
func (c ToolCall) ArgumentsText() string {
	b := bytes.TrimSpace(c.Arguments)
	if len(b) == 0 {
		return "{}"
	}
	if b[0] == '"' {
		var s string
		if json.Unmarshal(b, &s) == nil {
			return s
		}
	}
	var out bytes.Buffer
	if json.Compact(&out, b) != nil {
		return string(b)
	}
	return out.String()
}

// Usage is the token count a turn reports.
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

// ErrorReply is an HTTP error a turn answers with.
type ErrorReply struct {
	// Status is the HTTP status, 400 to 599.
	Status int `json:"status"`
	// Body is sent as the body: a JSON string as its content, any other
	// JSON value as its text. Absent: an OpenAI error object
	// {"error": {"message", "type", "code"}} for the status.
	Body json.RawMessage `json:"body,omitempty"`
	// RetryAfter is sent as the Retry-After header, verbatim ("2", or an
	// HTTP-date).
	RetryAfter string `json:"retry_after,omitempty"`
	// RetryAfterDateMS sends Retry-After as the HTTP-date that many
	// milliseconds after the reply.
	RetryAfterDateMS int `json:"retry_after_date_ms,omitempty"`
	// Header holds more headers to send (Retry-After-Ms, x-should-retry).
	Header map[string]string `json:"header,omitempty"`
}

// Malformed is a broken chunk sent mid-stream.
type Malformed struct {
	// After is how many chunks go before it.
	After int `json:"after"`
	// Data is the chunk's payload; default "{not json".
	Data string `json:"data,omitempty"`
}

// ParseScript decodes a JSON script strictly (an unknown field is an error)
// and validates it.
func ParseScript(data []byte) (Script, error) {
	var s Script
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Script{}, fmt.Errorf("scripted: parse script: %w", err)
	}
	if dec.More() {
		return Script{}, errors.New("scripted: parse script: data after the script object")
	}
	if err := s.Validate(); err != nil {
		return Script{}, err
	}
	return s, nil
}

// LoadScript reads and parses a JSON script file.
func LoadScript(path string) (Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Script{}, fmt.Errorf("scripted: %w", err)
	}
	return ParseScript(data)
}

// Validate reports the first unusable field, naming it.
func (s *Script) Validate() error {
	if len(s.Turns) == 0 {
		return errors.New("scripted: script: turns: none")
	}
	for i := range s.Turns {
		if err := s.Turns[i].validate(); err != nil {
			return fmt.Errorf("scripted: script: turns[%d].%w", i, err)
		}
	}
	return nil
}

func (t *Turn) validate() error {
	nonNeg := []struct {
		name string
		v    *int
	}{
		{"delay_ms", &t.DelayMS}, {"chunk_delay_ms", &t.ChunkDelayMS},
		{"cut_after", t.CutAfter}, {"end_after", t.EndAfter},
	}
	for _, f := range nonNeg {
		if f.v != nil && *f.v < 0 {
			return fmt.Errorf("%s: %d is negative", f.name, *f.v)
		}
	}
	if t.Malformed != nil && t.Malformed.After < 0 {
		return fmt.Errorf("malformed.after: %d is negative", t.Malformed.After)
	}
	for j, c := range t.ToolCalls {
		if c.Name == "" {
			return fmt.Errorf("tool_calls[%d].name: empty", j)
		}
		if len(c.Arguments) > 0 && !json.Valid(c.Arguments) {
			return fmt.Errorf("tool_calls[%d].arguments: not JSON (quote malformed arguments as a JSON string)", j)
		}
	}
	if e := t.Error; e != nil {
		if e.Status < 400 || e.Status > 599 {
			return fmt.Errorf("error.status: %d is not an HTTP error status (400-599)", e.Status)
		}
		if len(e.Body) > 0 && !json.Valid(e.Body) {
			return errors.New("error.body: not JSON (quote a text body as a JSON string)")
		}
		if e.RetryAfterDateMS < 0 {
			return fmt.Errorf("error.retry_after_date_ms: %d is negative", e.RetryAfterDateMS)
		}
	}
	if t.Match != nil && t.Match.LastRole != "" {
		switch t.Match.LastRole {
		case "system", "developer", "user", "assistant", "tool":
		default:
			return fmt.Errorf("match.last_role: unknown role %q", t.Match.LastRole)
		}
	}
	if t.Follow && (t.Text != "" || len(t.TextChunks) > 0 || len(t.ToolCalls) > 0 || t.Chunks != nil || t.SSE != "" || t.Body != "") {
		return errors.New("follow: the reply is made from the request; leave text, text_chunks, tool_calls, chunks, sse and body empty")
	}
	if len(t.TextChunks) > 0 && strings.Join(t.TextChunks, "") != t.Text && t.Text != "" {
		return errors.New("text_chunks: do not add up to text (leave text empty, or make them agree)")
	}
	return nil
}

// text is the turn's whole text.
func (t *Turn) text() string {
	if t.Text == "" && len(t.TextChunks) > 0 {
		return strings.Join(t.TextChunks, "")
	}
	return t.Text
}

// pieces is the text as it streams.
func (t *Turn) pieces() []string {
	if len(t.TextChunks) > 0 {
		return t.TextChunks
	}
	if t.Text == "" {
		return nil
	}
	return strings.SplitAfter(t.Text, " ")
}

func (t *Turn) finishReason() (string, bool) {
	switch {
	case t.OmitFinishReason:
		return "", false
	case t.FinishReason != "":
		return t.FinishReason, true
	case len(t.ToolCalls) > 0:
		return "tool_calls", true
	}
	return "stop", true
}

func (c ToolCall) id(request, i int) string {
	if c.ID != "" {
		return c.ID
	}
	return "call_" + strconv.Itoa(request) + "_" + strconv.Itoa(i)
}
