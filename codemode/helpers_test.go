package codemode_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exprd/exprd/codemode"
	"github.com/exprd/exprd/demo/providers"
	"github.com/exprd/exprd/internal/egress"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/utcpall"
)

// local is an httptest provider of tools the demo providers lack: one that
// waits until its caller goes away, and streams that end well or break.
type local struct {
	srv       *httptest.Server
	cancelled chan struct{} // a value per slow call whose caller went away
	started   chan struct{} // a value per slow call that started
	calls     atomic.Int64
}

func startLocal(t *testing.T) *local {
	t.Helper()
	l := &local{cancelled: make(chan struct{}, 16), started: make(chan struct{}, 16)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /slow", func(w http.ResponseWriter, r *http.Request) {
		l.calls.Add(1)
		l.started <- struct{}{}
		select {
		case <-r.Context().Done():
			l.cancelled <- struct{}{}
		case <-time.After(10 * time.Second):
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"late": true}`))
		}
	})
	mux.HandleFunc("GET /ticks", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		for i := range n {
			fmt.Fprintf(w, "{\"tick\": %d}\n", i+1)
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("GET /broken", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		fmt.Fprintln(w, `{"tick": 1}`)
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the connection drops mid-stream
	})
	l.srv = httptest.NewServer(mux)
	t.Cleanup(l.srv.Close)
	return l
}

func (l *local) manual() string {
	return fmt.Sprintf(`{"utcp_version": "1.0.1", "manual_version": "1.0.0", "tools": [
	  {"name": "slow", "description": "Answers after ten seconds.", "inputs": {"type": "object"},
	   "tool_call_template": {"call_template_type": "http", "http_method": "POST", "url": "%[1]s/slow"}},
	  {"name": "ticks", "description": "Streams n ticks.", "inputs": {"type": "object", "properties": {"n": {"type": "integer"}}},
	   "tool_call_template": {"call_template_type": "streamable_http", "http_method": "GET", "url": "%[1]s/ticks"}},
	  {"name": "broken", "description": "Streams a tick, then breaks.", "inputs": {"type": "object"},
	   "tool_call_template": {"call_template_type": "streamable_http", "http_method": "GET", "url": "%[1]s/broken"}}]}`, l.srv.URL)
}

// env is a registry holding math (HTTP), catalog (gRPC) and local, and a
// Runtime over it.
type env struct {
	reg   *utcp.Registry
	rt    *codemode.Runtime
	local *local
}

func newEnv(t *testing.T) *env {
	t.Helper()
	m, err := providers.StartMath()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	c, err := providers.StartCatalog()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	l := startLocal(t)
	reg, err := utcpall.New(utcp.WithEgress(egress.MustParse("loopback")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	ctx := context.Background()
	if _, err := reg.Register(ctx, "math", utcp.FromURL(m.URL()+"/utcp")); err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(c.Addr())
	tmpl := fmt.Sprintf(`{"call_template_type": "grpc", "host": %q, "port": %s}`, host, port)
	if _, err := reg.Register(ctx, "catalog", utcp.FromTemplate([]byte(tmpl))); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Register(ctx, "local", utcp.FromText(l.manual()).AllowProtocols("http", "streamable_http")); err != nil {
		t.Fatal(err)
	}
	rt, err := codemode.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	return &env{reg: reg, rt: rt, local: l}
}

// allTools is every tool of newEnv's registry.
var allTools = []string{
	"math.add", "math.subtract", "math.multiply", "math.divide", "math.sqrt",
	"catalog.search", "catalog.get", "catalog.restock",
	"local.slow", "local.ticks", "local.broken",
}

// codeError returns err as a *codemode.Error, failing the test when it is
// not one.
func codeError(t *testing.T, err error) *codemode.Error {
	t.Helper()
	var e *codemode.Error
	if !errors.As(err, &e) {
		t.Fatalf("got error %v (%T), want a *codemode.Error", err, err)
	}
	return e
}

// waitFor receives from ch or fails the test after a while.
func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}
