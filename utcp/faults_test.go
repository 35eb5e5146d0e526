package utcp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/internal/utcptest"
)

// TestFaults runs each fault against a real provider on loopback.
func TestFaults(t *testing.T) {
	t.Parallel()
	type check func(t *testing.T, err error)
	transport := func(reason utcp.Reason, status int) check {
		return func(t *testing.T, err error) {
			t.Helper()
			var te *utcp.TransportError
			if !errors.As(err, &te) {
				t.Fatalf("got %v, want *TransportError", err)
			}
			if te.Reason != reason || te.Status != status {
				t.Errorf("reason, status: got %s %d, want %s %d", te.Reason, te.Status, reason, status)
			}
			if !errors.Is(err, utcp.ErrTransport) {
				t.Errorf("errors.Is(err, ErrTransport): got false, want true")
			}
			if strings.Contains(err.Error(), "127.0.0.1") || strings.Contains(err.Error(), "dial") {
				t.Errorf("message %q leaks a host or a raw error", err.Error())
			}
		}
	}
	cases := []struct {
		name    string
		handler http.HandlerFunc // nil: the provider is down
		tmpl    map[string]any
		opts    []utcp.Option
		check   check
	}{
		{name: "provider down", check: transport(utcp.ReasonUnreachable, 0)},
		{
			name: "500",
			handler: func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "internal trouble at db-7.internal:5432", http.StatusInternalServerError)
			},
			check: func(t *testing.T, err error) {
				transport(utcp.ReasonStatus, 500)(t, err)
				// A plain-text body is the provider's raw text: only the
				// status is shown (the body stays behind Unwrap, for logs).
				if got, want := err.Error(), `tool "svc.op": provider answered 500`; got != want {
					t.Errorf("message: got %q, want %q", got, want)
				}
			},
		},
		{
			name: "malformed JSON",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"ok": tru`)
			},
			check: transport(utcp.ReasonMalformed, 0),
		},
		{
			name: "body one byte over the cap",
			handler: func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.WriteString(w, strings.Repeat("x", 1025))
			},
			opts:  []utcp.Option{utcp.WithMaxResponseBytes(1024)},
			check: transport(utcp.ReasonTooLarge, 0),
		},
		{
			name: "body at the cap",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/plain")
				_, _ = io.WriteString(w, strings.Repeat("x", 1024))
			},
			opts: []utcp.Option{utcp.WithMaxResponseBytes(1024)},
			check: func(t *testing.T, err error) {
				if err != nil {
					t.Errorf("got %v, want a body of exactly the cap accepted", err)
				}
			},
		},
		{
			name: "slow past the template's timeout",
			handler: func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-r.Context().Done():
				case <-time.After(5 * time.Second):
				}
			},
			tmpl: map[string]any{"timeout": 100},
			check: func(t *testing.T, err error) {
				var to *utcp.TimeoutError
				if !errors.As(err, &to) || to.Timeout != 100*time.Millisecond {
					t.Fatalf("got %v, want a TimeoutError after 100ms", err)
				}
				if !errors.Is(err, utcp.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("errors.Is ErrTimeout / DeadlineExceeded: got false, want true")
				}
			},
		},
		{
			name: "slow past the registry's default timeout",
			handler: func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-r.Context().Done():
				case <-time.After(5 * time.Second):
				}
			},
			opts: []utcp.Option{utcp.WithTimeout(80 * time.Millisecond)},
			check: func(t *testing.T, err error) {
				var to *utcp.TimeoutError
				if !errors.As(err, &to) || to.Timeout != 80*time.Millisecond {
					t.Errorf("got %v, want a TimeoutError after 80ms", err)
				}
			},
		},
		{
			name: "a stream that breaks mid-way",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/x-ndjson")
				_, _ = io.WriteString(w, "{\"n\":1}\n")
				w.(http.Flusher).Flush()
				panic(http.ErrAbortHandler)
			},
			tmpl:  map[string]any{"call_template_type": "streamable_http"},
			check: transport(utcp.ReasonBroken, 0),
		},
		{
			name: "an SSE stream that breaks mid-way",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, "data: 1\n\n")
				w.(http.Flusher).Flush()
				panic(http.ErrAbortHandler)
			},
			tmpl:  map[string]any{"call_template_type": "sse"},
			check: transport(utcp.ReasonBroken, 0),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var url string
			if tc.handler == nil {
				down := httptest.NewServer(http.NotFoundHandler())
				url = down.URL
				down.Close()
			} else {
				url = utcptest.NewProvider(t, tc.handler).URL
			}
			r := utcptest.NewRegistry(t, tc.opts...)
			tmpl := map[string]any{"call_template_type": "http", "url": url + "/op"}
			for k, v := range tc.tmpl {
				tmpl[k] = v
			}
			utcptest.Register(t, r, "svc", utcptest.ManualOf("op", nil, tmpl))
			st, err := r.CallStream(context.Background(), "svc.op", nil)
			if err == nil {
				_, err = utcptest.Drain(t, st)
			}
			tc.check(t, err)
		})
	}
}

func TestCallerDeadlineWinsWhenSooner(t *testing.T) {
	t.Parallel()
	p := utcptest.NewProvider(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	r := utcptest.NewRegistry(t)
	utcptest.Register(t, r, "svc", utcptest.ManualOf("op", nil, map[string]any{"call_template_type": "http", "url": p.URL, "timeout": "5s"}))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := r.Call(ctx, "svc.op", nil)
	var to *utcp.TimeoutError
	if !errors.As(err, &to) || to.Timeout != 0 {
		t.Fatalf("got %v, want a TimeoutError from the caller's deadline", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %s, want about 50ms", d)
	}
}

func TestCancelReachesTheProvider(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{})
	ended := make(chan struct{})
	p := utcptest.NewProvider(t, func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		select {
		case <-r.Context().Done():
			close(ended)
		case <-time.After(5 * time.Second):
		}
	})
	r := utcptest.NewRegistry(t)
	utcptest.Register(t, r, "svc", utcptest.ManualOf("op", nil, map[string]any{"call_template_type": "http", "url": p.URL}))
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := r.Call(ctx, "svc.op", nil)
		errc <- err
	}()
	<-arrived
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
	select {
	case <-ended:
	case <-time.After(2 * time.Second):
		t.Errorf("the provider's request context did not end after the caller cancelled")
	}
}

func TestRedirects(t *testing.T) {
	t.Parallel()
	other := utcptest.NewProvider(t, nil)
	p := utcptest.NewProvider(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, other.URL+"/stolen", http.StatusFound)
		case "/moved":
			http.Redirect(w, r, "/here", http.StatusMovedPermanently)
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"at":"`+r.URL.Path+`"}`)
		}
	})
	r := utcptest.NewRegistry(t)
	utcptest.Register(t, r, "svc", `{"utcp_version": "1", "tools": [
		{"name": "away", "tool_call_template": {"call_template_type": "http", "url": "`+p.URL+`/away"}},
		{"name": "moved", "tool_call_template": {"call_template_type": "http", "url": "`+p.URL+`/moved"}}]}`)
	_, err := r.Call(context.Background(), "svc.away", nil)
	var te *utcp.TransportError
	if !errors.As(err, &te) || te.Reason != utcp.ReasonRedirect {
		t.Errorf("redirect to another host: got %v, want ReasonRedirect", err)
	}
	if n := len(other.Requests()); n != 0 {
		t.Errorf("the other host saw %d requests, want 0", n)
	}
	got, err := r.Call(context.Background(), "svc.moved", nil)
	if err != nil || got.(map[string]any)["at"] != "/here" {
		t.Errorf("redirect on the same host: got %v %v, want it followed to /here", got, err)
	}
}

func TestInsecureHTTPOption(t *testing.T) {
	t.Parallel()
	r := utcptest.NewRegistry(t)
	utcptest.Register(t, r, "svc", utcptest.ManualOf("op", nil, map[string]any{"call_template_type": "http", "url": "http://provider.internal/op"}))
	_, err := r.Call(context.Background(), "svc.op", nil)
	var te *utcp.TransportError
	if !errors.As(err, &te) || te.Reason != utcp.ReasonInsecureURL {
		t.Errorf("plain http to a remote host: got %v, want ReasonInsecureURL", err)
	}
}

func TestOptionsRefuseInvalidValues(t *testing.T) {
	t.Parallel()
	for name, opt := range map[string]utcp.Option{
		"zero timeout":      utcp.WithTimeout(0),
		"negative cap":      utcp.WithMaxResponseBytes(-1),
		"nil round tripper": utcp.WithRoundTripper(nil),
		"nil egress":        utcp.WithEgress(nil),
		"zero manuals":      utcp.WithMaxManuals(0),
		"zero tools":        utcp.WithMaxTools(0),
		"nil loader":        utcp.WithVariableLoader(nil),
		"missing .env file": utcp.WithDotEnvFile("testdata/does-not-exist.env"),
		"transport no type": utcp.WithTransport("", nil),
		"nil converter":     utcp.WithConverter(nil),
		"nil index":         utcp.WithIndex(nil),
		"nil observer":      utcp.WithCallObserver(nil),
	} {
		if _, err := utcp.New(opt); err == nil {
			t.Errorf("%s: got no error, want one", name)
		}
	}
}
