package utcp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/exprd/exprd/utcp"
)

// releaseWait is how long a streaming provider waits for the test to have
// seen its first chunk before it sends the last one anyway.
const releaseWait = 5 * time.Second

func drain(t *testing.T, st utcp.Stream) ([]any, error) {
	t.Helper()
	defer st.Close()
	var out []any
	for {
		v, err := st.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, v)
	}
}

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
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			release := make(chan struct{})
			sentLastEarly := make(chan bool, 1)
			p := newProvider(t, func(w http.ResponseWriter, r *http.Request) {
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
			r := newRegistry(t)
			tmpl := map[string]any{"url": p.URL + "/s"}
			for k, v := range tc.tmpl {
				tmpl[k] = v
			}
			register(t, r, "live", manualOf("feed", nil, tmpl))
			st, err := r.CallStream(context.Background(), "live.feed", map[string]any{"topic": "x"})
			if err != nil {
				t.Fatalf("CallStream: %v", err)
			}
			first, err := st.Next()
			if err != nil {
				t.Fatalf("first Next: %v", err)
			}
			close(release)
			rest, err := drain(t, st)
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
			if q := p.requests()[0].Query; q != "topic=x" {
				t.Errorf("query: got %q, want topic=x", q)
			}
		})
	}
}

func TestStreamCallCollectsChunks(t *testing.T) {
	t.Parallel()
	p := newProvider(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		for i := range 3 {
			fmt.Fprintf(w, "{\"i\":%d}\n", i)
		}
	})
	r := newRegistry(t)
	register(t, r, "live", manualOf("feed", nil, map[string]any{"call_template_type": "streamable_http", "url": p.URL}))
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
	p := newProvider(t, nil)
	r := newRegistry(t)
	register(t, r, "svc", manualOf("op", nil, map[string]any{"call_template_type": "http", "url": p.URL}))
	st, err := r.CallStream(context.Background(), "svc.op", nil)
	if err != nil {
		t.Fatalf("CallStream: %v", err)
	}
	got, err := drain(t, st)
	if err != nil || !reflect.DeepEqual(got, []any{map[string]any{"ok": true}}) {
		t.Errorf("got %v %v, want one chunk {ok: true}", got, err)
	}
}

func TestTextToolsCannotBeCalled(t *testing.T) {
	t.Parallel()
	r := newRegistry(t)
	manual := `{"utcp_version": "1.0.1", "tools": [{"name": "doc", "tool_call_template": {"call_template_type": "text", "content": "{}"}}]}`
	if _, err := r.Register(context.Background(), "inline", utcp.FromText(manual)); err != nil {
		t.Fatalf("Register: %v", err)
	}
	_, err := r.Call(context.Background(), "inline.doc", nil)
	var te *utcp.TransportError
	if !errors.As(err, &te) || te.Reason != utcp.ReasonNotCallable {
		t.Errorf("got %v, want ReasonNotCallable", err)
	}
}
