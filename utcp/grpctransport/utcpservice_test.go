package grpctransport_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exprd/exprd/internal/egress"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/internal/utcptest"
)

// registerProvider registers the provider's manual through GetManual.
func registerProvider(t testing.TB, r *utcp.Registry, s *server, name string, extra map[string]any) *utcp.Registration {
	t.Helper()
	reg, err := r.Register(context.Background(), name, utcp.FromTemplate(mustJSON(t, s.template(extra))))
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	return reg
}

func TestDiscoverRegistersGetManualTools(t *testing.T) {
	t.Parallel()
	s, _ := startProvider(t)
	r := newRegistry(t)
	reg := registerProvider(t, r, s, "calc", nil)

	want := []string{"calc.add", "calc.broken", "calc.count", "calc.empty", "calc.fail", "calc.hang", "calc.meta", "calc.slow", "calc.text"}
	if !reflect.DeepEqual(reg.Tools, want) {
		t.Fatalf("got tools %v, want %v", reg.Tools, want)
	}
	tool, err := r.Tool("calc.add")
	if err != nil {
		t.Fatal(err)
	}
	if got := string(tool.Inputs); got != `{"type":"object"}` {
		t.Errorf("got inputs %s, want {\"type\":\"object\"}", got)
	}
	if tool.Description != "the add tool" || tool.Template.Type != "grpc" {
		t.Errorf("got description %q type %q, want %q grpc", tool.Description, tool.Template.Type, "the add tool")
	}
	var tmpl map[string]any
	if err := json.Unmarshal(tool.Template.JSON(), &tmpl); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]any{"service_name": "grpcpb.UTCPService", "method_name": "CallTool", "tool_name": "add", "host": "127.0.0.1"} {
		if tmpl[k] != v {
			t.Errorf("template %s: got %v, want %v", k, tmpl[k], v)
		}
	}
}

func TestCall(t *testing.T) {
	t.Parallel()
	s, _ := startProvider(t)
	r := newRegistry(t)
	registerProvider(t, r, s, "calc", nil)

	cases := []struct {
		tool string
		args map[string]any
		want any
	}{
		{"calc.add", map[string]any{"a": 2, "b": 3}, map[string]any{"result": 5.0}},
		{"calc.text", nil, "plain text"},
		{"calc.empty", nil, nil},
	}
	for _, c := range cases {
		t.Run(c.tool, func(t *testing.T) {
			t.Parallel()
			got, err := r.Call(context.Background(), c.tool, c.args)
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %#v, want %#v", got, c.want)
			}
		})
	}
}

// A tool written by hand (no tool_name) is called under its own name
// without the manual's prefix, as go-utcp does.
func TestCallHandWrittenTemplate(t *testing.T) {
	t.Parallel()
	s, _ := startProvider(t)
	r := newRegistry(t)
	registerManual(t, r, "m", map[string]map[string]any{
		"add":   s.template(map[string]any{"service_name": "grpcpb.UTCPService", "method_name": "CallTool"}),
		"count": s.template(map[string]any{"method_name": "CallToolStream"}),
	})
	got, err := r.Call(context.Background(), "m.add", map[string]any{"a": 1, "b": 1})
	if err != nil || !reflect.DeepEqual(got, map[string]any{"result": 2.0}) {
		t.Errorf("got %v, %v; want map[result:2]", got, err)
	}
	// method_name CallToolStream: Call returns the list of chunks.
	got, err = r.Call(context.Background(), "m.count", map[string]any{"n": 2})
	want := []any{map[string]any{"i": 0.0}, map[string]any{"i": 1.0}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, %v; want %v", got, err, want)
	}
}

func TestStream(t *testing.T) {
	t.Parallel()
	s, _ := startProvider(t)
	r := newRegistry(t, utcp.WithProviderMessages())
	registerProvider(t, r, s, "calc", nil)

	st, err := r.CallStream(context.Background(), "calc.count", map[string]any{"n": 3})
	if err != nil {
		t.Fatalf("CallStream: %v", err)
	}
	got, err := utcptest.Drain(t, st)
	want := []any{map[string]any{"i": 0.0}, map[string]any{"i": 1.0}, map[string]any{"i": 2.0}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, %v; want %v, nil", got, err, want)
	}
}

// A stream the provider ends with an error is an error after the chunks it
// sent, never a clean end.
func TestStreamErrorIsNotAnEnd(t *testing.T) {
	t.Parallel()
	s, _ := startProvider(t)
	r := newRegistry(t, utcp.WithProviderMessages())
	registerProvider(t, r, s, "calc", nil)

	st, err := r.CallStream(context.Background(), "calc.broken", nil)
	if err != nil {
		t.Fatalf("CallStream: %v", err)
	}
	got, err := utcptest.Drain(t, st)
	if len(got) != 2 {
		t.Errorf("got %d chunks before the error, want 2", len(got))
	}
	if err == nil {
		t.Fatal("got a clean end, want an error")
	}
	te := transportError(t, err)
	if te.Reason != utcp.ReasonStatus || te.Status != 500 || !reflect.DeepEqual(te.Body, map[string]any{"code": "Internal"}) {
		t.Errorf("got %s %d %v, want status 500 {code: Internal}", te.Reason, te.Status, te.Body)
	}
}

// A stream whose connection goes away mid-way is ReasonBroken.
func TestStreamBrokenConnection(t *testing.T) {
	t.Parallel()
	s, p := startProvider(t)
	r := newRegistry(t)
	registerProvider(t, r, s, "calc", nil)

	st, err := r.CallStream(context.Background(), "calc.hang", nil)
	if err != nil {
		t.Fatalf("CallStream: %v", err)
	}
	defer st.Close()
	if v, err := st.Next(); err != nil || v != "first" {
		t.Fatalf("got %v, %v; want first", v, err)
	}
	<-p.started
	s.Stop() // the provider goes away
	_, err = st.Next()
	if err == nil || err == io.EOF {
		t.Fatalf("got %v, want an error", err)
	}
	if te := transportError(t, err); te.Reason != utcp.ReasonBroken {
		t.Errorf("got reason %s, want %s", te.Reason, utcp.ReasonBroken)
	}
}

// The caller's cancellation and deadline reach the provider.
func TestContextReachesProvider(t *testing.T) {
	t.Parallel()
	s, p := startProvider(t)
	r := newRegistry(t)
	registerProvider(t, r, s, "calc", nil)

	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			<-p.started
			cancel()
		}()
		_, err := r.Call(ctx, "calc.slow", nil)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("got %v, want context.Canceled", err)
		}
		if got := <-p.ctxEnded; got != context.Canceled {
			t.Errorf("provider's context ended with %v, want context.Canceled", got)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := r.Call(ctx, "calc.slow", nil)
		<-p.started
		var te *utcp.TimeoutError
		if !errors.As(err, &te) {
			t.Errorf("got %v, want a *utcp.TimeoutError", err)
		}
		// The provider's context ends by its own deadline or by the
		// client's cancellation when that arrives first.
		if got := <-p.ctxEnded; got == nil {
			t.Error("the provider's context did not end")
		}
		if !p.hadDeadln.Load() {
			t.Error("the provider's context had no deadline")
		}
	})
	t.Run("stream", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		st, err := r.CallStream(ctx, "calc.hang", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if _, err := st.Next(); err != nil {
			t.Fatal(err)
		}
		<-p.started
		cancel()
		if _, err := st.Next(); !errors.Is(err, context.Canceled) {
			t.Errorf("got %v, want context.Canceled", err)
		}
		if got := <-p.ctxEnded; got != context.Canceled {
			t.Errorf("provider's context ended with %v, want context.Canceled", got)
		}
	})
	t.Run("close", func(t *testing.T) {
		st, err := r.CallStream(context.Background(), "calc.hang", nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Next(); err != nil {
			t.Fatal(err)
		}
		<-p.started
		st.Close() // closing early cancels the RPC
		if got := <-p.ctxEnded; got != context.Canceled {
			t.Errorf("provider's context ended with %v, want context.Canceled", got)
		}
	})
}

// Every call, stream and discovery to one provider shares one connection,
// across manuals of the registry.
func TestConnectionReused(t *testing.T) {
	t.Parallel()
	s, _ := startProvider(t)
	r := newRegistry(t)
	registerProvider(t, r, s, "calc", nil)
	// The same provider spelt another way is the same connection.
	registerProvider(t, r, s, "calc2", map[string]any{"host": fmt.Sprintf("127.0.0.1:%d", s.port), "port": nil})
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tool := "calc.add"
			if i%2 == 1 {
				tool = "calc2.add"
			}
			if _, err := r.Call(context.Background(), tool, map[string]any{"a": i, "b": 1}); err != nil {
				t.Errorf("Call: %v", err)
			}
			st, err := r.CallStream(context.Background(), "calc.count", map[string]any{"n": 2})
			if err != nil {
				t.Errorf("CallStream: %v", err)
				return
			}
			if _, err := utcptest.Drain(t, st); err != nil {
				t.Errorf("stream: %v", err)
			}
		}()
	}
	wg.Wait()
	if got := s.accepted(); got != 1 {
		t.Errorf("the provider accepted %d connections, want 1", got)
	}
}

func TestMetadata(t *testing.T) {
	t.Parallel()
	s, p := startProvider(t)
	cases := []struct {
		name string
		tmpl map[string]any
		want map[string]any
	}{
		{"basic and target", map[string]any{"target": "device-1", "auth": map[string]any{"auth_type": "basic", "username": "ann", "password": "s3cret"}},
			map[string]any{"target": "device-1", "authorization": "Basic YW5uOnMzY3JldA=="}},
		{"api_key default name", map[string]any{"auth": map[string]any{"auth_type": "api_key", "api_key": "k1"}},
			map[string]any{"x-api-key": "k1"}},
		{"api_key bearer", map[string]any{"auth": map[string]any{"auth_type": "api_key", "api_key": "Bearer t0k", "var_name": "Authorization"}},
			map[string]any{"authorization": "Bearer t0k"}},
		{"api_key cookie", map[string]any{"auth": map[string]any{"auth_type": "api_key", "api_key": "c1", "var_name": "session", "location": "cookie"}},
			map[string]any{"cookie": "session=c1"}},
		{"none", nil, map[string]any{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRegistry(t)
			registerProvider(t, r, s, "calc", c.tmpl)
			// The discovery request carries them too.
			p.mu.Lock()
			for k, v := range c.want {
				if got := p.manualMD.Get(k); len(got) != 1 || got[0] != v {
					t.Errorf("GetManual saw %s %v, want %v", k, got, v)
				}
			}
			p.mu.Unlock()
			got, err := r.Call(context.Background(), "calc.meta", nil)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("provider saw %v, want %v", got, c.want)
			}
		})
	}
}

// Variables in the template are resolved per manual, as for every template.
func TestVariables(t *testing.T) {
	t.Parallel()
	s, _ := startProvider(t)
	r := newRegistry(t, utcp.WithVariables(map[string]string{"calc_TOKEN": "from-vars"}))
	registerProvider(t, r, s, "calc", map[string]any{"auth": map[string]any{"auth_type": "api_key", "api_key": "${TOKEN}"}})
	got, err := r.Call(context.Background(), "calc.meta", nil)
	if err != nil || !reflect.DeepEqual(got, map[string]any{"x-api-key": "from-vars"}) {
		t.Errorf("got %v, %v; want map[x-api-key:from-vars]", got, err)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	s, p := startProvider(t)
	r := newRegistry(t, utcp.WithProviderMessages())
	registerProvider(t, r, s, "calc", nil)

	t.Run("status", func(t *testing.T) {
		_, err := r.Call(context.Background(), "calc.fail", nil)
		te := transportError(t, err)
		want := map[string]any{"code": "NotFound"}
		if te.Reason != utcp.ReasonStatus || te.Status != 404 || !reflect.DeepEqual(te.Body, want) {
			t.Errorf("got %s %d %v, want status 404 %v", te.Reason, te.Status, te.Body, want)
		}
		if strings.Contains(err.Error(), p.addr) || strings.Contains(err.Error(), "127.0.0.1") {
			t.Errorf("error %q names the provider's host", err)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		r := newRegistry(t)
		registerManual(t, r, "gone", map[string]map[string]any{"add": {"call_template_type": "grpc", "host": "127.0.0.1", "port": port}})
		_, err = r.Call(context.Background(), "gone.add", nil)
		te := transportError(t, err)
		if te.Reason != utcp.ReasonUnreachable || te.Body != nil {
			t.Errorf("got %s %v, want %s without a body", te.Reason, te.Body, utcp.ReasonUnreachable)
		}
		if strings.Contains(err.Error(), "127.0.0.1") {
			t.Errorf("error %q names the provider's host", err)
		}
	})
	t.Run("plaintext refused", func(t *testing.T) {
		r := newRegistry(t)
		registerManual(t, r, "far", map[string]map[string]any{"add": {"call_template_type": "grpc", "host": "tools.example.com", "port": 443}})
		_, err := r.Call(context.Background(), "far.add", nil)
		if te := transportError(t, err); te.Reason != utcp.ReasonInsecureURL {
			t.Errorf("got %s, want %s", te.Reason, utcp.ReasonInsecureURL)
		}
		// Allowed by the operator, it is tried (and fails to resolve).
		r2 := newRegistry(t, utcp.WithEgress(egress.MustParse("tools.example.invalid")))
		registerManual(t, r2, "far", map[string]map[string]any{"add": {"call_template_type": "grpc", "host": "tools.example.invalid", "port": 443}})
		_, err = r2.Call(context.Background(), "far.add", nil)
		if te := transportError(t, err); te.Reason != utcp.ReasonUnreachable {
			t.Errorf("got %s, want %s", te.Reason, utcp.ReasonUnreachable)
		}
	})
}

// Responses are capped at the registry's WithMaxResponseBytes: a message,
// and the chunks a Call collects from a stream.
func TestResponseTooLarge(t *testing.T) {
	t.Parallel()
	s, _ := startProvider(t)
	const limit = 64
	r := newRegistry(t, utcp.WithMaxResponseBytes(limit))
	registerManual(t, r, "m", map[string]map[string]any{
		"big":   s.template(map[string]any{"tool_name": "big"}),
		"count": s.template(map[string]any{"tool_name": "count", "method_name": "CallToolStream"}),
	})
	cases := []struct {
		tool    string
		n       int
		tooBig  bool
		comment string
	}{
		{"m.big", 16, false, "a message under the cap"},
		{"m.big", limit + 1, true, "a message over the cap"},
		{"m.count", 2, false, "a stream under the cap"},
		{"m.count", 20, true, "a stream whose chunks add up to more than the cap"},
	}
	for _, c := range cases {
		_, err := r.Call(context.Background(), c.tool, map[string]any{"n": c.n})
		switch {
		case !c.tooBig && err != nil:
			t.Errorf("%s: got %v, want no error", c.comment, err)
		case c.tooBig:
			if te := transportError(t, err); te.Reason != utcp.ReasonTooLarge {
				t.Errorf("%s: got %s, want %s", c.comment, te.Reason, utcp.ReasonTooLarge)
			}
		}
	}
}
