package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/exprd/exprd/codemode"
	"github.com/exprd/exprd/demo/providers"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/model/scripted"
	"github.com/exprd/exprd/server"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/utcpall"
)

// codeModeServer serves CodeMode over math (HTTP) and the catalogue (gRPC)
// and, when turns are given, a scripted model as the provider "scripted".
func codeModeServer(t *testing.T, turns ...scripted.Turn) exprdv1.CodeModeClient {
	t.Helper()
	return codeModeServerWith(t, turns)
}

// codeModeServerWith is codeModeServer with more options, which come last.
func codeModeServerWith(t *testing.T, turns []scripted.Turn, more ...server.Option) exprdv1.CodeModeClient {
	t.Helper()
	return exprdv1.NewCodeModeClient(codeModeConnWith(t, turns, more...))
}

// codeModeConnWith is codeModeServerWith's connection.
func codeModeConnWith(t *testing.T, turns []scripted.Turn, more ...server.Option) *grpc.ClientConn {
	t.Helper()
	m, err := providers.StartMath()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	cat, err := providers.StartCatalog()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cat.Close)
	reg, err := utcpall.New(loopbackEgress, utcp.WithRoundTripper(func(rt http.RoundTripper) http.RoundTripper { return otelhttp.NewTransport(rt) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	ctx := context.Background()
	if _, err := reg.Register(ctx, "math", utcp.FromURL(m.URL()+"/utcp")); err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(cat.Addr(), ":")
	tmpl, _ := json.Marshal(map[string]any{"call_template_type": "grpc", "host": host, "port": port, "service_name": "grpcpb.UTCPService"})
	if _, err := reg.Register(ctx, "catalog", utcp.FromTemplate(tmpl)); err != nil {
		t.Fatal(err)
	}
	opts := []server.Option{server.WithRegistry(reg)}
	if len(turns) > 0 {
		models, _ := scriptedModels(t, scripted.Script{Turns: turns})
		opts = append(opts, server.WithModels(models))
	}
	return serve(t, newServer(t, append(opts, more...)...))
}

const chain = `let r1 = codemode.CallTool("math.add", {"a": 5, "b": 7});
let sum = codemode.Get(r1, "result");
codemode.CallTool("math.multiply", {"a": sum, "b": 3})`

func TestCodeModeExecute(t *testing.T) {
	t.Parallel()
	c := codeModeServer(t)
	tests := []struct {
		name      string
		code      string
		tools     []string
		wantValue string
		wantErr   string
		trace     int
	}{
		{"a chain", chain, []string{"math.add", "math.multiply"}, `{"result":36}`, "", 2},
		{"arithmetic", `let x = 2; x * 21`, nil, `42`, "", 0},
		{"a gRPC tool", `codemode.Get(codemode.CallTool("catalog.get", {"id": "p03"}), "name")`, []string{"catalog.get"}, `"Pen set"`, "", 1},
		{"a tool outside the whitelist, as a literal", chain, []string{"math.add"}, "", "unknown-reference", 0},
		{"a tool outside the whitelist, computed", `let n = "math." + "multiply"; codemode.CallTool(n, {"a": 1, "b": 2})`, []string{"math.add"}, "", "unknown-reference", 0},
		{"a tool's error", `codemode.CallTool("math.divide", {"a": 1, "b": 0})`, []string{"math.divide"}, "", "host-function", 1},
		{"another name", `len("x")`, nil, "", "", 0},
		{"$env", `$env`, nil, "", "unknown-reference", 0},
		// Size limits are guardrails, as in the ExprTool
		// (docs/exprtool.md#reasons).
		{"source at the length limit", "1" + strings.Repeat(" ", codemode.DefaultMaxSourceLength-1), nil, "1", "", 0},
		{"source over the length limit", "1" + strings.Repeat(" ", codemode.DefaultMaxSourceLength), nil, "", "guardrail-violation", 0},
		{"nodes over the limit", "1" + strings.Repeat("+1", codemode.DefaultMaxNodes), nil, "", "guardrail-violation", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp, err := c.Execute(context.Background(), &exprdv1.ExecuteRequest{Code: tt.code, Tools: tt.tools})
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantErr == "" && tt.wantValue == "" {
				return // only that it answers
			}
			if got := resp.GetError().GetReason(); got != tt.wantErr {
				t.Errorf("got error %v, want reason %q", resp.GetError(), tt.wantErr)
			}
			if got := resp.GetValueJson(); got != tt.wantValue {
				t.Errorf("got value %s, want %s", got, tt.wantValue)
			}
			if len(resp.GetTrace()) != tt.trace {
				t.Errorf("got %d traced calls, want %d", len(resp.GetTrace()), tt.trace)
			}
		})
	}
}

// runCode starts a Run and answers approvals with approve; it returns the
// events it saw and the result.
func runCode(t *testing.T, c exprdv1.CodeModeClient, start *exprdv1.RunStart, approve func(*exprdv1.ApprovalRequest, grpc.BidiStreamingClient[exprdv1.RunRequest, exprdv1.RunResponse])) ([]*exprdv1.RunResponse, *exprdv1.RunResult) {
	t.Helper()
	stream, err := c.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&exprdv1.RunRequest{Msg: &exprdv1.RunRequest_Start{Start: start}}); err != nil {
		t.Fatal(err)
	}
	var events []*exprdv1.RunResponse
	for {
		m, err := stream.Recv()
		if err != nil {
			t.Fatalf("Recv: %v", err)
		}
		if r := m.GetResult(); r != nil {
			return events, r
		}
		events = append(events, m)
		if a := m.GetApprovalRequest(); a != nil {
			approve(a, stream)
		}
	}
}

func reply(ok bool) func(*exprdv1.ApprovalRequest, grpc.BidiStreamingClient[exprdv1.RunRequest, exprdv1.RunResponse]) {
	return func(a *exprdv1.ApprovalRequest, s grpc.BidiStreamingClient[exprdv1.RunRequest, exprdv1.RunResponse]) {
		_ = s.Send(&exprdv1.RunRequest{Msg: &exprdv1.RunRequest_ApprovalReply{ApprovalReply: &exprdv1.ApprovalReply{ApprovalId: a.GetApprovalId(), Approved: ok}}})
	}
}

func TestCodeModeRun(t *testing.T) {
	t.Parallel()
	c := codeModeServer(t)
	tools := []string{"math.add", "math.multiply"}
	t.Run("events and an approval accepted", func(t *testing.T) {
		t.Parallel()
		events, r := runCode(t, c, &exprdv1.RunStart{Source: &exprdv1.RunStart_Code{Code: chain}, Tools: tools, NeedsApproval: []string{"math.multiply"}}, reply(true))
		if r.GetValueJson() != `{"result":36}` {
			t.Fatalf("got %v", r)
		}
		var kinds []string
		for _, e := range events {
			switch {
			case e.GetToolCallStarted() != nil:
				kinds = append(kinds, "start "+e.GetToolCallStarted().GetTool())
			case e.GetToolCallFinished() != nil:
				kinds = append(kinds, "end "+e.GetToolCallFinished().GetOutcome().String())
			case e.GetApprovalRequest() != nil:
				kinds = append(kinds, "approve "+e.GetApprovalRequest().GetTool())
			}
		}
		want := "start math.add|end OUTCOME_OK|start math.multiply|approve math.multiply|end OUTCOME_OK"
		if got := strings.Join(kinds, "|"); got != want && got != "start math.add|end OUTCOME_OK|approve math.multiply|start math.multiply|end OUTCOME_OK" {
			t.Errorf("got events %s, want %s", got, want)
		}
	})
	t.Run("an approval rejected is a tool error", func(t *testing.T) {
		t.Parallel()
		_, r := runCode(t, c, &exprdv1.RunStart{Source: &exprdv1.RunStart_Code{Code: chain}, Tools: tools, NeedsApproval: []string{"math.multiply"}}, reply(false))
		if r.GetError().GetReason() != "host-function" || !strings.Contains(r.GetError().GetMessage(), "math.multiply") {
			t.Errorf("got %v, want a host-function error naming math.multiply", r.GetError())
		}
	})
	t.Run("cancel while waiting", func(t *testing.T) {
		t.Parallel()
		_, r := runCode(t, c, &exprdv1.RunStart{Source: &exprdv1.RunStart_Code{Code: chain}, Tools: tools, NeedsApproval: []string{"math.add"}},
			func(_ *exprdv1.ApprovalRequest, s grpc.BidiStreamingClient[exprdv1.RunRequest, exprdv1.RunResponse]) {
				_ = s.Send(&exprdv1.RunRequest{Msg: &exprdv1.RunRequest_Cancel{Cancel: &exprdv1.RunCancel{}}})
			})
		if !r.GetCancelled() {
			t.Errorf("got %v, want a cancelled result", r)
		}
	})
	t.Run("a stream's chunks arrive as events", func(t *testing.T) {
		t.Parallel()
		events, r := runCode(t, c, &exprdv1.RunStart{Source: &exprdv1.RunStart_Code{Code: `len(codemode.CallToolStream("catalog.restock", {"id": "p01", "times": 3}))`}, Tools: []string{"catalog.restock"}}, nil)
		chunks := 0
		for _, e := range events {
			if e.GetChunk() != nil {
				chunks++
			}
		}
		if r.GetValueJson() != "3" || chunks != 3 {
			t.Errorf("got value %s with %d chunk events, want 3 and 3", r.GetValueJson(), chunks)
		}
	})
	t.Run("a bad start", func(t *testing.T) {
		t.Parallel()
		for _, first := range []*exprdv1.RunRequest{
			{Msg: &exprdv1.RunRequest_Cancel{Cancel: &exprdv1.RunCancel{}}},
			{Msg: &exprdv1.RunRequest_Start{Start: &exprdv1.RunStart{}}},
		} {
			stream, _ := c.Run(context.Background())
			_ = stream.Send(first)
			if _, err := stream.Recv(); status.Code(err) != codes.InvalidArgument {
				t.Errorf("got %v, want InvalidArgument", err)
			}
		}
		stream, _ := c.Run(context.Background())
		_ = stream.Send(&exprdv1.RunRequest{Msg: &exprdv1.RunRequest_Start{Start: &exprdv1.RunStart{Source: &exprdv1.RunStart_Prompt{Prompt: "add 2 and 3"}}}})
		if _, err := stream.Recv(); status.Code(err) != codes.FailedPrecondition {
			t.Errorf("a prompt with no model providers: got %v, want FailedPrecondition", err)
		}
	})
}

func TestCodeModeCallToolAndSearch(t *testing.T) {
	t.Parallel()
	plan := `{"tools": ["math.add"], "code": "codemode.Get(codemode.CallTool(\"math.add\", {\"a\": 2, \"b\": 3}), \"result\")", "stream": false}`
	conn := codeModeConnWith(t, []scripted.Turn{
		{Match: &scripted.Match{LastUser: "plus"}, Text: plan},
		{Match: &scripted.Match{LastUser: "hello"}, Text: `{"handled": false}`}})
	c := exprdv1.NewCodeModeClient(conn)
	// "plus" shares no word with math.add's manual: the search's synonyms
	// must still offer it as a candidate.
	resp, err := c.CallTool(context.Background(), &exprdv1.CallToolRequest{Prompt: "What is 2 plus 3?"})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.GetHandled() || resp.GetValueJson() != "5" || resp.GetPlan().GetTools()[0] != "math.add" {
		t.Errorf("got %v (error %v), want handled with value 5 by math.add", resp, resp.GetError())
	}
	resp, err = c.CallTool(context.Background(), &exprdv1.CallToolRequest{Prompt: "Say hello."})
	if err != nil || resp.GetHandled() {
		t.Errorf("got %v %v, want not handled", resp, err)
	}
	if _, err := c.CallTool(context.Background(), &exprdv1.CallToolRequest{Prompt: "x", Provider: "nope"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("an unknown provider: got %v, want InvalidArgument", err)
	}
	// The search of the tools a program may call is ToolRegistry's.
	found, err := exprdv1.NewToolRegistryClient(conn).SearchTools(context.Background(), &exprdv1.SearchToolsRequest{Query: "find a product by name", PageSize: 3})
	if err != nil || len(found.GetTools()) == 0 || found.GetTools()[0].GetTool().GetName() != "catalog.search" {
		t.Errorf("SearchTools: got %v %v, want catalog.search first", found.GetTools(), err)
	}
}

// A provider's JSON whose strings hold bytes that are not UTF-8 reaches the
// client as valid UTF-8, each such byte a U+FFFD (issue: a proto string must
// be UTF-8, and the answer failed to marshal: the client saw a transport
// error instead of the value).
func TestCodeModeInvalidUTF8FromAProvider(t *testing.T) {
	t.Parallel()
	url := oneToolProvider(t, "name", "A name in Latin-1.", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("{\"name\": \"caf\xe9\", \"raw\": \"\xff\xfe\"}"))
	})
	reg, err := utcpall.New(loopbackEgress)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	if _, err := reg.Register(context.Background(), "latin", utcp.FromURL(url+"/utcp")); err != nil {
		t.Fatal(err)
	}
	c := exprdv1.NewCodeModeClient(serve(t, newServer(t, server.WithRegistry(reg))))
	tools := []string{"latin.name"}
	tests := []struct {
		name string
		code string
		want string // a string the value holds
	}{
		{"the whole answer", `codemode.CallTool("latin.name", {})`, "caf\uFFFD"},
		{"one field", `codemode.Get(codemode.CallTool("latin.name", {}), "raw")`, "\uFFFD"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp, err := c.Execute(context.Background(), &exprdv1.ExecuteRequest{Code: tc.code, Tools: tools})
			if err != nil {
				t.Fatalf("Execute: got %v, want an answer", err)
			}
			if v := resp.GetValueJson(); resp.GetError() != nil || !utf8.ValidString(v) || !json.Valid([]byte(v)) || !strings.Contains(v, tc.want) {
				t.Errorf("Execute: got %q (error %v), want valid UTF-8 JSON holding %q", v, resp.GetError(), tc.want)
			}
			_, r := runCode(t, c, &exprdv1.RunStart{Source: &exprdv1.RunStart_Code{Code: tc.code}, Tools: tools}, nil)
			if v := r.GetValueJson(); r.GetError() != nil || !utf8.ValidString(v) || !strings.Contains(v, tc.want) {
				t.Errorf("Run: got %q (error %v), want valid UTF-8 holding %q", v, r.GetError(), tc.want)
			}
		})
	}
}
