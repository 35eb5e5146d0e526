package scripted

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"
)

// argumentPieceBytes is about how many bytes of a tool call's arguments one
// streamed chunk carries.
const argumentPieceBytes = 16

// reply serves one turn.
type reply struct {
	s    *Server
	w    http.ResponseWriter
	r    *http.Request
	turn *Turn
	chat *ChatRequest
	n    int
	sent int // chunks written
}

// serve writes the turn's reply; false when the client went away first.
func (rp *reply) serve() bool {
	t := rp.turn
	if !rp.s.wait(rp.r, t.DelayMS) {
		return false
	}
	if e := t.Error; e != nil {
		rp.writeErrorReply(e)
		return true
	}
	if !rp.chat.Stream || t.IgnoreStream {
		rp.writeBody()
		return true
	}
	h := rp.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	rp.w.WriteHeader(http.StatusOK)
	if f, ok := rp.w.(http.Flusher); ok {
		f.Flush()
	}
	if t.SSE != "" {
		_, err := io.WriteString(rp.w, t.SSE)
		return err == nil
	}
	chunks := t.Chunks
	if chunks == nil {
		chunks = rp.chunks()
	}
	for i := 0; ; i++ {
		if !rp.fault() {
			return false
		}
		if i == len(chunks) || (t.EndAfter != nil && rp.sent >= *t.EndAfter) {
			return true
		}
		if !rp.send(chunks[i]) {
			return false
		}
	}
}

// fault injects the turn's faults due after the chunks sent so far: a
// malformed chunk, a cut. False when the client went away.
func (rp *reply) fault() bool {
	t := rp.turn
	if m := t.Malformed; m != nil && rp.sent == m.After {
		data := m.Data
		if data == "" {
			data = "{not json"
		}
		if !rp.write(data) {
			return false
		}
	}
	if t.CutAfter != nil && rp.sent >= *t.CutAfter {
		// net/http drops the connection without ending the chunked body.
		panic(http.ErrAbortHandler)
	}
	return true
}

// send writes one chunk after the turn's chunk delay.
func (rp *reply) send(data string) bool {
	if rp.sent > 0 && !rp.s.wait(rp.r, rp.turn.ChunkDelayMS) {
		return false
	}
	rp.sent++
	return rp.write(data)
}

func (rp *reply) write(data string) bool {
	buf := make([]byte, 0, len(data)+8)
	buf = append(buf, "data: "...)
	buf = append(buf, data...)
	buf = append(buf, "\n\n"...)
	if _, err := rp.w.Write(buf); err != nil {
		return false
	}
	if f, ok := rp.w.(http.Flusher); ok {
		f.Flush()
	}
	return rp.r.Context().Err() == nil
}

func (rp *reply) writeErrorReply(e *ErrorReply) {
	h := rp.w.Header()
	for k, v := range e.Header {
		h.Set(k, v)
	}
	switch {
	case e.RetryAfter != "":
		h.Set("Retry-After", e.RetryAfter)
	case e.RetryAfterDateMS > 0:
		at := time.Now().Add(time.Duration(e.RetryAfterDateMS) * time.Millisecond)
		h.Set("Retry-After", at.UTC().Format(http.TimeFormat))
	}
	if len(e.Body) == 0 {
		writeError(rp.w, e.Status, errorType(e.Status), http.StatusText(e.Status)+" (scripted)")
		return
	}
	var text string
	if e.Body[0] == '"' && json.Unmarshal(e.Body, &text) == nil {
		h.Set("Content-Type", "text/plain; charset=utf-8")
		rp.w.WriteHeader(e.Status)
		_, _ = rp.w.Write([]byte(text))
		return
	}
	h.Set("Content-Type", "application/json")
	rp.w.WriteHeader(e.Status)
	_, _ = rp.w.Write(e.Body)
}

func errorType(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

func (rp *reply) model() string {
	if m := rp.s.script.Model; m != "" {
		return m
	}
	if rp.chat.Model != "" {
		return rp.chat.Model
	}
	return DefaultModel
}

func (rp *reply) id() string { return "chatcmpl-scripted-" + strconv.Itoa(rp.n) }

// The wire shapes of a reply.
type (
	wireFunction struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	}
	wireToolCall struct {
		Index    *int         `json:"index,omitempty"`
		ID       string       `json:"id,omitempty"`
		Type     string       `json:"type,omitempty"`
		Function wireFunction `json:"function"`
	}
	wireDelta struct {
		Role      string         `json:"role,omitempty"`
		Content   *string        `json:"content,omitempty"`
		ToolCalls []wireToolCall `json:"tool_calls,omitempty"`
	}
	wireChunkChoice struct {
		Index        int       `json:"index"`
		Delta        wireDelta `json:"delta"`
		FinishReason *string   `json:"finish_reason"`
	}
	wireChunk struct {
		ID      string            `json:"id"`
		Object  string            `json:"object"`
		Created int64             `json:"created"`
		Model   string            `json:"model"`
		Choices []wireChunkChoice `json:"choices"`
		Usage   *Usage            `json:"usage,omitempty"`
	}
	wireMessage struct {
		Role      string         `json:"role"`
		Content   *string        `json:"content"`
		ToolCalls []wireToolCall `json:"tool_calls,omitempty"`
	}
	wireChoice struct {
		Index        int         `json:"index"`
		Message      wireMessage `json:"message"`
		FinishReason *string     `json:"finish_reason"`
	}
	wireCompletion struct {
		ID      string       `json:"id"`
		Object  string       `json:"object"`
		Created int64        `json:"created"`
		Model   string       `json:"model"`
		Choices []wireChoice `json:"choices"`
		Usage   *Usage       `json:"usage,omitempty"`
	}
)

// chunks generates the turn's stream as OpenAI sends it: the role first,
// the text piece by piece, each tool call's id and name then its arguments
// in pieces, the finish reason, the usage when asked for, then [DONE].
func (rp *reply) chunks() []string {
	t := rp.turn
	base := wireChunk{ID: rp.id(), Object: "chat.completion.chunk", Created: rp.s.created, Model: rp.model()}
	var out []string
	add := func(c wireChunk) {
		b, _ := json.Marshal(c) // plain structs of strings and numbers cannot fail
		out = append(out, string(b))
	}
	choice := func(d wireDelta, finish *string) wireChunk {
		c := base
		c.Choices = []wireChunkChoice{{Delta: d, FinishReason: finish}}
		return c
	}
	empty := ""
	add(choice(wireDelta{Role: "assistant", Content: &empty}, nil))
	for _, p := range t.pieces() {
		add(choice(wireDelta{Content: &p}, nil))
	}
	for i, call := range t.ToolCalls {
		idx := i
		add(choice(wireDelta{ToolCalls: []wireToolCall{{Index: &idx, ID: call.id(rp.n, i), Type: "function",
			Function: wireFunction{Name: call.Name}}}}, nil))
		for _, piece := range splitBytes(call.ArgumentsText(), argumentPieceBytes) {
			add(choice(wireDelta{ToolCalls: []wireToolCall{{Index: &idx, Function: wireFunction{Arguments: piece}}}}, nil))
		}
	}
	if reason, ok := t.finishReason(); ok {
		add(choice(wireDelta{}, &reason))
	}
	if t.Usage != nil && rp.chat.IncludeUsage() {
		c := base
		c.Choices = []wireChunkChoice{}
		c.Usage = t.Usage
		add(c)
	}
	return append(out, "[DONE]")
}

func (rp *reply) writeBody() {
	t := rp.turn
	rp.w.Header().Set("Content-Type", "application/json")
	if t.Body != "" {
		_, _ = rp.w.Write([]byte(t.Body))
		return
	}
	msg := wireMessage{Role: "assistant"}
	if text := t.text(); text != "" || len(t.ToolCalls) == 0 {
		msg.Content = &text
	}
	for i, call := range t.ToolCalls {
		msg.ToolCalls = append(msg.ToolCalls, wireToolCall{ID: call.id(rp.n, i), Type: "function",
			Function: wireFunction{Name: call.Name, Arguments: call.ArgumentsText()}})
	}
	ch := wireChoice{Message: msg}
	if reason, ok := t.finishReason(); ok {
		ch.FinishReason = &reason
	}
	b, _ := json.Marshal(wireCompletion{ID: rp.id(), Object: "chat.completion", Created: rp.s.created,
		Model: rp.model(), Choices: []wireChoice{ch}, Usage: t.Usage})
	_, _ = rp.w.Write(b)
}

// splitBytes cuts s into pieces of about n bytes, on rune boundaries.
func splitBytes(s string, n int) []string {
	var out []string
	for len(s) > n {
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		if cut == 0 {
			cut = n
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
