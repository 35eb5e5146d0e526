package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/exprd/exprd/model/scripted"
)

// The model's timing, as a hosted model streams: the first delta of a
// reply 300 ms after the request, then one every 20 ms.
const (
	firstDelta  = 300 * time.Millisecond
	deltaPeriod = 20 * time.Millisecond
	// textDeltas is how many text deltas the answer streams.
	textDeltas = 50
)

// The turn both sides run: the model calls get_weather (run by the
// client: exprd's Go client, or xsai's tool in node), then answers with
// textDeltas deltas, each carrying the time it was written.
const (
	toolName   = "get_weather"
	toolArgs   = `{"city":"Paris"}`
	toolResult = `{"city":"Paris","temp_c":18,"sky":"clear"}`
	prompt     = "What is the weather in Paris?"
)

// modelServer is an OpenAI-compatible chat-completions server on loopback
// with the timing above, for turns held in flight at once:
//
//   - a request whose last message is the user's (a turn's first) is
//     answered with one call of get_weather; one whose last message is the
//     tool's result (the second) with textDeltas text deltas, each
//     "<ns>;" where ns is time.Now().UnixNano() when the server wrote it;
//   - streamed (SSE) or not (one body, sent when the last delta would
//     have been, as generateText asks);
//   - a gate: armed for n requests of one kind, it holds them, before
//     their first byte, until all n have arrived, so that every turn of a
//     phase is in flight at the same time (the harness reads the memory
//     then); the 300 ms count from the release;
//   - each request's deltas are offset by a part of the 20 ms period that
//     depends on its order of arrival (spread evenly over the period), so
//     that n turns do not all write in the same instant;
//   - it counts accepted connections (http.Server's ConnState), and the
//     most open at once.
//
// Model replies are made here, not by model/scripted, because the stamp
// must be taken when each delta is written; the requests are decoded as
// scripted decodes them.
type modelServer struct {
	url string
	srv *http.Server

	seq          atomic.Int64
	open, opened atomic.Int64
	maxOpen      atomic.Int64

	mu   sync.Mutex
	gate *gate

	// bad counts requests not as the turn has them (a second request
	// without the tool's result, say); mismatch keeps the first.
	bad      atomic.Int64
	mismatch atomic.Value
	served   [2]atomic.Int64 // by kind: first, answer
}

// Kinds of request, for the gate.
const (
	kindFirst  = 0 // the turn's first request: the user's message
	kindAnswer = 1 // the second, carrying the tool's result
)

type gate struct {
	kind    int
	want    int
	arrived int
	all     chan struct{} // closed when want have arrived
	release chan struct{} // closed by Release
}

func startModel() (*modelServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	m := &modelServer{url: "http://" + ln.Addr().String()}
	m.srv = &http.Server{
		Handler:           http.HandlerFunc(m.serveHTTP),
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
		ConnState: func(_ net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				m.opened.Add(1)
				n := m.open.Add(1)
				for {
					was := m.maxOpen.Load()
					if n <= was || m.maxOpen.CompareAndSwap(was, n) {
						break
					}
				}
			case http.StateClosed, http.StateHijacked:
				m.open.Add(-1)
			}
		},
	}
	go func() { _ = m.srv.Serve(ln) }()
	return m, nil
}

func (m *modelServer) baseURL() string { return m.url + "/v1" }

func (m *modelServer) close() { _ = m.srv.Close() }

// arm makes the next n requests of kind wait for release; all is closed
// once they have all arrived.
func (m *modelServer) arm(kind, n int) (all chan struct{}, release func()) {
	g := &gate{kind: kind, want: n, all: make(chan struct{}), release: make(chan struct{})}
	m.mu.Lock()
	m.gate = g
	m.mu.Unlock()
	var once sync.Once
	return g.all, func() { once.Do(func() { close(g.release) }) }
}

// wait holds a request of kind at the gate, when one is armed for it.
func (m *modelServer) wait(r *http.Request, kind int) bool {
	m.mu.Lock()
	g := m.gate
	if g == nil || g.kind != kind || g.arrived == g.want {
		m.mu.Unlock()
		return true
	}
	g.arrived++
	if g.arrived == g.want {
		close(g.all)
	}
	m.mu.Unlock()
	select {
	case <-g.release:
		return true
	case <-r.Context().Done():
		return false
	}
}

func (m *modelServer) fail(format string, args ...any) {
	m.bad.Add(1)
	m.mismatch.CompareAndSwap(nil, fmt.Sprintf(format, args...))
}

// problem is the first request not as the turn has it, "" when none.
func (m *modelServer) problem() string {
	if n := m.bad.Load(); n > 0 {
		return fmt.Sprintf("%d requests not as scripted, the first: %v", n, m.mismatch.Load())
	}
	return ""
}

func (m *modelServer) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.NotFound(w, r)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, scripted.MaxRequestBytes))
	if err != nil {
		return
	}
	var chat scripted.ChatRequest
	if err := json.Unmarshal(body, &chat); err != nil || len(chat.Messages) == 0 {
		m.fail("not a chat request: %.200s", body)
		http.Error(w, "not a chat request", http.StatusBadRequest)
		return
	}
	kind := kindFirst
	switch last := chat.Messages[len(chat.Messages)-1]; last.Role {
	case "user":
		if len(chat.Tools) != 1 || chat.Tools[0].Function.Name != toolName {
			m.fail("the first request offers %d tools, want %s alone", len(chat.Tools), toolName)
		}
	case "tool":
		kind = kindAnswer
		if !jsonEqual(last.Content, toolResult) {
			m.fail("the tool message is %q, want %s", last.Content, toolResult)
		}
	default:
		m.fail("the last message is the %s's", last.Role)
		http.Error(w, "unexpected last message", http.StatusBadRequest)
		return
	}
	n := m.seq.Add(1)
	if !m.wait(r, kind) {
		return
	}
	m.served[kind].Add(1)
	// The reply's clock starts now (after the gate), offset within the
	// period by the request's order of arrival.
	start := time.Now().Add(time.Duration(n*7919%int64(deltaPeriod/time.Microsecond)) * time.Microsecond)
	rp := &modelReply{w: w, r: r, id: "chatcmpl-inflight-" + strconv.FormatInt(n, 10), model: chat.Model, n: n, start: start}
	switch {
	case !chat.Stream:
		rp.whole(kind)
	case kind == kindFirst:
		rp.streamCall(chat.IncludeUsage())
	default:
		rp.streamText(chat.IncludeUsage())
	}
}

// modelReply writes one reply.
type modelReply struct {
	w     http.ResponseWriter
	r     *http.Request
	id    string
	model string
	n     int64
	start time.Time
}

// at sleeps until the reply's clock reaches d; false when the client left.
func (rp *modelReply) at(d time.Duration) bool {
	t := time.NewTimer(time.Until(rp.start.Add(d)))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-rp.r.Context().Done():
		return false
	}
}

func (rp *modelReply) callID() string { return "call_" + strconv.FormatInt(rp.n, 10) }

// whole answers a non-streamed request, when the stream's end would be.
func (rp *modelReply) whole(kind int) {
	msg := map[string]any{"role": "assistant", "content": nil}
	finish, at := "tool_calls", firstDelta
	if kind == kindFirst {
		msg["tool_calls"] = []map[string]any{{"id": rp.callID(), "type": "function",
			"function": map[string]string{"name": toolName, "arguments": toolArgs}}}
	} else {
		finish, at = "stop", firstDelta+(textDeltas-1)*deltaPeriod
	}
	if !rp.at(at) {
		return
	}
	if kind == kindAnswer {
		var text strings.Builder
		now := time.Now().UnixNano()
		for range textDeltas {
			text.WriteString(stamp(now))
		}
		msg["content"] = text.String()
	}
	b, _ := json.Marshal(map[string]any{"id": rp.id, "object": "chat.completion", "created": rp.start.Unix(), "model": rp.model,
		"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]int{"prompt_tokens": 40, "completion_tokens": 250, "total_tokens": 290}})
	rp.w.Header().Set("Content-Type", "application/json")
	_, _ = rp.w.Write(b)
}

// stamp is one text delta: the time it is written, in ns, and ";".
func stamp(ns int64) string { return strconv.FormatInt(ns, 10) + ";" }

func (rp *modelReply) streamHeader() {
	h := rp.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	rp.w.WriteHeader(http.StatusOK)
	rp.w.(http.Flusher).Flush()
}

// chunk writes one SSE event of a chat.completion.chunk with delta.
func (rp *modelReply) chunk(delta string, finish string) bool {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return rp.event(`{"id":"` + rp.id + `","object":"chat.completion.chunk","created":` + strconv.FormatInt(rp.start.Unix(), 10) +
		`,"model":` + quote(rp.model) + `,"choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + f + `}]}`)
}

func (rp *modelReply) event(data string) bool {
	if _, err := io.WriteString(rp.w, "data: "+data+"\n\n"); err != nil {
		return false
	}
	rp.w.(http.Flusher).Flush()
	return true
}

func (rp *modelReply) end(usage bool) {
	if usage && !rp.event(`{"id":"`+rp.id+`","object":"chat.completion.chunk","created":`+strconv.FormatInt(rp.start.Unix(), 10)+
		`,"model":`+quote(rp.model)+`,"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":250,"total_tokens":290}}`) {
		return
	}
	rp.event("[DONE]")
}

// streamCall streams the first reply: the role at once, then, at the
// first delta's time, the call of get_weather.
func (rp *modelReply) streamCall(usage bool) {
	rp.streamHeader()
	if !rp.chunk(`{"role":"assistant","content":""}`, "") || !rp.at(firstDelta) {
		return
	}
	call := `{"tool_calls":[{"index":0,"id":"` + rp.callID() + `","type":"function","function":{"name":"` + toolName + `","arguments":` + quote(toolArgs) + `}}]}`
	if rp.chunk(call, "") && rp.chunk(`{}`, "tool_calls") {
		rp.end(usage)
	}
}

// streamText streams the answer: the role at once, then textDeltas
// deltas from the first delta's time on, each stamped as it is written.
func (rp *modelReply) streamText(usage bool) {
	rp.streamHeader()
	if !rp.chunk(`{"role":"assistant","content":""}`, "") {
		return
	}
	for i := range textDeltas {
		if !rp.at(firstDelta + time.Duration(i)*deltaPeriod) {
			return
		}
		if !rp.chunk(`{"content":"`+stamp(time.Now().UnixNano())+`"}`, "") {
			return
		}
	}
	if rp.chunk(`{}`, "stop") {
		rp.end(usage)
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// parseStamps reads a text of deltas "<ns>;" and calls f with each ns.
func parseStamps(text string, f func(ns int64)) error {
	for p := range strings.SplitSeq(strings.TrimSuffix(text, ";"), ";") {
		ns, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return fmt.Errorf("a delta %q is not a stamp", p)
		}
		f(ns)
	}
	return nil
}

func jsonEqual(got, want string) bool {
	var a, b any
	if json.Unmarshal([]byte(got), &a) != nil || json.Unmarshal([]byte(want), &b) != nil {
		return false
	}
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
