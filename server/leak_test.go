package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/model/scripted"
	"github.com/exprd/exprd/server"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/utcpall"
	"github.com/exprd/exprd/utcp/vars"
)

// What the echoing provider is bound to and never may be shown: the API
// key of its manual, the OAuth2 client secret, and the token its token
// endpoint issues, which is identifier-like (only the check of bound
// values keeps it out of an error's type).
const (
	echoedKey    = "sk-live-7Qx2Lm9Rt4Bn8Kd3Wp5"
	clientSecret = "cs-Hk3Lq8Vz2Nw6Rt9Yb4"
	issuedToken  = "otter-maple-quartz-violet"
	// freeText marks every message the provider writes: none is shown.
	freeText = "UPSTREAM-FREE-TEXT"
)

// echoShape is one way the echoing provider fails: its tool, and what a
// caller is told after `provider answered ` with provider messages off
// and on.
type echoShape struct {
	tool      string
	off, on   string
	status    int
	ctype     string
	body      func(credential string) string
	setHeader bool // the credential echoed in a response header too
}

func jsonOf(v any) string {
	raw, _ := json.Marshal(v)
	return string(raw)
}

var echoShapes = []echoShape{
	{tool: "json_message", status: http.StatusUnauthorized, ctype: "application/json",
		off: "401", on: `401 Unauthorized: {"code":"invalid_api_key","type":"invalid_request_error"}`,
		body: func(c string) string {
			return jsonOf(map[string]any{"error": map[string]any{"message": freeText + ": invalid key " + c, "type": "invalid_request_error", "code": "invalid_api_key"}})
		}},
	{tool: "json_type", status: http.StatusForbidden, ctype: "application/json",
		off: "403", on: `403 Forbidden: {"code":"forbidden_key"}`,
		body: func(c string) string {
			return jsonOf(map[string]any{"type": c, "code": "forbidden_key", "message": freeText})
		}},
	{tool: "json_error_text", status: http.StatusBadRequest, ctype: "application/json",
		off: "400", on: "400 Bad Request",
		body: func(c string) string { return jsonOf(map[string]any{"error": freeText + " key=" + c}) }},
	{tool: "plain_text", status: http.StatusInternalServerError, ctype: "text/plain",
		off: "500", on: "500 Internal Server Error",
		body: func(c string) string { return freeText + "\nx-api-key: " + c }},
	{tool: "html", status: http.StatusBadGateway, ctype: "text/html",
		off: "502", on: "502 Bad Gateway",
		body: func(c string) string {
			return "<html><body><h1>" + freeText + "</h1><pre>" + c + "</pre></body></html>"
		}},
	{tool: "header_echo", status: http.StatusTooManyRequests, ctype: "application/json", setHeader: true,
		off: "429", on: `429 Too Many Requests: {"code":"rate_limited","type":"rate_limit_error"}`,
		body: func(string) string {
			return jsonOf(map[string]any{"error": map[string]any{"message": freeText, "type": "rate_limit_error", "code": "rate_limited"}})
		}},
	{tool: "oauth2", status: http.StatusUnauthorized, ctype: "application/json",
		off: "401", on: `401 Unauthorized: {"code":"token_expired"}`,
		body: func(c string) string {
			return jsonOf(map[string]any{"error": map[string]any{"message": freeText + ": token " + c + " expired", "type": c, "code": "token_expired"}})
		}},
}

// echoingProvider serves a UTCP manual at /utcp whose tools (echoShapes)
// fail, each echoing the credential it was sent: the API key bound to
// the manual (header X-Api-Key), or, for oauth2, the token its token
// endpoint issued for the bound client secret.
func echoingProvider(t *testing.T) string {
	t.Helper()
	var base string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /utcp", func(w http.ResponseWriter, _ *http.Request) {
		var tools []any
		for _, sh := range echoShapes {
			auth := map[string]any{"auth_type": "api_key", "api_key": "${KEY}", "var_name": "X-Api-Key", "location": "header"}
			if sh.tool == "oauth2" {
				auth = map[string]any{"auth_type": "oauth2", "token_url": base + "/token", "client_id": "exprd", "client_secret": "${CLIENT_SECRET}"}
			}
			tools = append(tools, map[string]any{"name": sh.tool, "description": "Fails.", "inputs": map[string]any{"type": "object"},
				"tool_call_template": map[string]any{"call_template_type": "http", "http_method": "GET", "url": base + "/" + sh.tool, "auth": auth}})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"utcp_version": "1.0.1", "manual_version": "1.0.0", "tools": tools})
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		if r.FormValue("client_secret") != clientSecret {
			if _, secret, ok := r.BasicAuth(); !ok || secret != clientSecret {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, jsonOf(map[string]any{"access_token": issuedToken, "token_type": "bearer", "expires_in": 3600}))
	})
	for _, sh := range echoShapes {
		mux.HandleFunc("GET /"+sh.tool, func(w http.ResponseWriter, r *http.Request) {
			credential := r.Header.Get("X-Api-Key")
			if sh.tool == "oauth2" {
				credential = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			}
			if sh.setHeader {
				w.Header().Set("X-Api-Key-Received", credential)
				w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token", key="`+credential+`"`)
			}
			w.Header().Set("Content-Type", sh.ctype)
			w.WriteHeader(sh.status)
			_, _ = io.WriteString(w, sh.body(credential))
		})
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	base = srv.URL
	return base
}

// echoingRegistry is a registry holding the echoing provider's manual,
// its key and client secret bound to it.
func echoingRegistry(t *testing.T, opts ...utcp.Option) *utcp.Registry {
	t.Helper()
	opts = append([]utcp.Option{loopbackEgress, utcp.WithVariables(map[string]string{"leaky_KEY": echoedKey, "leaky_CLIENT_SECRET": clientSecret})}, opts...)
	reg, err := utcpall.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	if _, err := reg.Register(context.Background(), "leaky", utcp.FromURL(echoingProvider(t)+"/utcp")); err != nil {
		t.Fatal(err)
	}
	return reg
}

// Of a provider that echoes the credentials bound to its manual, in its
// JSON message, in its JSON type, in plain text, in HTML and in a header,
// and of a model server that fails with text, nothing reaches a client or
// a model but what exprd writes: through ExprTool, CodeMode (direct and
// prompt mode, unary and streamed) and AgentLoop, with the provider's
// messages off (the default: the status code) and on (then the status's
// reason phrase and the error's type and code an allowlist keeps).
func TestUpstreamTextReachesNoOne(t *testing.T) {
	t.Parallel()
	never := []string{echoedKey, clientSecret, issuedToken, freeText, "model-side-detail"}
	body := jsonOf(map[string]any{"error": map[string]any{"message": "model-side-detail: " + echoedKey, "type": "invalid_request_error"}})
	modelError := scripted.Turn{Error: &scripted.ErrorReply{Status: http.StatusBadRequest, Body: []byte(body)}}
	for _, tc := range []struct {
		name string
		on   bool
	}{
		{"provider messages off", false},
		{"provider messages on", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var opts []utcp.Option
			if tc.on {
				opts = append(opts, utcp.WithProviderMessages())
			}
			reg := echoingRegistry(t, opts...)
			// The agent's turn: the model calls every failing tool, then its
			// server fails with text; CodeMode's prompt fails at once.
			var calls []scripted.ToolCall
			var agentTools []*exprdv1.AgentTool
			var fns []*exprdv1.Function
			for i, sh := range echoShapes {
				calls = append(calls, scripted.ToolCall{ID: fmt.Sprintf("c%d", i), Name: sh.tool, Arguments: json.RawMessage(`{}`)})
				agentTools = append(agentTools, &exprdv1.AgentTool{Name: sh.tool, Executor: exprdv1.AgentTool_EXECUTOR_UTCP, UtcpTool: "leaky." + sh.tool})
				fns = append(fns, utcpFn(sh.tool, "leaky."+sh.tool))
			}
			models, ms := scriptedModels(t, scripted.Script{Turns: []scripted.Turn{
				{Match: &scripted.Match{LastRole: "user", LastUser: "agent:"}, ToolCalls: calls},
				{Match: &scripted.Match{LastRole: "tool"}, Error: modelError.Error},
				modelError,
			}, Loop: true})
			conn := serve(t, newServer(t, server.WithRegistry(reg), server.WithModels(models)))
			ctx := context.Background()
			var seen []string
			keep := func(m proto.Message, err error) {
				if m != nil {
					seen = append(seen, protojson.Format(m))
				}
				if err != nil && !errors.Is(err, io.EOF) {
					seen = append(seen, protojson.Format(status.Convert(err).Proto()))
				}
			}

			// Each shape through CodeMode: what the caller is told.
			cm := exprdv1.NewCodeModeClient(conn)
			for _, sh := range echoShapes {
				name := "leaky." + sh.tool
				r, err := cm.Execute(ctx, &exprdv1.ExecuteRequest{Code: `codemode.CallTool("` + name + `", {})`, Tools: []string{name}})
				keep(r, err)
				want := `tool "` + name + `": provider answered ` + sh.off + " (line"
				if tc.on {
					want = `tool "` + name + `": provider answered ` + sh.on + " (line"
				}
				if got := r.GetError().GetMessage(); !strings.Contains(got, want) {
					t.Errorf("%s: got %q, want it to hold %q", sh.tool, got, want)
				}
			}
			et := exprdv1.NewExprToolClient(conn)
			for _, sh := range echoShapes {
				keep(et.Call(ctx, &exprdv1.CallRequest{
					Settings:  &exprdv1.Settings{Read: true, Functions: fns},
					InputJson: `{"read": "` + sh.tool + `({})"}`,
				}))
			}
			keep(cm.CallTool(ctx, &exprdv1.CallToolRequest{Prompt: "fail please"}))
			run := openStream(t, cm.Run, &exprdv1.RunRequest{Msg: &exprdv1.RunRequest_Start{Start: &exprdv1.RunStart{Source: &exprdv1.RunStart_Prompt{Prompt: "fail please"}}}})
			for {
				m, err := run.Recv()
				keep(m, err)
				if err != nil {
					break
				}
			}
			turn := startAgent(t, exprdv1.NewAgentLoopClient(conn), &exprdv1.AgentStart{
				Messages: []*exprdv1.AgentMessage{{Role: exprdv1.AgentMessage_ROLE_USER, Content: "agent: call them all"}},
				Tools:    agentTools,
			})
			for {
				m, err := turn.Recv()
				keep(m, err)
				if err != nil {
					break
				}
			}
			if len(seen) < 2*len(echoShapes)+4 {
				t.Fatalf("saw %d answers, want one from each call at least", len(seen))
			}
			// What the model was sent: the tools' failures, as tool results.
			sent := 0
			for _, r := range ms.Requests() {
				seen = append(seen, string(r.Body))
				if strings.Contains(string(r.Body), "provider answered") {
					sent++
				}
			}
			if sent == 0 {
				t.Error("the model was sent no tool failure")
			}
			for _, s := range seen {
				for _, leak := range never {
					if strings.Contains(s, leak) {
						t.Errorf("%q reached a client or a model: %s", leak, s)
					}
				}
			}
		})
	}
}

// What no client reads, the operator's log has: a failed tool call's and
// a failed model request's upstream text, the values bound to the manual
// replaced.
func TestUpstreamTextIsLogged(t *testing.T) {
	t.Parallel()
	var logBuf syncBuffer
	log := slog.New(slog.NewTextHandler(&logBuf, nil))
	reg := echoingRegistry(t, utcp.WithLogger(log))
	body, _ := json.Marshal(map[string]any{"error": map[string]any{"message": "upstream says: model-side-detail"}})
	models, _ := scriptedModels(t, scripted.Script{Turns: []scripted.Turn{{Error: &scripted.ErrorReply{Status: http.StatusBadRequest, Body: body}}}, Loop: true})
	conn := serve(t, newServer(t, server.WithRegistry(reg), server.WithModels(models), server.WithLogger(log)))
	cm := exprdv1.NewCodeModeClient(conn)
	ctx := context.Background()
	if _, err := cm.Execute(ctx, &exprdv1.ExecuteRequest{Code: `codemode.CallTool("leaky.json_message", {})`, Tools: []string{"leaky.json_message"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cm.CallTool(ctx, &exprdv1.CallToolRequest{Prompt: "fail please"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{freeText + ": invalid key " + vars.Concealed, "model-side-detail"} {
		if !strings.Contains(logBuf.String(), want) {
			t.Errorf("the log does not hold %q:\n%s", want, logBuf.String())
		}
	}
	if strings.Contains(logBuf.String(), echoedKey) {
		t.Errorf("the log holds the bound key:\n%s", logBuf.String())
	}
}

// syncBuffer is a bytes.Buffer a logger and a test may share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
