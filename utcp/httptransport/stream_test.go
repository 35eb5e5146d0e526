package httptransport_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/internal/utcptest"
)

// releaseWait is how long a streaming provider waits for the test to have
// seen its first chunk before it sends the last one anyway.
const releaseWait = 5 * time.Second

func TestStreamsReallyStream(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		tmpl  map[string]any
		ctype string
		parts []string // written and flushed one by one; the last waits for release
		want  []any
	}{
		{
			name:  "streamable_http NDJSON",
			tmpl:  map[string]any{"call_template_type": "streamable_http", "http_method": "POST"},
			ctype: "application/x-ndjson",
			parts: []string{`{"step":1}` + "\n", `{"step":2}` + "\n" + `{"step":3}`},
			want:  []any{map[string]any{"step": 1.0}, map[string]any{"step": 2.0}, map[string]any{"step": 3.0}},
		},
		{
			name:  "streamable_http text",
			tmpl:  map[string]any{"call_template_type": "streamable_http"},
			ctype: "text/plain",
			parts: []string{"hello ", "world"},
			want:  []any{"hello ", "world"},
		},
		{
			name:  "streamable_http bytes",
			tmpl:  map[string]any{"call_template_type": "streamable_http"},
			ctype: "application/octet-stream",
			parts: []string{"\x00\x01", "\x02"},
			want:  []any{[]byte{0, 1}, []byte{2}},
		},
		{
			name:  "sse with an event_type filter",
			tmpl:  map[string]any{"call_template_type": "sse", "event_type": "progress"},
			ctype: "text/event-stream",
			parts: []string{
				": a comment\nevent: progress\ndata: {\"pct\": 10}\n\n",
				"data: ignored, type message\n\nevent: progress\ndata: line one\ndata: line two\n\n",
			},
			want: []any{map[string]any{"pct": 10.0}, "line one\nline two"},
		},
		{
			name:  "sse, every event",
			tmpl:  map[string]any{"call_template_type": "sse"},
			ctype: "text/event-stream",
			parts: []string{"data: 1\n\n", "id: 7\nevent: other\ndata: \"two\"\n\n"},
			want:  []any{1.0, "two"},
		},
		{
			// Lines may end with CRLF or a lone CR (an event the body ends
			// inside is a cut stream: TestSSEUnterminatedEventIsACut).
			name:  "sse, CR and CRLF line ends",
			tmpl:  map[string]any{"call_template_type": "sse"},
			ctype: "text/event-stream",
			parts: []string{"data: 1\r\r", "data: a\r\ndata: b\r\n\r\n"},
			want:  []any{1.0, "a\nb"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			release := make(chan struct{})
			sentLastEarly := make(chan bool, 1)
			p := utcptest.NewProvider(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.ctype)
				for i, part := range tc.parts {
					if i == len(tc.parts)-1 {
						select {
						case <-release:
							sentLastEarly <- false
						case <-time.After(releaseWait):
							sentLastEarly <- true
						}
					}
					_, _ = io.WriteString(w, part)
					w.(http.Flusher).Flush()
				}
			})
			r := utcptest.NewRegistry(t)
			tmpl := map[string]any{"url": p.URL + "/s"}
			for k, v := range tc.tmpl {
				tmpl[k] = v
			}
			utcptest.Register(t, r, "live", utcptest.ManualOf("feed", nil, tmpl))
			st, err := r.CallStream(context.Background(), "live.feed", map[string]any{"topic": "x"})
			if err != nil {
				t.Fatalf("CallStream: %v", err)
			}
			first, err := st.Next()
			if err != nil {
				t.Fatalf("first Next: %v", err)
			}
			close(release)
			rest, err := utcptest.Drain(t, st)
			if err != nil {
				t.Fatalf("Next: %v", err)
			}
			got := append([]any{first}, rest...)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("chunks: got %#v, want %#v", got, tc.want)
			}
			if <-sentLastEarly {
				t.Errorf("the first chunk arrived only after the provider sent the last: not streamed")
			}
			if q := p.Requests()[0].Query; q != "topic=x" {
				t.Errorf("query: got %q, want topic=x", q)
			}
		})
	}
}

func TestStreamCallCollectsChunks(t *testing.T) {
	t.Parallel()
	p := utcptest.NewProvider(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		for i := range 3 {
			fmt.Fprintf(w, "{\"i\":%d}\n", i)
		}
	})
	r := utcptest.NewRegistry(t)
	utcptest.Register(t, r, "live", utcptest.ManualOf("feed", nil, map[string]any{"call_template_type": "streamable_http", "url": p.URL}))
	got, err := r.Call(context.Background(), "live.feed", nil)
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	want := []any{map[string]any{"i": 0.0}, map[string]any{"i": 1.0}, map[string]any{"i": 2.0}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestHTTPToolStreamsOneChunk(t *testing.T) {
	t.Parallel()
	p := utcptest.NewProvider(t, nil)
	r := utcptest.NewRegistry(t)
	utcptest.Register(t, r, "svc", utcptest.ManualOf("op", nil, map[string]any{"call_template_type": "http", "url": p.URL}))
	st, err := r.CallStream(context.Background(), "svc.op", nil)
	if err != nil {
		t.Fatalf("CallStream: %v", err)
	}
	got, err := utcptest.Drain(t, st)
	if err != nil || !reflect.DeepEqual(got, []any{map[string]any{"ok": true}}) {
		t.Errorf("got %v %v, want one chunk {ok: true}", got, err)
	}
}

// An SSE line (and an event's data) is bounded by the call's response
// limit: a line at it is read, one byte past it is ReasonTooLarge.
func TestSSELineLimit(t *testing.T) {
	t.Parallel()
	const limit = 1000
	p := utcptest.NewProvider(t, func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: "+strings.Repeat("x", n-len("data: "))+"\n\n")
	})
	r := utcptest.NewRegistry(t)
	utcptest.Register(t, r, "live", utcptest.ManualOf("feed", map[string]any{"type": "object"}, map[string]any{"call_template_type": "sse", "url": p.URL}))
	ctx := utcp.WithResponseLimit(context.Background(), limit)
	if got, err := r.Call(ctx, "live.feed", map[string]any{"n": limit}); err != nil || len(got.([]any)) != 1 {
		t.Errorf("a line at the limit: got %v, want one event", err)
	}
	_, err := r.Call(ctx, "live.feed", map[string]any{"n": limit + 1})
	var te *utcp.TransportError
	if !errors.As(err, &te) || te.Reason != utcp.ReasonTooLarge {
		t.Errorf("a line one past the limit: got %v, want ReasonTooLarge", err)
	}
}

// A body that ends inside an SSE event (data with no blank line after it)
// is a cut stream, ReasonBroken, after the events before it: the last
// event is never lost silently (internal/sse's one rule, as the model
// side reads it).
func TestSSEUnterminatedEventIsACut(t *testing.T) {
	t.Parallel()
	p := httptestServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: 1\n\ndata: cut")
	})
	r := utcptest.NewRegistry(t)
	utcptest.Register(t, r, "live", utcptest.ManualOf("feed", nil, map[string]any{"call_template_type": "sse", "url": p + "/s"}))
	st, err := r.CallStream(context.Background(), "live.feed", map[string]any{})
	if err != nil {
		t.Fatalf("CallStream: %v", err)
	}
	defer st.Close()
	if v, err := st.Next(); err != nil || v != 1.0 {
		t.Fatalf("first Next: %v, %v; want 1", v, err)
	}
	_, err = st.Next()
	var te *utcp.TransportError
	if !errors.As(err, &te) || te.Reason != utcp.ReasonBroken {
		t.Errorf("second Next: got %v, want a TransportError with ReasonBroken", err)
	}
}

func httptestServer(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.URL
}
