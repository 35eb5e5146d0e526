package openaicompat_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/model/openaicompat"
	"github.com/exprd/exprd/model/scripted"
)

var lampTurn = scripted.Turn{
	Text: "Let me look that up for you.",
	ToolCalls: []scripted.ToolCall{
		{ID: "call_lamps", Name: "search", Arguments: json.RawMessage(`{"query":"desk lamp","max_price":50,"in_stock":true}`)},
		{ID: "call_rate", Name: "rate", Arguments: json.RawMessage(`{"to":"USD"}`)},
	},
	Usage: &scripted.Usage{PromptTokens: 31, CompletionTokens: 17, TotalTokens: 48},
}

var lampResponse = model.Response{
	ID:    "chatcmpl-scripted-0",
	Model: "test-model",
	Message: model.Assistant("Let me look that up for you.",
		model.ToolCall{ID: "call_lamps", Name: "search", Arguments: `{"query":"desk lamp","max_price":50,"in_stock":true}`},
		model.ToolCall{ID: "call_rate", Name: "rate", Arguments: `{"to":"USD"}`}),
	FinishReason:    model.FinishToolCalls,
	RawFinishReason: "tool_calls",
	Usage:           model.Usage{PromptTokens: 31, CompletionTokens: 17, TotalTokens: 48},
}

// TestTurn runs a turn with text and two tool calls, streamed and not: both
// give the same Response, and the streamed deltas come in order.
func TestTurn(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{true, false} {
		t.Run(map[bool]string{true: "streamed", false: "not streamed"}[stream], func(t *testing.T) {
			t.Parallel()
			srv := serve(t, lampTurn)
			p := provider(t, srv, func(c *openaicompat.ProviderConfig) { c.Stream = &stream })
			evs, resp, err := turn(t, p, ask)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(resp, lampResponse) {
				t.Errorf("got %+v\nwant %+v", resp, lampResponse)
			}
			checkEvents(t, evs, resp)
			if stream && len(evs) < 10 {
				t.Errorf("got %d deltas, want the text and arguments piece by piece", len(evs))
			}
			// The deltas come text first, then call 0's, then call 1's.
			last := -1
			for _, ev := range evs {
				if d, ok := ev.(model.ToolCallDelta); ok {
					if d.Index < last {
						t.Errorf("got a delta of call %d after call %d", d.Index, last)
					}
					last = d.Index
					if d.ID == "" || d.Name == "" {
						t.Errorf("got a delta without id or name: %+v", d)
					}
				} else if last >= 0 {
					t.Errorf("got %#v after the tool calls began", ev)
				}
			}
			if got := srv.Requests()[0].Chat.Stream; got != stream {
				t.Errorf("the server got stream %v, want %v", got, stream)
			}
		})
	}
}

// Turns one after another share one connection, streamed or not: a reply
// read to [DONE] gives its connection back to the pool.
func TestConnectionReuse(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{true, false} {
		t.Run(map[bool]string{true: "streamed", false: "not streamed"}[stream], func(t *testing.T) {
			t.Parallel()
			srv, err := scripted.Start(scripted.Script{Loop: true, Turns: []scripted.Turn{lampTurn}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(srv.Close)
			p := provider(t, srv, func(c *openaicompat.ProviderConfig) { c.Stream = &stream })
			// A few hundred turns: the race the drain closes (the client
			// cancelling before the body's end arrives) is rare.
			const turns = 300
			for range turns {
				if _, _, err := turn(t, p, ask); err != nil {
					t.Fatal(err)
				}
			}
			if n := srv.Connections(); n != 1 {
				t.Errorf("%d turns opened %d connections, want 1", turns, n)
			}
		})
	}
}

func TestComplete(t *testing.T) {
	t.Parallel()
	p := provider(t, serve(t, scripted.Turn{Text: "Two lamps."}), nil)
	resp, err := model.Complete(context.Background(), p, ask)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Content != "Two lamps." || resp.FinishReason != model.FinishStop {
		t.Errorf("got %q (%s), want %q (stop)", resp.Message.Content, resp.FinishReason, "Two lamps.")
	}
}

// TestBadOutput: what a model gets wrong is data or a named error, never a
// crash and never a clean end.
func TestBadOutput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		turn    scripted.Turn
		stream  bool
		wantErr error
		check   func(t *testing.T, r model.Response)
	}{
		{"malformed tool-call arguments", scripted.Turn{ToolCalls: []scripted.ToolCall{
			{ID: "a", Name: "search", Arguments: json.RawMessage(`"{\"query\": \"lamp"`)},
			{ID: "b", Name: "rate", Arguments: json.RawMessage(`{"to":"USD"}`)}}}, true, nil,
			func(t *testing.T, r model.Response) {
				bad, good := r.Message.ToolCalls[0], r.Message.ToolCalls[1]
				if bad.Arguments != `{"query": "lamp` || !errors.Is(bad.ArgumentsErr, model.ErrInvalidArguments) {
					t.Errorf("got %q and %v, want the raw arguments and ErrInvalidArguments", bad.Arguments, bad.ArgumentsErr)
				}
				if good.ArgumentsErr != nil {
					t.Errorf("got %v for valid arguments", good.ArgumentsErr)
				}
			}},
		{"malformed arguments, not streamed", scripted.Turn{ToolCalls: []scripted.ToolCall{
			{ID: "a", Name: "search", Arguments: json.RawMessage(`"[1,"`)}}}, false, nil,
			func(t *testing.T, r model.Response) {
				if c := r.Message.ToolCalls[0]; c.Arguments != "[1," || c.ArgumentsErr == nil {
					t.Errorf("got %q and %v, want the raw arguments and an error", c.Arguments, c.ArgumentsErr)
				}
			}},
		{"unknown finish reason", scripted.Turn{Text: "hm", FinishReason: "gremlins"}, true, nil,
			func(t *testing.T, r model.Response) {
				if r.FinishReason != model.FinishOther || r.RawFinishReason != "gremlins" {
					t.Errorf("got %q (raw %q), want other (raw gremlins)", r.FinishReason, r.RawFinishReason)
				}
			}},
		{"unknown finish reason, not streamed", scripted.Turn{Text: "hm", FinishReason: "gremlins"}, false, nil,
			func(t *testing.T, r model.Response) {
				if r.FinishReason != model.FinishOther {
					t.Errorf("got %q, want other", r.FinishReason)
				}
			}},
		{"empty choice list", scripted.Turn{Chunks: []string{`{"id":"x","choices":[]}`, "[DONE]"}}, true, model.ErrNoChoices, nil},
		{"empty choice list, not streamed", scripted.Turn{Body: `{"id":"x","object":"chat.completion","choices":[]}`}, false, model.ErrNoChoices, nil},
		{"stream cut mid-way", scripted.Turn{Text: "one two three four", CutAfter: ptr(3)}, true, model.ErrStreamCut, nil},
		{"stream cut mid tool call", scripted.Turn{ToolCalls: lampTurn.ToolCalls, CutAfter: ptr(4)}, true, model.ErrStreamCut, nil},
		{"stream that just stops", scripted.Turn{Text: "one two three four", EndAfter: ptr(2)}, true, model.ErrStreamCut, nil},
		{"malformed chunk", scripted.Turn{Text: "one two", Malformed: &scripted.Malformed{After: 1}}, true, model.ErrMalformedChunk, nil},
		{"a body that is not JSON, not streamed", scripted.Turn{Body: `{"choices": [`}, false, model.ErrMalformedChunk, nil},
		{"an error mid-stream", scripted.Turn{Text: "one two", Malformed: &scripted.Malformed{After: 2, Data: `{"error":{"message":"overloaded"}}`}}, true, model.ErrModelReported, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := provider(t, serve(t, tt.turn), func(c *openaicompat.ProviderConfig) { c.Stream = &tt.stream })
			_, resp, err := turn(t, p, ask)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got %v, want %v", err, tt.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), `model provider "test"`) {
				t.Errorf("got %q, want the error to name the provider", err)
			}
			if tt.check != nil {
				tt.check(t, resp)
			}
		})
	}
}

// TestServerIgnoresStream: a whole JSON reply to a streamed request is
// read as one.
func TestServerIgnoresStream(t *testing.T) {
	t.Parallel()
	p := provider(t, serve(t, scripted.Turn{Text: "whole", IgnoreStream: true, ToolCalls: lampTurn.ToolCalls[:1]}), nil)
	evs, resp, err := turn(t, p, ask)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Content != "whole" || len(resp.Message.ToolCalls) != 1 || len(evs) != 2 {
		t.Errorf("got %+v after %d deltas, want the whole reply after 2", resp, len(evs))
	}
}

// TestStreamClose: closing mid-stream aborts the request (the server sees
// it) and Recv then says the stream is closed.
func TestStreamClose(t *testing.T) {
	t.Parallel()
	srv := serve(t, scripted.Turn{Text: "a b c d e f g h", ChunkDelayMS: 10_000})
	p := provider(t, srv, nil)
	s, err := p.Stream(context.Background(), ask)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := s.Recv(); !errors.Is(err, model.ErrStreamClosed) {
		t.Errorf("Recv after Close: got %v, want ErrStreamClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	waitFor(t, "the server to see the request end", func() bool { return srv.Requests()[0].Aborted })
}

func TestRecvAfterEnd(t *testing.T) {
	t.Parallel()
	p := provider(t, serve(t, scripted.Turn{Text: "x"}), nil)
	s, err := p.Stream(context.Background(), ask)
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := s.Recv(); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			break
		}
	}
	_ = s.Close()
	if _, err := s.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("got %v after the end and Close, want io.EOF", err)
	}
}

// splitN is n bytes of filler text in k pieces.
func splitN(n, k int) []string {
	out := make([]string, k)
	for i := range out {
		out[i] = strings.Repeat("x", n/k)
	}
	out[k-1] += strings.Repeat("x", n-k*(n/k))
	return out
}

// emptyCalls is a stream of n tool calls with neither name nor arguments,
// 1,000 to an event: each opens a call that counts CallBytes.
func emptyCalls(n int) string {
	var b strings.Builder
	for i := 0; i < n; i += 1000 {
		b.WriteString(`data: {"choices":[{"delta":{"tool_calls":[`)
		for j := i; j < min(n, i+1000); j++ {
			if j > i {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"index":%d}`, j)
		}
		b.WriteString("]}}]}\n\n")
	}
	b.WriteString(`data: {"choices":[{"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n")
	return b.String()
}

// TestReplyLimits checks MaxEventBytes and MaxReplyBytes at the limit and
// one past it.
func TestReplyLimits(t *testing.T) {
	t.Parallel()
	// pad makes a JSON text exactly n bytes long: prefix, filler text, suffix.
	pad := func(prefix, suffix string, n int) string {
		return prefix + strings.Repeat("x", n-len(prefix)-len(suffix)) + suffix
	}
	const chunkPrefix, chunkSuffix = `data: {"choices":[{"delta":{"content":"`, `"},"finish_reason":"stop"}]}`
	const bodyPrefix, bodySuffix = `{"choices":[{"index":0,"message":{"role":"assistant","content":"`, `"},"finish_reason":"stop"}]}`
	tests := []struct {
		name    string
		turn    scripted.Turn
		stream  bool
		wantErr error
	}{
		{"a line at MaxEventBytes", scripted.Turn{SSE: pad(chunkPrefix, chunkSuffix, openaicompat.MaxEventBytes) + "\n\ndata: [DONE]\n\n"}, true, nil},
		{"a line past MaxEventBytes", scripted.Turn{SSE: pad(chunkPrefix, chunkSuffix, openaicompat.MaxEventBytes+1) + "\n\ndata: [DONE]\n\n"}, true, model.ErrReplyTooLarge},
		{"a reply at MaxReplyBytes", scripted.Turn{Body: pad(bodyPrefix, bodySuffix, openaicompat.MaxReplyBytes)}, false, nil},
		{"a reply past MaxReplyBytes", scripted.Turn{Body: pad(bodyPrefix, bodySuffix, openaicompat.MaxReplyBytes+1)}, false, model.ErrReplyTooLarge},
		{"a stream at MaxReplyBytes", scripted.Turn{TextChunks: splitN(openaicompat.MaxReplyBytes, 4)}, true, nil},
		{"a stream past MaxReplyBytes", scripted.Turn{TextChunks: append(splitN(openaicompat.MaxReplyBytes, 4), "x")}, true, model.ErrReplyTooLarge},
		{"a stream of empty tool calls at MaxReplyBytes", scripted.Turn{SSE: emptyCalls(openaicompat.MaxReplyBytes / openaicompat.CallBytes)}, true, nil},
		{"a stream of empty tool calls past MaxReplyBytes", scripted.Turn{SSE: emptyCalls(openaicompat.MaxReplyBytes/openaicompat.CallBytes + 1)}, true, model.ErrReplyTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := provider(t, serve(t, tt.turn), func(c *openaicompat.ProviderConfig) { c.Stream = &tt.stream })
			_, resp, err := turn(t, p, ask)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got %v, want %v", err, tt.wantErr)
			}
			if err == nil && tt.turn.SSE == "" && !strings.HasPrefix(resp.Message.Content, "xxxx") {
				t.Errorf("got content %.20q..., want the filler", resp.Message.Content)
			}
		})
	}
}

// Waves of turns held open at once reuse the connections of the first
// wave while they are at most the idle connections kept: at the limit,
// three waves open one wave's connections; one past it, each later wave
// opens at least one more.
func TestConnectionsKeptForWaves(t *testing.T) {
	t.Parallel()
	const idle, waves = 8, 3
	for _, tt := range []struct {
		name     string
		inFlight int
		want     func(conns int) bool
	}{
		{"at the limit", idle, func(n int) bool { return n == idle }},
		{"one past it", idle + 1, func(n int) bool { return n >= idle+1+(waves-1) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, err := scripted.Start(scripted.Script{Loop: true, Turns: []scripted.Turn{lampTurn}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(srv.Close)
			p := provider(t, srv, nil, openaicompat.WithIdleConns(idle))
			for range waves {
				var open []model.Stream
				for range tt.inFlight { // each held open: a connection of its own
					s, err := p.Stream(context.Background(), ask)
					if err != nil {
						t.Fatal(err)
					}
					open = append(open, s)
				}
				for _, s := range open {
					if _, _, err := drain(t, s); err != nil {
						t.Fatal(err)
					}
				}
			}
			if n := srv.Connections(); !tt.want(n) {
				t.Errorf("%d waves of %d turns at once opened %d connections", waves, tt.inFlight, n)
			}
		})
	}
}

func TestWithIdleConnsRefusesNone(t *testing.T) {
	t.Parallel()
	if _, err := openaicompat.New("test", openaicompat.ProviderConfig{BaseURL: "http://127.0.0.1:1/v1", Model: "m"}, openaicompat.WithIdleConns(0)); err == nil {
		t.Fatal("WithIdleConns(0): no error")
	}
}
