package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/internal/egress"
	"github.com/exprd/exprd/internal/testkit/egresstest"
	"github.com/exprd/exprd/server"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/hostiletest"
	"github.com/exprd/exprd/utcp/utcpall"
)

// recorder is a loopback provider that records every request whole: what
// a hostile manual could make exprd send is what it saw.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func startRecorder(t *testing.T) *recorder {
	t.Helper()
	rec := &recorder{}
	rec.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var b strings.Builder
		b.WriteString(r.Method + " " + r.RequestURI + "\n")
		_ = r.Header.Write(&b)
		b.Write(body)
		rec.mu.Lock()
		rec.seen = append(rec.seen, b.String())
		rec.mu.Unlock()
		if to := r.URL.Query().Get("to"); r.URL.Path == "/redirect" && to != "" {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok": true}`)
	}))
	t.Cleanup(rec.Close)
	return rec
}

func (r *recorder) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

// The secrets a hostile manual is after: the process's environment, and
// variables the operator bound to other manuals.
var hostileSecrets = map[string]string{
	"OPENAI_API_KEY":        "sk-env-openai-0000",
	"AWS_SECRET_ACCESS_KEY": "env-aws-secret-1111",
	"AWS_ACCESS_KEY_ID":     "env-aws-id-2222",
	"EXPRD_AUTH_TOKENS":     "env-exprd-tokens-3333",
}

var boundSecrets = map[string]string{"shop__pay_TOKEN": "bound-pay-4444", "weather_TOKEN": "bound-weather-5555"}

// Every manual of the hostile table, registered over gRPC with writes
// allowed and loopback reachable, is refused at registration (with the
// field that is wrong) or, once registered, cannot make its call; no
// secret reaches the recording provider or any response.
func TestHostileManuals(t *testing.T) {
	for k, v := range hostileSecrets {
		t.Setenv(k, v)
	}
	rec := startRecorder(t)
	reg, err := utcpall.New(loopbackEgress, utcp.WithVariables(boundSecrets))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	conn := serve(t, newServer(t, server.WithRegistry(reg), server.WithRegistryWritesWithoutAuth()))
	tr, cm := exprdv1.NewToolRegistryClient(conn), exprdv1.NewCodeModeClient(conn)
	ctx := context.Background()
	var answers []proto.Message
	for _, tc := range hostiletest.Load(t, strings.TrimPrefix(rec.URL, "http://")) {
		t.Run(tc.Name, func(t *testing.T) {
			before := len(rec.requests())
			resp, err := tr.RegisterManual(ctx, &exprdv1.RegisterManualRequest{Name: tc.ManualName, Source: &exprdv1.RegisterManualRequest_ManualJson{ManualJson: string(tc.Manual)}})
			if st, ok := status.FromError(err); ok && err != nil {
				answers = append(answers, st.Proto())
			} else {
				t.Cleanup(func() { _, _ = tr.DeregisterManual(ctx, &exprdv1.DeregisterManualRequest{Name: tc.ManualName}) })
			}
			if tc.Want.Refused != "" {
				if got := status.Code(err).String(); !strings.EqualFold(strings.ReplaceAll(got, "_", ""), strings.ReplaceAll(tc.Want.Refused, "_", "")) {
					t.Fatalf("RegisterManual: got %v, want %s", err, tc.Want.Refused)
				}
				var field string
				for _, d := range status.Convert(err).Details() {
					if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) > 0 {
						field = br.GetFieldViolations()[0].GetField()
					}
				}
				if !strings.Contains(field, tc.Want.Field) {
					t.Errorf("BadRequest field: got %q, want it to contain %q", field, tc.Want.Field)
				}
				if got := len(rec.requests()) - before; got != 0 {
					t.Errorf("the provider saw %d requests for a refused manual, want 0", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("RegisterManual: got %v, want it registered and its call refused", err)
			}
			tool := resp.GetTools()[0]
			out, err := cm.Execute(ctx, &exprdv1.ExecuteRequest{Code: `codemode.CallTool("` + tool + `", {})`, Tools: []string{tool}})
			if err != nil {
				t.Fatalf("Execute: %v", err)
			}
			answers = append(answers, out)
			if out.GetError() == nil {
				t.Fatalf("Execute: got %s, want the call refused", protojson.Format(out))
			}
			for _, r := range rec.requests()[before:] {
				if !strings.HasPrefix(r, "GET /redirect?") {
					t.Errorf("the provider saw %q; only a redirect's first leg may reach it", strings.SplitN(r, "\n", 2)[0])
				}
			}
		})
	}
	for _, secret := range append(values(hostileSecrets), values(boundSecrets)...) {
		for _, r := range rec.requests() {
			if strings.Contains(r, secret) {
				t.Errorf("the provider received the secret %q: %q", secret, r)
			}
		}
		for _, a := range answers {
			if strings.Contains(protojson.Format(a), secret) {
				t.Errorf("an answer holds the secret %q: %s", secret, protojson.Format(a))
			}
		}
	}
}

func values(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// acceptLog is a TCP listener that hands over every connection it
// accepts, in order: whether anything reached it is told by dialing it
// last and checking that the first connection is that one.
type acceptLog struct {
	net.Listener
	conns chan net.Conn
}

func listenLog(t *testing.T) *acceptLog {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := &acceptLog{Listener: lis, conns: make(chan net.Conn, 16)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			a.conns <- c
		}
	}()
	t.Cleanup(func() {
		lis.Close()
		<-done
		close(a.conns)
		for c := range a.conns {
			c.Close()
		}
	})
	return a
}

// untouched fails the test when anything connected to a before this call.
func (a *acceptLog) untouched(t *testing.T) {
	t.Helper()
	marker, err := net.Dial("tcp", a.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer marker.Close()
	if _, err := marker.Write([]byte("M")); err != nil {
		t.Fatal(err)
	}
	first := <-a.conns
	defer first.Close()
	b := make([]byte, 1)
	if _, err := io.ReadFull(first, b); err != nil || b[0] != 'M' {
		t.Errorf("a connection reached the refused provider before the test's own (it sent %q, %v)", b, err)
	}
}

// A host name is judged by what it resolves to, on every connection: with
// loopback not listed, names resolving to 127.0.0.1, 169.254.169.254 and
// 10.0.0.1 are refused before anything is sent (HTTP, TLS and gRPC alike),
// while a name the operator lists reaches its loopback provider.
func TestEgressJudgesResolvedAddresses(t *testing.T) {
	t.Parallel()
	rec := startRecorder(t)
	_, recPort, _ := net.SplitHostPort(strings.TrimPrefix(rec.URL, "http://"))
	target := listenLog(t)
	_, port, _ := net.SplitHostPort(target.Addr().String())
	loop := netip.MustParseAddr("127.0.0.1")
	dns := egresstest.StartDNS(t, map[string][]netip.Addr{
		"rebind.test":  {loop},
		"meta.test":    {netip.MustParseAddr("169.254.169.254")},
		"ten.test":     {netip.MustParseAddr("10.0.0.1")},
		"allowed.test": {loop},
	})
	reg, err := utcpall.New(utcp.WithEgress(egress.MustParse("allowed.test")), utcp.WithResolver(dns.Resolver()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	conn := serve(t, newServer(t, server.WithRegistry(reg), server.WithRegistryWritesWithoutAuth()))
	tr, cm := exprdv1.NewToolRegistryClient(conn), exprdv1.NewCodeModeClient(conn)
	ctx := context.Background()
	call := func(t *testing.T, manual string, tmpl map[string]any) *exprdv1.ExecuteResponse {
		t.Helper()
		raw, _ := json.Marshal(map[string]any{"utcp_version": "1.0.1", "tools": []any{map[string]any{
			"name": "t", "description": "t", "inputs": map[string]any{"type": "object"}, "tool_call_template": tmpl}}})
		if _, err := tr.RegisterManual(ctx, &exprdv1.RegisterManualRequest{Name: manual, Source: &exprdv1.RegisterManualRequest_ManualJson{ManualJson: string(raw)}}); err != nil {
			t.Fatalf("RegisterManual: %v", err)
		}
		out, err := cm.Execute(ctx, &exprdv1.ExecuteRequest{Code: `codemode.CallTool("` + manual + `.t", {})`, Tools: []string{manual + ".t"}})
		if err != nil {
			t.Fatalf("Execute: %v", err)
		}
		return out
	}
	for _, tc := range []struct{ name, host string }{{"loopback", "rebind.test"}, {"cloud metadata", "meta.test"}, {"private", "ten.test"}} {
		t.Run(tc.name, func(t *testing.T) {
			for i, tmpl := range []map[string]any{
				{"call_template_type": "http", "url": "https://" + tc.host + ":" + port + "/x"},
				{"call_template_type": "streamable_http", "url": "https://" + tc.host + ":" + port + "/x"},
				{"call_template_type": "grpc", "host": tc.host, "port": port, "use_ssl": true, "service_name": "grpcpb.UTCPService"},
			} {
				out := call(t, strings.ReplaceAll(tc.host, ".", "_")+string(rune('a'+i)), tmpl)
				if !strings.Contains(out.GetError().GetMessage(), "not one exprd may reach") {
					t.Errorf("%v: got %s, want the call refused by the egress policy", tmpl, protojson.Format(out))
				}
			}
		})
	}
	// A redirect from a listed host to a refused one is not followed.
	if out := call(t, "redir", map[string]any{"call_template_type": "http", "url": "http://allowed.test:" + recPort + "/redirect?to=https://rebind.test:" + port + "/x"}); out.GetError() == nil {
		t.Errorf("redirect: got %s, want the call refused", protojson.Format(out))
	}
	target.untouched(t)
	// The control: a listed name reaches its provider, plain http included.
	if out := call(t, "allowed", map[string]any{"call_template_type": "http", "url": "http://allowed.test:" + recPort + "/ok"}); out.GetError() != nil {
		t.Errorf("a listed name: got %s, want its answer", protojson.Format(out))
	}
	if dns.Queries() == 0 {
		t.Errorf("the test's resolver answered nothing: the names were not resolved through it")
	}
}

// RegisterManual's url and grpc_target obey the egress policy too: an
// address it refuses outright is INVALID_ARGUMENT naming the field, before
// anything is sent.
func TestRegistrationSourcesObeyEgress(t *testing.T) {
	t.Parallel()
	c, _ := registryClient(t, utcp.WithEgress(egress.Public()))
	for _, tc := range []struct {
		name  string
		req   *exprdv1.RegisterManualRequest
		field string
	}{
		{"a url at cloud metadata", &exprdv1.RegisterManualRequest{Name: "m", Source: &exprdv1.RegisterManualRequest_Url{Url: "http://169.254.169.254/latest/meta-data/"}}, "url"},
		{"a url at a private address", &exprdv1.RegisterManualRequest{Name: "m", Source: &exprdv1.RegisterManualRequest_Url{Url: "https://10.0.0.1/utcp"}}, "url"},
		{"a url at loopback, not listed", &exprdv1.RegisterManualRequest{Name: "m", Source: &exprdv1.RegisterManualRequest_Url{Url: "https://127.0.0.1:1/utcp"}}, "url"},
		{"a url at localhost, not listed", &exprdv1.RegisterManualRequest{Name: "m", Source: &exprdv1.RegisterManualRequest_Url{Url: "https://localhost:1/utcp"}}, "url"},
		{"a grpc target at cloud metadata", &exprdv1.RegisterManualRequest{Name: "m", Source: &exprdv1.RegisterManualRequest_GrpcTarget{GrpcTarget: "169.254.169.254:443"}}, "grpc_target.host"},
		{"a grpc target at a private address", &exprdv1.RegisterManualRequest{Name: "m", Source: &exprdv1.RegisterManualRequest_GrpcTarget{GrpcTarget: "[fd00::1]:443"}}, "grpc_target.host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.RegisterManual(context.Background(), tc.req)
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("got %v, want InvalidArgument", err)
			}
			var field string
			for _, d := range status.Convert(err).Details() {
				if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) > 0 {
					field = br.GetFieldViolations()[0].GetField()
				}
			}
			if field != tc.field {
				t.Errorf("field: got %q, want %s", field, tc.field)
			}
		})
	}
}
