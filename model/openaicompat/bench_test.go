package openaicompat_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/model/openaicompat"
	"github.com/exprd/exprd/model/scripted"
)

// benchTurn is a typical streamed turn: 48 words of text and a tool call
// whose arguments come in 6 chunks, 57 chunks in all.
var benchTurn = scripted.Turn{
	Text: strings.Repeat("The quick brown fox jumps over the lazy dog. ", 5) + "It was fine.",
	ToolCalls: []scripted.ToolCall{{Name: "expr", Arguments: json.RawMessage(
		`{"steps":[{"set":"scopes.root.selected","expr":"fromPairs(map(sortBy(scopes.root.products.items, .price)[:5], [.id, true]))"}]}`)}},
	Usage: &scripted.Usage{PromptTokens: 400, CompletionTokens: 80},
}

var benchRequest = model.Request{
	Messages: []model.Message{model.System("You select products."), model.User("Select the five cheapest products.")},
	Tools:    []model.Tool{{Name: "expr", Description: "Runs steps.", Parameters: json.RawMessage(`{"type":"object","properties":{"steps":{"type":"array"}}}`)}},
}

// BenchmarkStreamTurn compares one streamed turn through the provider with
// a bare net/http client that posts the same body and reads the same SSE
// stream: scan the lines, decode each chunk's content and tool-call deltas
// with encoding/json (bare-http). The ratio provider/bare-http is the
// provider's overhead; bare-http-bytes, which only scans the lines, is
// the floor: the server's and the network's share of a turn.
func BenchmarkStreamTurn(b *testing.B) {
	srv, p, body := benchProvider(b, true)
	ctx := context.Background()

	b.Run("provider", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s, err := p.Stream(ctx, benchRequest)
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for {
				_, err := s.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
				n++
			}
			if n < 50 {
				b.Fatalf("got %d events, want more than 50", n)
			}
		}
	})

	b.Run("bare-http", func(b *testing.B) {
		client := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
		defer client.CloseIdleConnections()
		url := srv.BaseURL() + "/chat/completions"
		b.ReportAllocs()
		for b.Loop() {
			if n := bareTurn(b, client, url, body); n < 50 {
				b.Fatalf("got %d chunks, want more than 50", n)
			}
		}
	})

	b.Run("bare-http-bytes", func(b *testing.B) {
		client := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
		defer client.CloseIdleConnections()
		url := srv.BaseURL() + "/chat/completions"
		b.ReportAllocs()
		for b.Loop() {
			if n := bareBytes(b, client, url, body); n < 50 {
				b.Fatalf("got %d chunks, want more than 50", n)
			}
		}
	})
}

// benchProvider serves benchTurn from the scripted server and returns a
// provider for it, streamed or not, and the body the provider sends; both
// end with the benchmark.
func benchProvider(b *testing.B, stream bool) (*scripted.Server, *openaicompat.Provider, []byte) {
	srv, err := scripted.Start(scripted.Script{Loop: true, Turns: []scripted.Turn{benchTurn}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Close)
	p, err := openaicompat.New("bench", openaicompat.ProviderConfig{BaseURL: srv.BaseURL(), Model: "m", Stream: &stream})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	if _, err := model.Complete(context.Background(), p, benchRequest); err != nil {
		b.Fatal(err)
	}
	return srv, p, srv.Requests()[0].Body
}

// post posts body to url as JSON, the bare client's request.
func post(b *testing.B, client *http.Client, url string, body []byte) *http.Response {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	return res
}

func bareBytes(b *testing.B, client *http.Client, url string, body []byte) int {
	res := post(b, client, url, body)
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	n := 0
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok {
			continue
		}
		if bytes.Equal(data, []byte("[DONE]")) {
			return n
		}
		n++
	}
	b.Fatal("stream ended without [DONE]")
	return n
}

type bareChunk struct {
	Choices []struct {
		Delta struct {
			Content   string `json:"content"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
}

func bareTurn(b *testing.B, client *http.Client, url string, body []byte) int {
	res := post(b, client, url, body)
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	n := 0
	var text strings.Builder
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok {
			continue
		}
		if bytes.Equal(data, []byte("[DONE]")) {
			return n
		}
		var c bareChunk
		if err := json.Unmarshal(data, &c); err != nil {
			b.Fatal(err)
		}
		for _, ch := range c.Choices {
			text.WriteString(ch.Delta.Content)
		}
		n++
	}
	b.Fatal("stream ended without [DONE]")
	return n
}

// BenchmarkCompleteTurn is BenchmarkStreamTurn's turn with the provider
// configured not to stream (stream: false, as bench/cmd/agentxsai runs
// exprd against xsai): the provider against a bare net/http client that
// posts the same body and decodes the completion's message with
// encoding/json.
func BenchmarkCompleteTurn(b *testing.B) {
	srv, p, body := benchProvider(b, false)
	ctx := context.Background()

	b.Run("provider", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r, err := model.Complete(ctx, p, benchRequest)
			if err != nil || len(r.Message.ToolCalls) != 1 {
				b.Fatalf("got %+v, %v", r, err)
			}
		}
	})

	b.Run("bare-http", func(b *testing.B) {
		client := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
		defer client.CloseIdleConnections()
		url := srv.BaseURL() + "/chat/completions"
		b.ReportAllocs()
		for b.Loop() {
			res := post(b, client, url, body)
			var c bareCompletion
			err := json.NewDecoder(res.Body).Decode(&c)
			res.Body.Close()
			if err != nil || len(c.Choices) != 1 || len(c.Choices[0].Message.ToolCalls) != 1 {
				b.Fatalf("got %+v, %v", c, err)
			}
		}
	})
}

type bareCompletion struct {
	Choices []struct {
		Message struct {
			Content   string `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}
