package scripted_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/exprd/exprd/model/scripted"
)

// start runs a server for the script until the test ends.
func start(t *testing.T, s scripted.Script) *scripted.Server {
	t.Helper()
	srv, err := scripted.Start(s)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// client is an HTTP client whose connections end with the test.
func client(t *testing.T) *http.Client {
	t.Helper()
	c := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// chatBody is a minimal request body.
func chatBody(stream bool, messages ...map[string]any) map[string]any {
	if len(messages) == 0 {
		messages = []map[string]any{{"role": "user", "content": "hello"}}
	}
	b := map[string]any{"model": "test-model", "messages": messages}
	if stream {
		b["stream"] = true
		b["stream_options"] = map[string]any{"include_usage": true}
	}
	return b
}

func post(t *testing.T, c *http.Client, url string, body any, header ...string) *http.Response {
	t.Helper()
	return postCtx(t, context.Background(), c, url, body, header...)
}

func postCtx(t *testing.T, ctx context.Context, c *http.Client, url string, body any, header ...string) *http.Response {
	t.Helper()
	var b []byte
	switch v := body.(type) {
	case []byte:
		b = v
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/chat/completions", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	return res
}

// events reads an SSE body's data payloads, and the error that ended it.
func events(t *testing.T, res *http.Response) ([]string, error) {
	t.Helper()
	defer res.Body.Close()
	if got := res.Header.Get("Content-Type"); got != "text/event-stream" {
		t.Fatalf("got Content-Type %q, want text/event-stream", got)
	}
	var out []string
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, data)
		}
	}
	return out, sc.Err()
}

func readAll(t *testing.T, res *http.Response) string {
	t.Helper()
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return string(b)
}

// chunk is a streamed chunk as a client sees it.
type chunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Role      string  `json:"role"`
			Content   *string `json:"content"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *scripted.Usage `json:"usage"`
}

func decodeChunks(t *testing.T, data []string) []chunk {
	t.Helper()
	var out []chunk
	for _, d := range data {
		if d == "[DONE]" {
			continue
		}
		var c chunk
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatalf("chunk %q: %v", d, err)
		}
		out = append(out, c)
	}
	return out
}

// waitFor polls cond until it holds or a few seconds pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func intp(v int) *int { return &v }
