package server_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/gen/grpcpb"
	"github.com/exprd/exprd/internal/egress"
	"github.com/exprd/exprd/internal/testkit/exprdproc"
	"github.com/exprd/exprd/internal/testkit/testcert"
	"github.com/exprd/exprd/server"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/grpctransport"
	"github.com/exprd/exprd/utcp/utcpall"
)

// registryClient serves exprd over a fresh UTCP registry (built with opts)
// on a loopback port and returns its ToolRegistry and ExprTool clients.
func registryClient(t *testing.T, opts ...utcp.Option) (exprdv1.ToolRegistryClient, exprdv1.ExprToolClient) {
	t.Helper()
	reg, err := utcpall.New(append([]utcp.Option{loopbackEgress}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	conn := serve(t, newServer(t, server.WithRegistry(reg), server.WithRegistryWritesWithoutAuth()))
	return exprdv1.NewToolRegistryClient(conn), exprdv1.NewExprToolClient(conn)
}

// weatherProvider is an HTTP provider whose tools answer {"ok": true}; its
// /status/N answers status N with an HTML page.
func weatherProvider(t *testing.T) *httptest.Server {
	t.Helper()
	p := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if code, ok := strings.CutPrefix(r.URL.Path, "/status/"); ok {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(map[string]int{"404": 404, "500": 500}[code])
			_, _ = w.Write([]byte("<html><body>nginx at lb-3.internal.example</body></html>"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok": true}`))
	}))
	t.Cleanup(p.Close)
	return p
}

// weatherManual is a manual of the given tools, each an http GET of p.
func weatherManual(p *httptest.Server, tools ...string) []byte {
	var ts []any
	for _, n := range tools {
		ts = append(ts, map[string]any{"name": n, "description": "The weather: " + n + ".",
			"tool_call_template": map[string]any{"call_template_type": "http", "url": p.URL + "/" + n}})
	}
	raw, _ := json.Marshal(map[string]any{"utcp_version": "1.0.1", "manual_version": "1.0.0", "tools": ts})
	return raw
}

func inline(name string, manual []byte, replace bool) *exprdv1.RegisterManualRequest {
	return &exprdv1.RegisterManualRequest{Name: name, Replace: replace, Source: &exprdv1.RegisterManualRequest_ManualJson{ManualJson: string(manual)}}
}

func fromURL(name, url string, replace bool) *exprdv1.RegisterManualRequest {
	return &exprdv1.RegisterManualRequest{Name: name, Replace: replace, Source: &exprdv1.RegisterManualRequest_Url{Url: url}}
}

func fromTarget(name, target string, sec exprdv1.RegisterManualRequest_GrpcSecurity) *exprdv1.RegisterManualRequest {
	return &exprdv1.RegisterManualRequest{Name: name, GrpcSecurity: sec, Source: &exprdv1.RegisterManualRequest_GrpcTarget{GrpcTarget: target}}
}

// listed is the names ListTools answers for manual.
func listed(t *testing.T, c exprdv1.ToolRegistryClient, manual string) []string {
	t.Helper()
	resp, err := c.ListTools(context.Background(), &exprdv1.ListToolsRequest{Manual: manual})
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	var names []string
	for _, tool := range resp.GetTools() {
		names = append(names, tool.GetName())
	}
	return names
}

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// RegisterManual with replace used to deregister the old manual first, so a
// refused replacement left nothing. Now the old manual and its tools stay.
func TestRegisterManualReplaceRefusedKeepsOld(t *testing.T) {
	t.Parallel()
	p := weatherProvider(t)
	noURL := []byte(`{"utcp_version": "1.0.1", "tools": [{"name": "forecast", "tool_call_template": {"call_template_type": "http"}}]}`)
	down := closedPort(t)
	cases := []struct {
		name string
		req  *exprdv1.RegisterManualRequest
		code codes.Code
	}{
		{"a tool without url", inline("weather", noURL, true), codes.InvalidArgument},
		{"not JSON", inline("weather", []byte(`{"tools": [`), true), codes.InvalidArgument},
		{"a url that is not a manual", fromURL("weather", p.URL+"/forecast", true), codes.InvalidArgument},
		{"a url answering 404", fromURL("weather", p.URL+"/status/404", true), codes.InvalidArgument},
		{"a url answering 500", fromURL("weather", p.URL+"/status/500", true), codes.Unavailable},
		{"a provider that is down", fromURL("weather", "http://"+down+"/utcp", true), codes.Unavailable},
		{"plain http to a remote host", fromURL("weather", "http://tools.example.com/utcp", true), codes.InvalidArgument},
		{"a grpc target that is down", &exprdv1.RegisterManualRequest{Name: "weather", Replace: true, Source: &exprdv1.RegisterManualRequest_GrpcTarget{GrpcTarget: down}}, codes.Unavailable},
		{"a bad grpc target", &exprdv1.RegisterManualRequest{Name: "weather", Replace: true, Source: &exprdv1.RegisterManualRequest_GrpcTarget{GrpcTarget: "nowhere"}}, codes.InvalidArgument},
		{"no source", &exprdv1.RegisterManualRequest{Name: "weather", Replace: true}, codes.InvalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, _ := registryClient(t)
			ctx := context.Background()
			if _, err := c.RegisterManual(ctx, inline("weather", weatherManual(p, "forecast", "current"), false)); err != nil {
				t.Fatal(err)
			}
			before, err := c.ListTools(ctx, &exprdv1.ListToolsRequest{Manual: "weather", View: exprdv1.ToolView_TOOL_VIEW_FULL})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.RegisterManual(ctx, tc.req)
			if status.Code(err) != tc.code {
				t.Fatalf("replace: got %v, want %v", err, tc.code)
			}
			after, err := c.ListTools(ctx, &exprdv1.ListToolsRequest{Manual: "weather", View: exprdv1.ToolView_TOOL_VIEW_FULL})
			if err != nil {
				t.Fatal(err)
			}
			if len(after.GetTools()) != 2 || !slices.EqualFunc(before.GetTools(), after.GetTools(), func(a, b *exprdv1.ToolInfo) bool {
				return a.GetName() == b.GetName() && a.GetDescription() == b.GetDescription() && a.GetInputSchemaJson() == b.GetInputSchemaJson() && a.GetInputSchemaJson() != ""
			}) {
				t.Errorf("tools after a refused replace: got %v, want %v", after.GetTools(), before.GetTools())
			}
		})
	}
}

func TestRegisterManualReplace(t *testing.T) {
	t.Parallel()
	p := weatherProvider(t)
	c, _ := registryClient(t)
	ctx := context.Background()
	if _, err := c.RegisterManual(ctx, inline("weather", weatherManual(p, "forecast", "current"), false)); err != nil {
		t.Fatal(err)
	}
	resp, err := c.RegisterManual(ctx, inline("weather", weatherManual(p, "forecast", "alerts"), true))
	if err != nil {
		t.Fatalf("replace: %v", err)
	}
	want := []string{"weather.alerts", "weather.forecast"}
	if !slices.Equal(resp.GetTools(), want) || !slices.Equal(listed(t, c, "weather"), want) {
		t.Errorf("tools: got %v (listed %v), want %v", resp.GetTools(), listed(t, c, "weather"), want)
	}
	// replace with no manual of that name registers it.
	if resp, err := c.RegisterManual(ctx, inline("news", weatherManual(p, "today"), true)); err != nil || !slices.Equal(resp.GetTools(), []string{"news.today"}) {
		t.Errorf("replace of a new name: got %v, %v; want [news.today]", resp.GetTools(), err)
	}
}

// Clients listing while another replaces a manual see the old tools or the
// new ones, whole: never none, never a mix.
func TestRegisterManualReplaceConcurrentList(t *testing.T) {
	t.Parallel()
	p := weatherProvider(t)
	c, _ := registryClient(t)
	ctx := context.Background()
	v1, v2 := weatherManual(p, "forecast", "current"), weatherManual(p, "forecast", "current", "alerts")
	bad := []byte(`{"utcp_version": "1.0.1", "tools": [{"name": "forecast", "tool_call_template": {"call_template_type": "http"}}]}`)
	sets := [][]string{{"weather.current", "weather.forecast"}, {"weather.alerts", "weather.current", "weather.forecast"}}
	if _, err := c.RegisterManual(ctx, inline("weather", v1, false)); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer stop.Store(true)
		for i := range 30 {
			m := [][]byte{v2, bad, v1}[i%3]
			_, err := c.RegisterManual(ctx, inline("weather", m, true))
			if wantErr := i%3 == 1; wantErr != (err != nil) {
				t.Errorf("replace %d: got %v", i, err)
			}
		}
	}()
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				resp, err := c.ListTools(ctx, &exprdv1.ListToolsRequest{Manual: "weather"})
				if err != nil {
					t.Errorf("ListTools: %v", err)
					return
				}
				var got []string
				for _, tool := range resp.GetTools() {
					got = append(got, tool.GetName())
				}
				if !slices.ContainsFunc(sets, func(s []string) bool { return slices.Equal(s, got) }) {
					t.Errorf("ListTools during a replace: got %v, want one of %v", got, sets)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// A manual registered as my-api is my_api; every RPC taking a manual's name
// used to need that form. Now the name as registered works everywhere.
func TestManualNameAcceptedAsRegistered(t *testing.T) {
	t.Parallel()
	p := weatherProvider(t)
	c, e := registryClient(t)
	ctx := context.Background()
	resp, err := c.RegisterManual(ctx, inline("my-api", weatherManual(p, "get"), false))
	if err != nil || resp.GetManual() != "my_api" || !slices.Equal(resp.GetTools(), []string{"my_api.get"}) {
		t.Fatalf("RegisterManual: got %v, %v; want manual my_api, tools [my_api.get]", resp, err)
	}
	for _, name := range []string{"my-api", "my_api", "my api"} {
		t.Run("ListTools "+name, func(t *testing.T) {
			if got := listed(t, c, name); !slices.Equal(got, []string{"my_api.get"}) {
				t.Errorf("got %v, want [my_api.get]", got)
			}
		})
	}
	lt, _ := c.ListTools(ctx, &exprdv1.ListToolsRequest{Manual: "my-api"})
	if got := lt.GetTools()[0].GetManual(); got != "my_api" {
		t.Errorf("ToolInfo.manual: got %q, want the normalised my_api", got)
	}
	// A tool named with the manual as registered.
	d, err := e.Describe(ctx, &exprdv1.DescribeRequest{Settings: &exprdv1.Settings{Functions: []*exprdv1.Function{
		{Name: "fetch", Runner: exprdv1.Function_RUNNER_SERVER, ServerName: "my-api.get"}}}})
	if err != nil || !strings.Contains(d.GetFunctionsPrompt(), "The weather: get.") {
		t.Errorf("Describe with server_name my-api.get: got %v; want the tool's description", err)
	}
	// Replace, and the name taken without it.
	if _, err := c.RegisterManual(ctx, inline("my-api", weatherManual(p, "get", "put"), true)); err != nil {
		t.Errorf("replace my-api: %v", err)
	}
	_, err = c.RegisterManual(ctx, inline("my-api", weatherManual(p, "get"), false))
	if ri := resourceInfo(t, err, codes.AlreadyExists); ri.GetResourceType() != "manual" || ri.GetResourceName() != "my_api" {
		t.Errorf("register my-api again: got %v, want ResourceInfo manual my_api", ri)
	}
	dr, err := c.DeregisterManual(ctx, &exprdv1.DeregisterManualRequest{Name: "my-api"})
	if err != nil || dr.GetManual() != "my_api" || !slices.Equal(dr.GetTools(), []string{"my_api.get", "my_api.put"}) {
		t.Fatalf("DeregisterManual my-api: got %v, %v; want my_api [my_api.get my_api.put]", dr, err)
	}
	_, err = c.DeregisterManual(ctx, &exprdv1.DeregisterManualRequest{Name: "my-api"})
	if ri := resourceInfo(t, err, codes.NotFound); ri.GetResourceType() != "manual" || ri.GetResourceName() != "my_api" {
		t.Errorf("deregister again: got %v, want ResourceInfo manual my_api", ri)
	}
}

// resourceInfo is err's ResourceInfo, asserting its code.
func resourceInfo(t *testing.T, err error, code codes.Code) *errdetails.ResourceInfo {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != code {
		t.Fatalf("got %v, want %v", err, code)
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.ResourceInfo); ok {
			return ri
		}
	}
	t.Fatalf("%v carries no ResourceInfo", err)
	return nil
}

// ToolRegistry's errors used to carry no errdetails past the request's own
// fields. Now INVALID_ARGUMENT names the field (and the JSON path inside a
// manual), NOT_FOUND and ALREADY_EXISTS the manual; none shows a provider's
// raw answer.
func TestToolRegistryErrorDetails(t *testing.T) {
	t.Parallel()
	p := weatherProvider(t)
	c, _ := registryClient(t)
	ctx := context.Background()
	if _, err := c.RegisterManual(ctx, inline("weather", weatherManual(p, "forecast"), false)); err != nil {
		t.Fatal(err)
	}
	register := func(req *exprdv1.RegisterManualRequest) func() error {
		return func() error { _, err := c.RegisterManual(ctx, req); return err }
	}
	badManual := []byte(`{"utcp_version": "1.0.1", "tools": [{"name": "a", "tool_call_template": {"call_template_type": "http"}}]}`)
	httpTools := weatherManual(p, "a")
	cases := []struct {
		name string
		call func() error
		code codes.Code
		// field is the BadRequest field; kind and resource the ResourceInfo.
		field, kind, resource string
		msg                   string // in the message
	}{
		{name: "no name", call: register(&exprdv1.RegisterManualRequest{Source: &exprdv1.RegisterManualRequest_Url{Url: p.URL}}), code: codes.InvalidArgument, field: "name"},
		{name: "no source", call: register(&exprdv1.RegisterManualRequest{Name: "x"}), code: codes.InvalidArgument, field: "source"},
		{name: "a tool without url", call: register(inline("x", badManual, false)), code: codes.InvalidArgument,
			field: "manual_json.tools[0].tool_call_template.url", msg: "manual_json.tools[0].tool_call_template.url: missing"},
		{name: "not JSON", call: register(inline("x", []byte("{"), false)), code: codes.InvalidArgument, field: "manual_json"},
		{name: "every tool filtered out", call: register(inline("x", []byte(`{"utcp_version": "1", "tools": [{"name": "a", "tool_call_template": {"call_template_type": "text", "content": "x"}}]}`), false)),
			code: codes.InvalidArgument, field: "manual_json", msg: "allowed_communication_protocols"},
		{name: "not a manual", call: register(fromURL("x", p.URL+"/forecast", false)), code: codes.InvalidArgument, field: "url"},
		{name: "a url answering 404", call: register(fromURL("x", p.URL+"/status/404", false)), code: codes.InvalidArgument, field: "url", msg: "url: provider answered 404"},
		{name: "a missing variable", call: register(fromURL("x", p.URL+"/${MANUAL_PATH}", false)), code: codes.InvalidArgument, field: "url", msg: "x_MANUAL_PATH"},
		{name: "plain http to a remote host", call: register(fromURL("x", "http://tools.example.com/utcp", false)), code: codes.InvalidArgument, field: "url", msg: "use an https:// URL"},
		{name: "a grpc target without a port", call: register(fromTarget("x", "nowhere", 0)), code: codes.InvalidArgument, field: "grpc_target"},
		{name: "a grpc target with port 0", call: register(fromTarget("x", "127.0.0.1:0", 0)), code: codes.InvalidArgument, field: "grpc_target"},
		{name: "plaintext to a remote grpc target", call: register(fromTarget("x", "tools.example.com:443", exprdv1.RegisterManualRequest_GRPC_SECURITY_PLAINTEXT)), code: codes.InvalidArgument, field: "grpc_security"},
		{name: "an unknown grpc security", call: register(fromTarget("x", "127.0.0.1:9", 7)), code: codes.InvalidArgument, field: "grpc_security"},
		{name: "grpc security with a url", call: register(&exprdv1.RegisterManualRequest{Name: "x", GrpcSecurity: exprdv1.RegisterManualRequest_GRPC_SECURITY_TLS, Source: &exprdv1.RegisterManualRequest_ManualJson{ManualJson: string(httpTools)}}), code: codes.InvalidArgument, field: "grpc_security"},
		{name: "a taken name", call: register(inline("weather", httpTools, false)), code: codes.AlreadyExists, kind: "manual", resource: "weather"},
		{name: "deregister an unknown manual", call: func() error {
			_, err := c.DeregisterManual(ctx, &exprdv1.DeregisterManualRequest{Name: "wether"})
			return err
		}, code: codes.NotFound, kind: "manual", resource: "wether", msg: `did you mean "weather"`},
		{name: "deregister without a name", call: func() error {
			_, err := c.DeregisterManual(ctx, &exprdv1.DeregisterManualRequest{})
			return err
		}, code: codes.InvalidArgument, field: "name"},
		{name: "an empty query", call: func() error {
			_, err := c.SearchTools(ctx, &exprdv1.SearchToolsRequest{Query: " "})
			return err
		}, code: codes.InvalidArgument, field: "query"},
		{name: "a url answering 500", call: register(fromURL("x", p.URL+"/status/500", false)), code: codes.Unavailable, msg: "provider answered 500"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			st := status.Convert(err)
			if st.Code() != tc.code {
				t.Fatalf("got %v, want %v", err, tc.code)
			}
			if !strings.Contains(st.Message(), tc.msg) {
				t.Errorf("message: got %q, want it to contain %q", st.Message(), tc.msg)
			}
			for _, leak := range []string{"nginx", "lb-3", "html", "WithInsecureHTTP", "use_ssl"} {
				if strings.Contains(st.Message(), leak) {
					t.Errorf("message %q holds %q", st.Message(), leak)
				}
			}
			var br *errdetails.BadRequest
			var ri *errdetails.ResourceInfo
			for _, d := range st.Details() {
				switch d := d.(type) {
				case *errdetails.BadRequest:
					br = d
				case *errdetails.ResourceInfo:
					ri = d
				}
			}
			switch {
			case tc.field != "":
				if br == nil || len(br.GetFieldViolations()) != 1 || br.GetFieldViolations()[0].GetField() != tc.field || br.GetFieldViolations()[0].GetDescription() == "" {
					t.Errorf("BadRequest: got %v, want one violation of field %q with a description", br, tc.field)
				}
			case tc.kind != "":
				if ri == nil || ri.GetResourceType() != tc.kind || ri.GetResourceName() != tc.resource {
					t.Errorf("ResourceInfo: got %v, want %s %q", ri, tc.kind, tc.resource)
				}
			}
		})
	}
}

// utcpProvider serves go-utcp's UTCPService (one tool, ping) on ip, over
// TLS when cert is given.
func utcpProvider(t *testing.T, ip string, cert *tls.Certificate) string {
	t.Helper()
	lis, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		exprdproc.SkipOrFailInCI(t, "cannot listen on %s: %v", ip, err)
	}
	var opts []grpc.ServerOption
	if cert != nil {
		opts = append(opts, grpc.Creds(credentials.NewServerTLSFromCert(cert)))
	}
	gs := grpc.NewServer(opts...)
	grpcpb.RegisterUTCPServiceServer(gs, pingProvider{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gs.Serve(lis)
	}()
	t.Cleanup(func() {
		gs.Stop()
		<-done
	})
	return lis.Addr().String()
}

// pingProvider is a go-utcp UTCPService with one tool, ping.
type pingProvider struct {
	grpcpb.UnimplementedUTCPServiceServer
}

func (pingProvider) GetManual(context.Context, *grpcpb.Empty) (*grpcpb.Manual, error) {
	return &grpcpb.Manual{Version: "1", Tools: []*grpcpb.Tool{{Name: "ping", Description: "Pings."}}}, nil
}

// grpc_target's security follows the egress policy: plaintext by default
// to a host the operator lists, TLS otherwise, and a host the policy
// refuses (127.0.0.2 when only 127.0.0.1 is listed) is refused at
// registration whatever the security asked for.
func TestRegisterManualGrpcTargetSecurity(t *testing.T) {
	t.Parallel()
	const remote = "127.0.0.2"
	cert, pool := testcert.SelfSigned(t, remote)
	remoteTLS := utcpProvider(t, remote, &cert)
	remotePlain := utcpProvider(t, remote, nil)
	local := utcpProvider(t, "127.0.0.1", nil)
	f, err := grpctransport.NewFactory(grpctransport.WithTLSConfig(&tls.Config{RootCAs: pool}))
	if err != nil {
		t.Fatal(err)
	}
	onlyLocal, _ := registryClient(t, utcp.WithTransport(grpctransport.Type, f), utcp.WithEgress(egress.MustParse("127.0.0.1")))
	listed, _ := registryClient(t, utcp.WithTransport(grpctransport.Type, f), utcp.WithEgress(egress.MustParse("127.0.0.1", remote)))
	const (
		unset     = exprdv1.RegisterManualRequest_GRPC_SECURITY_UNSPECIFIED
		tlsOn     = exprdv1.RegisterManualRequest_GRPC_SECURITY_TLS
		plaintext = exprdv1.RegisterManualRequest_GRPC_SECURITY_PLAINTEXT
	)
	cases := []struct {
		name   string
		c      exprdv1.ToolRegistryClient
		target string
		sec    exprdv1.RegisterManualRequest_GrpcSecurity
		code   codes.Code
	}{
		{"an unlisted target", onlyLocal, remoteTLS, unset, codes.InvalidArgument},
		{"an unlisted target, TLS asked for", onlyLocal, remoteTLS, tlsOn, codes.InvalidArgument},
		{"an unlisted target, plaintext asked for", onlyLocal, remoteTLS, plaintext, codes.InvalidArgument},
		{"a listed target: plaintext by default", listed, remotePlain, unset, codes.OK},
		{"a listed target, TLS asked for", listed, remoteTLS, tlsOn, codes.OK},
		{"a listed target without TLS, TLS asked for", listed, remotePlain, tlsOn, codes.Unavailable},
		{"a loopback target: plaintext by default", onlyLocal, local, unset, codes.OK},
		{"a loopback target, plaintext asked for", onlyLocal, local, plaintext, codes.OK},
		{"a loopback target without TLS, TLS asked for", onlyLocal, local, tlsOn, codes.Unavailable},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := "p" + string(rune('a'+i))
			resp, err := tc.c.RegisterManual(context.Background(), fromTarget(name, tc.target, tc.sec))
			if status.Code(err) != tc.code {
				t.Fatalf("got %v, want %v", err, tc.code)
			}
			if err == nil && !slices.Equal(resp.GetTools(), []string{name + ".ping"}) {
				t.Errorf("tools: got %v, want [%s.ping]", resp.GetTools(), name)
			}
			msg := status.Convert(err).Message()
			if tc.code == codes.Unavailable && !strings.Contains(msg, "over TLS") {
				t.Errorf("message %q: want it to say TLS was tried", msg)
			}
			if strings.Contains(msg, "use_ssl") || strings.Contains(msg, "WithInsecureHTTP") {
				t.Errorf("message %q names a template field or a Go identifier", msg)
			}
		})
	}
}

// TestRegisterPublishedDocuments: OpenAI's and Twilio's published
// documents register inline through the API, and what was left out is in
// the response, per operation, with why.
func TestRegisterPublishedDocuments(t *testing.T) {
	c, _ := registryClient(t, utcp.WithVariables(map[string]string{
		"openai_APIKEYAUTH_API_KEY": "sk-test", "twilio_ACCOUNTSID_AUTHTOKEN_USERNAME": "u", "twilio_ACCOUNTSID_AUTHTOKEN_PASSWORD": "p",
	}))
	for _, tt := range []struct {
		name, file string
		tools      int
		dropped    []string // registered without their output schema
		unbound    int      // operations skipped: they need the admin key, not bound here
	}{
		{"openai", "openai-openapi.json", 169, []string{"ListContainers", "CreateContainer", "RetrieveContainer"}, 119},
		{"twilio", "twilio-api-v2010.json", 197, nil, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := os.ReadFile("../utcp/testdata/catalogs/" + tt.file)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.RegisterManual(context.Background(), inline(tt.name, doc, false))
			if err != nil {
				t.Fatal(err)
			}
			if got := len(resp.GetTools()); got != tt.tools {
				t.Errorf("got %d tools, want %d", got, tt.tools)
			}
			var dropped []string
			unbound := 0
			for _, s := range resp.GetSkipped() {
				switch {
				case s.GetRegistered() && strings.HasPrefix(s.GetReason(), "output schema dropped: "):
					dropped = append(dropped, s.GetName())
				case !s.GetRegistered() && strings.HasPrefix(s.GetReason(), `needs the variable "ADMINAPIKEYAUTH_API_KEY", which the operator has not bound to manual "openai"`):
					unbound++
				default:
					t.Errorf("skipped %+v, want only output schemas dropped and operations needing the admin key", s)
				}
			}
			if !slices.Equal(dropped, tt.dropped) || unbound != tt.unbound {
				t.Errorf("got %v dropped and %d operations needing the admin key, want %v and %d", dropped, unbound, tt.dropped, tt.unbound)
			}
		})
	}
}

// allowed_communication_protocols, with a url only, says which transports
// the discovered tools may use: http alone by default, sse when asked; a
// protocol a url's tools cannot use is INVALID_ARGUMENT naming it.
func TestRegisterManualAllowedProtocols(t *testing.T) {
	t.Parallel()
	var url string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /utcp", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"utcp_version": "1.0.1", "manual_version": "1.0.0", "tools": []any{
			map[string]any{"name": "get", "description": "Gets.", "tool_call_template": map[string]any{"call_template_type": "http", "url": url + "/get"}},
			map[string]any{"name": "events", "description": "Streams events.", "tool_call_template": map[string]any{"call_template_type": "sse", "url": url + "/events"}},
		}})
	})
	p := httptest.NewServer(mux)
	t.Cleanup(p.Close)
	url = p.URL
	byURL := func(name string, protocols ...string) *exprdv1.RegisterManualRequest {
		req := fromURL(name, url+"/utcp", false)
		req.AllowedCommunicationProtocols = protocols
		return req
	}
	tests := []struct {
		name    string
		req     *exprdv1.RegisterManualRequest
		tools   []string // the registered tools, with their transports
		skipped []string
		field   string // of the INVALID_ARGUMENT, when refused
	}{
		{name: "none: http alone", req: byURL("a"), tools: []string{"a.get http"}, skipped: []string{"events"}},
		{name: "http and sse", req: byURL("b", "http", "sse"), tools: []string{"b.events sse", "b.get http"}},
		{name: "sse alone", req: byURL("c", "sse"), tools: []string{"c.events sse"}, skipped: []string{"get"}},
		{name: "http and streamable_http", req: byURL("d", "http", "streamable_http"), tools: []string{"d.get http"}, skipped: []string{"events"}},
		{name: "grpc", req: byURL("e", "grpc"), field: "allowed_communication_protocols[0]"},
		{name: "ftp after http", req: byURL("f", "http", "ftp"), field: "allowed_communication_protocols[1]"},
		{name: "an empty name", req: byURL("g", ""), field: "allowed_communication_protocols[0]"},
		{name: "with manual_json", req: &exprdv1.RegisterManualRequest{Name: "h", AllowedCommunicationProtocols: []string{"http"},
			Source: &exprdv1.RegisterManualRequest_ManualJson{ManualJson: string(weatherManual(p, "get"))}}, field: "allowed_communication_protocols"},
		{name: "with grpc_target", req: &exprdv1.RegisterManualRequest{Name: "i", AllowedCommunicationProtocols: []string{"http"},
			Source: &exprdv1.RegisterManualRequest_GrpcTarget{GrpcTarget: closedPort(t)}}, field: "allowed_communication_protocols"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, _ := registryClient(t)
			resp, err := c.RegisterManual(context.Background(), tc.req)
			if tc.field != "" {
				if st := status.Convert(err); st.Code() != codes.InvalidArgument || badRequestField(st) != tc.field {
					t.Errorf("got %v (field %q), want InvalidArgument naming %s", err, badRequestField(st), tc.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			list, err := c.ListTools(context.Background(), &exprdv1.ListToolsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			var tools, skipped []string
			for _, tool := range list.GetTools() {
				tools = append(tools, tool.GetName()+" "+tool.GetCallTemplateType())
			}
			for _, s := range resp.GetSkipped() {
				if !s.GetRegistered() {
					skipped = append(skipped, s.GetName())
				}
			}
			if !slices.Equal(tools, tc.tools) || !slices.Equal(skipped, tc.skipped) {
				t.Errorf("got tools %v, skipped %v; want %v, skipped %v", tools, skipped, tc.tools, tc.skipped)
			}
		})
	}
}
