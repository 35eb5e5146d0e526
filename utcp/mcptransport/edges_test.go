package mcptransport_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/manual"
	"github.com/exprd/exprd/utcp/mcptransport"
)

// register registers one server's tools as manual m.
func register(t *testing.T, reg *utcp.Registry, url string) *utcp.Registration {
	t.Helper()
	r, err := reg.Register(context.Background(), "m", utcp.FromTemplate(mcpManual(map[string]string{"s": url})))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// reason is the transport failure reason of err ("" when it is none).
func reason(err error) utcp.Reason {
	var te *utcp.TransportError
	if errors.As(err, &te) {
		return te.Reason
	}
	return ""
}

func manyTools(n int) func(*mcp.Server) {
	return func(s *mcp.Server) {
		for i := range n {
			textTool(s, fmt.Sprintf("t%04d", i), func(map[string]any) string { return "ok" })
		}
	}
}

func TestEveryPageOfToolsList(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		tools     int
		pageSize  int
		wantError string
	}{
		{"ten tools in pages of three", 10, 3, ""},
		{"MaxToolsPerServer in MaxListPages pages", mcptransport.MaxToolsPerServer, mcptransport.MaxToolsPerServer / mcptransport.MaxListPages, ""},
		{"one tool past MaxToolsPerServer", mcptransport.MaxToolsPerServer + 1, 1000, fmt.Sprintf("lists more than %d tools", mcptransport.MaxToolsPerServer)},
		{"one page past MaxListPages", mcptransport.MaxListPages + 1, 1, fmt.Sprintf("in more than %d pages", mcptransport.MaxListPages)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := startGoServer(t, true, &mcp.ServerOptions{PageSize: tc.pageSize}, manyTools(tc.tools))
			reg, _ := newRegistry(t)
			r, err := reg.Register(context.Background(), "m", utcp.FromTemplate(mcpManual(map[string]string{"s": srv.URL})))
			if tc.wantError != "" {
				if !errors.Is(err, manual.ErrInvalid) || !strings.Contains(err.Error(), tc.wantError) {
					t.Fatalf("got %v, want an invalid manual saying %q", err, tc.wantError)
				}
				if len(reg.Manuals()) != 0 {
					t.Errorf("manuals after the refusal: %v, want none", reg.Manuals())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Tools) != tc.tools {
				t.Fatalf("got %d tools, want %d", len(r.Tools), tc.tools)
			}
		})
	}
}

func TestToolDefinitionsKept(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	srv := startGoServer(t, true, nil, func(s *mcp.Server) {
		s.AddTool(&mcp.Tool{Name: "weather", Title: "Weather", Description: "The weather in a city.",
			InputSchema:  json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
			OutputSchema: json.RawMessage(`{"type":"object","properties":{"temp":{"type":"number"}}}`),
			Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: &no, OpenWorldHint: &yes}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{StructuredContent: map[string]any{"temp": 21.5}, Content: []mcp.Content{&mcp.TextContent{Text: `{"temp": 21.5}`}}}, nil
			})
	})
	reg, _ := newRegistry(t)
	register(t, reg, srv.URL)
	tool, err := reg.Tool("m.s.weather")
	if err != nil {
		t.Fatal(err)
	}
	if tool.Title != "Weather" || tool.Description != "The weather in a city." {
		t.Errorf("title %q, description %q", tool.Title, tool.Description)
	}
	a := tool.Annotations
	if a == nil || !*a.ReadOnlyHint || !*a.IdempotentHint || *a.DestructiveHint || !*a.OpenWorldHint {
		t.Errorf("annotations: got %+v", a)
	}
	if !strings.Contains(string(tool.Outputs), `"temp"`) {
		t.Errorf("outputs: got %s", tool.Outputs)
	}
	// The input schema is checked before anything is sent.
	if _, err := reg.Call(context.Background(), "m.s.weather", map[string]any{}); !errors.Is(err, manual.ErrInvalidArguments) {
		t.Errorf("no city: got %v, want invalid arguments", err)
	}
	v, err := reg.Call(context.Background(), "m.s.weather", map[string]any{"city": "Oslo"})
	if err != nil || !reflect.DeepEqual(v, map[string]any{"temp": 21.5}) {
		t.Errorf("structured: got %#v, %v", v, err)
	}
	// The manual a store shares round-trips the new fields.
	res, err := reg.Resolve(context.Background(), "m2", utcp.FromTemplate(mcpManual(map[string]string{"s": srv.URL})))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(res.Manual)
	back, err := manual.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Tools[0]; got.Title != "Weather" || !reflect.DeepEqual(got.Annotations, a) {
		t.Errorf("round trip: title %q annotations %+v", got.Title, got.Annotations)
	}
	if strings.Contains(string(raw), "${") {
		t.Errorf("manual holds %s", raw)
	}
}

func TestProtocolRevisions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		stateless bool
		want      string
	}{{true, "2026-07-28"}, {false, "2025-11-25"}} {
		srv := startGoServer(t, tc.stateless, nil, manyTools(1))
		var seen atomic.Value
		rec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if v := r.Header.Get("Mcp-Protocol-Version"); v != "" {
				seen.Store(v)
			}
			proxy(w, r, srv.URL)
		}))
		t.Cleanup(rec.Close)
		reg, _ := newRegistry(t)
		register(t, reg, rec.URL)
		if _, err := reg.Call(context.Background(), "m.s.t0000", nil); err != nil {
			t.Fatal(err)
		}
		if got, _ := seen.Load().(string); got != tc.want {
			t.Errorf("stateless %v: negotiated %q, want %q", tc.stateless, got, tc.want)
		}
	}
}

// proxy forwards a request to base, streaming the answer.
func proxy(w http.ResponseWriter, r *http.Request, base string) {
	req, _ := http.NewRequestWithContext(r.Context(), r.Method, base+r.URL.RequestURI(), r.Body)
	req.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			_, _ = w.Write(buf[:n])
			w.(http.Flusher).Flush()
		}
		if err != nil {
			return
		}
	}
}

func TestResults(t *testing.T) {
	t.Parallel()
	srv := startGoServer(t, false, nil, func(s *mcp.Server) {
		add := func(name string, res *mcp.CallToolResult, err error) {
			s.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return res, err })
		}
		add("fails", &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no such city"}}}, nil)
		add("fails-json", &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{
			Text: `{"error":{"type":"not_found","code":"city_unknown","message":"no such city"}}`}}}, nil)
		add("rpc", nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "bad city"})
		add("image", &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{MIMEType: "image/png", Data: []byte{1, 2, 3}}}}, nil)
		add("two", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a"}, &mcp.TextContent{Text: "[1]"}}}, nil)
		add("empty", &mcp.CallToolResult{}, nil)
	})
	for _, show := range []bool{false, true} {
		var opts []utcp.Option
		if show {
			opts = append(opts, utcp.WithProviderMessages())
		}
		reg, _ := newRegistry(t, opts...)
		register(t, reg, srv.URL)
		// Its text is never shown; of a JSON object, with messages on,
		// the error's type and code are.
		_, err := reg.Call(context.Background(), "m.s.fails", nil)
		want := `tool "m.s.fails": tool-error: the tool reported an error`
		if reason(err) != mcptransport.ReasonToolError || err.Error() != want {
			t.Errorf("isError (messages %v): got %v, want %q", show, err, want)
		}
		_, err = reg.Call(context.Background(), "m.s.fails-json", nil)
		want = `tool "m.s.fails-json": tool-error: the tool reported an error`
		if show {
			want += `: {"code":"city_unknown","type":"not_found"}`
		}
		if reason(err) != mcptransport.ReasonToolError || err.Error() != want {
			t.Errorf("isError, JSON (messages %v): got %v, want %q", show, err, want)
		}
		_, err = reg.Call(context.Background(), "m.s.rpc", nil)
		if reason(err) != mcptransport.ReasonRPCError || !strings.Contains(err.Error(), "error -32602") || strings.Contains(err.Error(), "bad city") {
			t.Errorf("rpc error (messages %v): got %v", show, err)
		}
	}
	reg, _ := newRegistry(t)
	register(t, reg, srv.URL)
	for name, want := range map[string]any{
		"image": map[string]any{"type": "image", "mime_type": "image/png", "data": "AQID"},
		"two":   []any{"a", []any{1.0}},
		"empty": nil,
	} {
		v, err := reg.Call(context.Background(), "m.s."+name, nil)
		if err != nil || !reflect.DeepEqual(v, want) {
			t.Errorf("%s: got %#v, %v; want %#v", name, v, err, want)
		}
	}
}

// blocking is a tool that answers only when its context ends, and says so.
func blocking(s *mcp.Server, cancelled chan<- struct{}) {
	s.AddTool(&mcp.Tool{Name: "wait", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			<-ctx.Done()
			cancelled <- struct{}{}
			return nil, ctx.Err()
		})
}

func TestDeadlineAndCancelReachTheServer(t *testing.T) {
	t.Parallel()
	for _, stateless := range []bool{true, false} {
		cancelled := make(chan struct{}, 2)
		srv := startGoServer(t, stateless, nil, func(s *mcp.Server) {
			blocking(s, cancelled)
			textTool(s, "ok", func(map[string]any) string { return "ok" })
		})
		reg, _ := newRegistry(t)
		register(t, reg, srv.URL)

		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		_, err := reg.Call(ctx, "m.s.wait", nil)
		cancel()
		if !errors.Is(err, utcp.ErrTimeout) {
			t.Errorf("deadline: got %v, want a timeout", err)
		}
		waitFor(t, cancelled, "the server to see the deadline's cancellation")

		ctx, cancel = context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		_, err = reg.Call(ctx, "m.s.wait", nil)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancel: got %v, want context.Canceled", err)
		}
		waitFor(t, cancelled, "the server to see the cancellation")
		if v, err := reg.Call(context.Background(), "m.s.ok", nil); err != nil || v != "ok" {
			t.Errorf("after: got %v, %v", v, err)
		}
	}
}

func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("waited 10s for %s", what)
	}
}

func TestProgressIsStreamChunks(t *testing.T) {
	t.Parallel()
	for _, stateless := range []bool{true, false} {
		// The tool sends its next notification once the test has read the
		// last one: a long-running tool's progress, without timing.
		step := make(chan struct{})
		srv := startGoServer(t, stateless, nil, func(s *mcp.Server) {
			s.AddTool(&mcp.Tool{Name: "slow", InputSchema: json.RawMessage(`{"type":"object"}`)},
				func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					if tok := req.Params.GetProgressToken(); tok != nil {
						for i := 1; i <= 3; i++ {
							_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 3, Message: fmt.Sprintf("step %d", i)})
							select {
							case <-step:
							case <-ctx.Done():
								return nil, ctx.Err()
							}
						}
					}
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
				})
		})
		reg, _ := newRegistry(t)
		register(t, reg, srv.URL)
		st, err := reg.CallStream(context.Background(), "m.s.slow", nil)
		if err != nil {
			t.Fatal(err)
		}
		var chunks []any
		for {
			c, err := st.Next()
			if err != nil {
				if err.Error() != "EOF" {
					t.Fatal(err)
				}
				break
			}
			chunks = append(chunks, c)
			if _, progress := c.(map[string]any); progress {
				step <- struct{}{}
			}
		}
		want := []any{
			map[string]any{"progress": 1.0, "total": 3.0, "message": "step 1"},
			map[string]any{"progress": 2.0, "total": 3.0, "message": "step 2"},
			map[string]any{"progress": 3.0, "total": 3.0, "message": "step 3"},
			"done",
		}
		if !reflect.DeepEqual(chunks, want) {
			t.Errorf("stateless %v: chunks %v, want %v", stateless, chunks, want)
		}
		// Call sends no progress token: the result alone.
		if v, err := reg.Call(context.Background(), "m.s.slow", nil); err != nil || v != "done" {
			t.Errorf("call: %v, %v", v, err)
		}
	}
}

func TestOversizedResult(t *testing.T) {
	t.Parallel()
	const limit = 4096
	for _, stateless := range []bool{true, false} {
		srv := startGoServer(t, stateless, nil, func(s *mcp.Server) {
			textTool(s, "big", func(args map[string]any) string { return strings.Repeat("x", int(args["n"].(float64))) })
		})
		reg, _ := newRegistry(t, utcp.WithMaxResponseBytes(limit))
		register(t, reg, srv.URL)
		// At the limit of the answer's bytes (the JSON-RPC envelope counts),
		// and past it.
		if _, err := reg.Call(context.Background(), "m.s.big", map[string]any{"n": limit / 2}); err != nil {
			t.Errorf("stateless %v: under the limit: %v", stateless, err)
		}
		_, err := reg.Call(context.Background(), "m.s.big", map[string]any{"n": limit + 1})
		if reason(err) != utcp.ReasonTooLarge {
			t.Errorf("stateless %v: past the limit: got %v, want response-too-large", stateless, err)
		}
		// The caller's smaller limit holds too.
		_, err = reg.Call(utcp.WithResponseLimit(context.Background(), 512), "m.s.big", map[string]any{"n": 1024})
		if reason(err) != utcp.ReasonTooLarge {
			t.Errorf("stateless %v: past the caller's limit: got %v", stateless, err)
		}
		if v, err := reg.Call(context.Background(), "m.s.big", map[string]any{"n": 3}); err != nil || v != "xxx" {
			t.Errorf("stateless %v: after: %v, %v", stateless, v, err)
		}
	}
}

// corrupt replaces "BAD" by an invalid UTF-8 byte in what a handler writes.
type corrupt struct{ http.ResponseWriter }

func (c corrupt) Write(p []byte) (int, error) {
	_, err := c.ResponseWriter.Write(bytes.ReplaceAll(p, []byte("BAD"), []byte("\xffAD")))
	return len(p), err
}
func (c corrupt) Flush() { c.ResponseWriter.(http.Flusher).Flush() }

func TestHostileServers(t *testing.T) {
	t.Parallel()
	t.Run("invalid UTF-8", func(t *testing.T) {
		t.Parallel()
		for _, stateless := range []bool{true, false} {
			srv := startGoServer(t, stateless, nil, func(s *mcp.Server) {
				textTool(s, "bad", func(map[string]any) string { return "BAD" })
				textTool(s, "good", func(map[string]any) string { return "good" })
			})
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				proxy(corrupt{w}, r, srv.URL)
			}))
			t.Cleanup(hs.Close)
			reg, _ := newRegistry(t)
			register(t, reg, hs.URL)
			_, err := reg.Call(context.Background(), "m.s.bad", nil)
			if reason(err) != utcp.ReasonMalformed {
				t.Errorf("stateless %v: got %v, want malformed-response", stateless, err)
			}
		}
	})
	t.Run("a server that never answers", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		srv := startGoServer(t, true, nil, func(s *mcp.Server) {
			s.AddTool(&mcp.Tool{Name: "hang", InputSchema: json.RawMessage(`{"type":"object"}`)},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					<-release
					return &mcp.CallToolResult{}, nil
				})
			textTool(s, "ok", func(map[string]any) string { return "ok" })
		})
		t.Cleanup(func() { close(release) }) // before the server's Close, which waits for it
		// One that never answers its set-up (closed after the registry).
		mute := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body) // then the server notices the client leave
			<-r.Context().Done()
		}))
		t.Cleanup(mute.Close)
		reg, _ := newRegistry(t)
		register(t, reg, srv.URL)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		if _, err := reg.Call(ctx, "m.s.hang", nil); !errors.Is(err, utcp.ErrTimeout) {
			t.Errorf("got %v, want a timeout", err)
		}
		if v, err := reg.Call(context.Background(), "m.s.ok", nil); err != nil || v != "ok" {
			t.Errorf("after: %v, %v", v, err)
		}
		dctx, dcancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer dcancel()
		_, err := reg.Register(dctx, "mute", utcp.FromTemplate(mcpManual(map[string]string{"s": mute.URL})))
		if !errors.Is(err, context.DeadlineExceeded) || len(reg.Manuals()) != 1 {
			t.Errorf("mute: got %v, manuals %v; want the deadline, and m alone", err, reg.Manuals())
		}
	})
	t.Run("endless notifications", func(t *testing.T) {
		t.Parallel()
		srv := startGoServer(t, false, nil, func(s *mcp.Server) {
			s.AddTool(&mcp.Tool{Name: "flood", InputSchema: json.RawMessage(`{"type":"object"}`)},
				func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					for ctx.Err() == nil {
						if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: "not-ours", Progress: 1}); err != nil {
							break
						}
					}
					return nil, ctx.Err()
				})
			textTool(s, "ok", func(map[string]any) string { return "ok" })
		})
		reg, _ := newRegistry(t)
		register(t, reg, srv.URL)
		_, err := reg.Call(context.Background(), "m.s.flood", nil)
		if reason(err) != utcp.ReasonBroken || !strings.Contains(err.Error(), "messages a second") {
			t.Errorf("got %v, want the session closed for the flood", err)
		}
		// The server is tried again after the back-off. Under load the
		// flood's last notifications can still reach the new session and
		// close it again (seen once in CI): a few back-offs are allowed.
		var v any
		for range 5 {
			time.Sleep(mcptransport.MinBackoff + 50*time.Millisecond)
			if v, err = reg.Call(context.Background(), "m.s.ok", nil); err == nil {
				break
			}
		}
		if err != nil || v != "ok" {
			t.Errorf("after: %v, %v", v, err)
		}
	})
}
