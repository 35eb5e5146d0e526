package server_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/model/scripted"
	"github.com/exprd/exprd/server"
	"github.com/exprd/exprd/server/auth"
)

// Tokens whose tools: scopes limit what they see of the registry (math
// over HTTP, the catalogue over gRPC, as codeModeConnWith registers
// them). Each has "*": every service.
const (
	scopeMath   = "scope-math-token-000001"  // tools:math
	scopePrefix = "scope-prefix-token-00002" // tools:catalog.get*
	scopeStar   = "scope-star-token-0000003" // tools:*
	scopePlain  = "scope-plain-token-000004" // no tools: scope
)

var allRegistered = []string{"catalog.get", "catalog.restock", "catalog.search", "math.add", "math.divide", "math.multiply", "math.sqrt", "math.subtract"}

// scopeCases are the tokens and the tools each sees.
var scopeCases = []struct {
	name, token string
	sees        []string
}{
	{"tools:math", scopeMath, []string{"math.add", "math.divide", "math.multiply", "math.sqrt", "math.subtract"}},
	{"tools:catalog.get*", scopePrefix, []string{"catalog.get"}},
	{"tools:*", scopeStar, allRegistered},
	{"no tools: scope", scopePlain, allRegistered},
}

// scopeSees reports whether a scope token sees a tool.
func scopeSees(token, tool string) bool {
	for _, c := range scopeCases {
		if c.token == token {
			return slices.Contains(c.sees, tool)
		}
	}
	panic("not a scope token: " + token)
}

// scopedConn serves math and the catalogue with the scope tokens, and a
// scripted model ("scripted") playing script when it has turns.
func scopedConn(t *testing.T, script scripted.Script) (*grpc.ClientConn, *scripted.Server) {
	t.Helper()
	tokens, err := auth.ParseTokens(strings.NewReader(strings.Join([]string{
		"math " + scopeMath + " *,tools:math",
		"prefix " + scopePrefix + " *,tools:catalog.get*",
		"star " + scopeStar + " *,tools:*",
		"plain " + scopePlain + " *",
	}, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	if len(script.Turns) == 0 {
		return codeModeConnWith(t, nil, server.WithAuth(tokens)), nil
	}
	models, srv := scriptedModels(t, script)
	return codeModeConnWith(t, nil, server.WithAuth(tokens), server.WithModels(models)), srv
}

func scopeCtx(t *testing.T, token string) context.Context {
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// refusal is what a client reads of a refused call: its code, ErrorInfo
// reason and BadRequest field and description.
type refusal struct {
	code                codes.Code
	reason, field, desc string
}

func refusalOf(err error) refusal {
	st := status.Convert(err)
	r := refusal{code: st.Code()}
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			r.reason = d.GetReason()
		case *errdetails.BadRequest:
			if v := d.GetFieldViolations(); len(v) > 0 {
				r.field, r.desc = v[0].GetField(), v[0].GetDescription()
			}
		}
	}
	return r
}

// ListTools and SearchTools show a token only the tools it sees: the
// others are not listed, not found, and take no place in a page.
func TestToolScopesListAndSearch(t *testing.T) {
	t.Parallel()
	conn, _ := scopedConn(t, scripted.Script{})
	c := exprdv1.NewToolRegistryClient(conn)
	list := func(ctx context.Context, manual string, size uint32) []string {
		t.Helper()
		var names []string
		req := &exprdv1.ListToolsRequest{Manual: manual, PageSize: size}
		for {
			resp, err := c.ListTools(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.GetTools()) == 0 && resp.GetNextPageToken() != "" {
				t.Fatal("an empty page with a next page")
			}
			for _, tool := range resp.GetTools() {
				names = append(names, tool.GetName())
			}
			if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" {
				return names
			}
		}
	}
	search := func(ctx context.Context, q string, size uint32) []string {
		t.Helper()
		var found []string
		req := &exprdv1.SearchToolsRequest{Query: q, PageSize: size}
		for {
			resp, err := c.SearchTools(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			for _, st := range resp.GetTools() {
				found = append(found, st.GetTool().GetName())
			}
			if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" {
				return found
			}
		}
	}
	for _, tt := range scopeCases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := scopeCtx(t, tt.token)
			// Whole, and a tool a page: the last page says there is no
			// next one, though unseen tools follow it.
			for _, size := range []uint32{0, 1} {
				if got := list(ctx, "", size); !slices.Equal(got, tt.sees) {
					t.Errorf("ListTools (page size %d): got %v, want %v", size, got, tt.sees)
				}
			}
			// A manual of which it sees nothing lists as an unknown one.
			for _, manual := range []string{"math", "catalog"} {
				want := slices.DeleteFunc(slices.Clone(tt.sees), func(n string) bool { return !strings.HasPrefix(n, manual+".") })
				if got := list(ctx, manual, 0); !slices.Equal(got, want) {
					t.Errorf("ListTools of manual %s: got %v, want %v", manual, got, want)
				}
			}
			// What it finds is what a token seeing everything finds, less
			// what it does not see, in the same order, in pages of one
			// as in one page.
			for _, q := range []string{"find a product by name", "one product by id", "add two numbers"} {
				all := search(scopeCtx(t, scopePlain), q, 0)
				want := slices.DeleteFunc(slices.Clone(all), func(n string) bool { return !slices.Contains(tt.sees, n) })
				for _, size := range []uint32{0, 1} {
					if got := search(ctx, q, size); !slices.Equal(got, want) {
						t.Errorf("SearchTools(%q), page size %d: got %v, want %v (of %v)", q, size, got, want, all)
					}
				}
			}
		})
	}
	// A token of tools:math finds math.add first.
	resp, err := c.SearchTools(scopeCtx(t, scopeMath), &exprdv1.SearchToolsRequest{Query: "add two numbers", PageSize: 1})
	if err != nil || len(resp.GetTools()) != 1 || resp.GetTools()[0].GetTool().GetName() != "math.add" {
		t.Errorf("SearchTools for tools:math: got %v %v, want math.add", resp.GetTools(), err)
	}
}

// CodeMode refuses a tool the token does not see as it refuses any tool
// off the whitelist: the same reason, message and position, whether the
// name is a literal or computed, in Execute and in Run.
func TestToolScopesCodeMode(t *testing.T) {
	t.Parallel()
	conn, _ := scopedConn(t, scripted.Script{})
	c := exprdv1.NewCodeModeClient(conn)
	getPen := `codemode.Get(codemode.CallTool("catalog.get", {"id": "p03"}), "name")`
	computed := `let n = "catalog." + "get"; codemode.CallTool(n, {"id": "p03"})`
	tests := []struct {
		name, token, code string
		tools             []string
		value             string
		// offList: refused as the same run by scopePlain with these
		// tools is (the unseen tool left off its whitelist).
		offList []string
	}{
		{"tools:math, a literal", scopeMath, getPen, []string{"catalog.get"}, "", []string{}},
		{"tools:math, computed", scopeMath, computed, []string{"catalog.get", "math.add"}, "", []string{"math.add"}},
		{"tools:math, its own", scopeMath, chain, []string{"math.add", "math.multiply"}, `{"result":36}`, nil},
		{"tools:catalog.get*, its own", scopePrefix, getPen, []string{"catalog.get"}, `"Pen set"`, nil},
		{"tools:catalog.get*, math", scopePrefix, chain, []string{"math.add", "math.multiply"}, "", []string{}},
		{"tools:*", scopeStar, getPen, []string{"catalog.get"}, `"Pen set"`, nil},
		{"no tools: scope", scopePlain, getPen, []string{"catalog.get"}, `"Pen set"`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := scopeCtx(t, tt.token)
			resp, err := c.Execute(ctx, &exprdv1.ExecuteRequest{Code: tt.code, Tools: tt.tools})
			if err != nil {
				t.Fatal(err)
			}
			_, result := runCodeCtx(t, ctx, c, &exprdv1.RunStart{Source: &exprdv1.RunStart_Code{Code: tt.code}, Tools: tt.tools})
			if tt.offList == nil {
				if resp.GetValueJson() != tt.value || resp.GetError() != nil || result.GetValueJson() != tt.value {
					t.Errorf("got %s (error %v), Run %s (error %v); want %s", resp.GetValueJson(), resp.GetError(), result.GetValueJson(), result.GetError(), tt.value)
				}
				return
			}
			off, err := c.Execute(scopeCtx(t, scopePlain), &exprdv1.ExecuteRequest{Code: tt.code, Tools: tt.offList})
			if err != nil {
				t.Fatal(err)
			}
			if off.GetError().GetReason() != "unknown-reference" {
				t.Fatalf("off the whitelist: got %v, want unknown-reference", off.GetError())
			}
			for what, got := range map[string]*exprdv1.CodeError{"Execute": resp.GetError(), "Run": result.GetError()} {
				if !proto.Equal(got, off.GetError()) {
					t.Errorf("%s: got %v, want %v, as off the whitelist", what, got, off.GetError())
				}
			}
			if len(resp.GetTrace()) != 0 || len(result.GetTrace()) != 0 {
				t.Errorf("a refused tool was called: %v %v", resp.GetTrace(), result.GetTrace())
			}
		})
	}
}

// An unknown tool a token's view matches fails as for any token, but its
// error offers only similar names the token sees.
func TestToolScopesCodeModeSimilarNames(t *testing.T) {
	t.Parallel()
	conn, _ := scopedConn(t, scripted.Script{})
	c := exprdv1.NewCodeModeClient(conn)
	code := `codemode.CallTool("math.get", {})`
	for _, tt := range []struct {
		token  string
		offers bool
	}{{scopePlain, true}, {scopeMath, false}} {
		resp, err := c.Execute(scopeCtx(t, tt.token), &exprdv1.ExecuteRequest{Code: code, Tools: []string{"math.get"}})
		if err != nil {
			t.Fatal(err)
		}
		msg := resp.GetError().GetMessage()
		if resp.GetError().GetReason() != "host-function" || !strings.Contains(msg, `tool "math.get" not found`) ||
			strings.Contains(msg, "catalog.get") != tt.offers {
			t.Errorf("%s: got %v; want host-function, not found, offering catalog.get: %v", tt.token, resp.GetError(), tt.offers)
		}
	}
}

// runCodeCtx is runCode under ctx (a token's), without approvals.
func runCodeCtx(t *testing.T, ctx context.Context, c exprdv1.CodeModeClient, start *exprdv1.RunStart) ([]*exprdv1.RunResponse, *exprdv1.RunResult) {
	t.Helper()
	stream, err := c.Run(ctx)
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
			t.Fatalf("Run: %v", err)
		}
		if r := m.GetResult(); r != nil {
			return events, r
		}
		events = append(events, m)
	}
}

// CallTool's prompt mode ranks and offers the model only the tools the
// token sees: a plan naming another is refused as one naming a tool it
// was not offered (invalid-plan), and nothing is called.
func TestToolScopesCallToolPrompt(t *testing.T) {
	t.Parallel()
	plan := `{"tools": ["catalog.get"], "code": "codemode.Get(codemode.CallTool(\"catalog.get\", {\"id\": \"p03\"}), \"name\")", "stream": false}`
	conn, model := scopedConn(t, scripted.Script{Loop: true, Turns: []scripted.Turn{
		{Match: &scripted.Match{LastUser: "product"}, Text: plan},
		{Match: &scripted.Match{LastUser: "refused"}, Text: plan}, // the repair round
	}})
	c := exprdv1.NewCodeModeClient(conn)
	for _, tt := range []struct {
		name, token, value, reason string
	}{
		{"tools:math", scopeMath, "", "invalid-plan"},
		{"tools:catalog.get*", scopePrefix, `"Pen set"`, ""},
		{"no tools: scope", scopePlain, `"Pen set"`, ""},
	} {
		before := len(model.Requests())
		resp, err := c.CallTool(scopeCtx(t, tt.token), &exprdv1.CallToolRequest{Prompt: "What is the name of product p03, one product by id?"})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if resp.GetValueJson() != tt.value || resp.GetError().GetReason() != tt.reason {
			t.Errorf("%s: got %s (error %v), want %s %s", tt.name, resp.GetValueJson(), resp.GetError(), tt.value, tt.reason)
		}
		offered := model.Requests()[before].Chat.Messages[0].Content
		if sees := tt.token != scopeMath; strings.Contains(offered, "catalog.get") != sees || strings.Contains(offered, "catalog.search") != (tt.token == scopePlain) {
			t.Errorf("%s: the model was offered:\n%s", tt.name, offered)
		}
		if tt.reason != "" && len(resp.GetTrace()) != 0 {
			t.Errorf("%s: a refused plan called %v", tt.name, resp.GetTrace())
		}
	}
}

// AgentLoop refuses a declared UTCP tool the token does not see as it
// refuses an unknown one, and an expr tool's host function of one as an
// unknown function; a codemode tool cannot call it. The server serves the
// token's next turn as before.
func TestToolScopesAgentLoop(t *testing.T) {
	t.Parallel()
	conn, _ := scopedConn(t, scripted.Script{Loop: true, Turns: []scripted.Turn{
		{Match: &scripted.Match{LastUser: "add", LastRole: "user"}, ToolCalls: []scripted.ToolCall{{ID: "c1", Name: "add", Arguments: args(map[string]any{"a": 2, "b": 3})}}},
		{Match: &scripted.Match{LastUser: "code", LastRole: "user"}, ToolCalls: []scripted.ToolCall{{ID: "c1", Name: "code", Arguments: args(map[string]any{
			"code": `codemode.CallTool("catalog.get", {"id": "p03"})`})}}},
		{Match: &scripted.Match{LastUser: "similar", LastRole: "user"}, ToolCalls: []scripted.ToolCall{{ID: "c1", Name: "code", Arguments: args(map[string]any{
			"code": `codemode.CallTool("math.get", {})`})}}},
		{Match: &scripted.Match{LastRole: "tool"}, Text: "done"},
	}})
	c := exprdv1.NewAgentLoopClient(conn)
	user := []*exprdv1.AgentMessage{{Role: exprdv1.AgentMessage_ROLE_USER, Content: "add"}}
	utcpTool := func(name string) *exprdv1.AgentStart {
		return &exprdv1.AgentStart{Messages: user, Tools: []*exprdv1.AgentTool{{Name: "add", Executor: exprdv1.AgentTool_EXECUTOR_UTCP, UtcpTool: name}}}
	}
	exprTool := func(name string) *exprdv1.AgentStart {
		return &exprdv1.AgentStart{Messages: user, Tools: []*exprdv1.AgentTool{{Name: "add", Executor: exprdv1.AgentTool_EXECUTOR_EXPR}},
			ExprSettings: &exprdv1.Settings{Functions: []*exprdv1.Function{utcpFn("f", name)}}}
	}
	start := func(token string, s *exprdv1.AgentStart) (results []*exprdv1.ToolResult, err error) {
		stream, err := c.Run(scopeCtx(t, token))
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: s}}); err != nil {
			t.Fatal(err)
		}
		for {
			m, err := stream.Recv()
			if err != nil {
				return results, err
			}
			if r := m.GetToolResult(); r != nil {
				results = append(results, r)
			}
			if m.GetDone() != nil {
				return results, nil
			}
		}
	}
	tests := []struct {
		name, token string
		start       func(string) *exprdv1.AgentStart
		tool        string
		// unknown: refused as the same start by scopePlain naming this
		// unregistered tool is, the name aside.
		unknown string
	}{
		{"tools:math, UTCP catalog.get", scopeMath, utcpTool, "catalog.get", "catalog.nope"},
		{"tools:math, UTCP math.add", scopeMath, utcpTool, "math.add", ""},
		// Unregistered, in the token's view: "did you mean" offers no
		// catalog.get, as it does to a token seeing everything.
		{"tools:math, UTCP math.get", scopeMath, utcpTool, "math.get", "math.get"},
		{"tools:catalog.get*, UTCP math.add", scopePrefix, utcpTool, "math.add", "math.nope"},
		{"tools:catalog.get*, UTCP catalog.get", scopePrefix, utcpTool, "catalog.get", ""},
		{"tools:*, UTCP catalog.get", scopeStar, utcpTool, "catalog.get", ""},
		{"tools:math, expr's host function catalog.get", scopeMath, exprTool, "catalog.get", "catalog.nope"},
		{"no tools: scope, expr's host function catalog.get", scopePlain, exprTool, "catalog.get", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := start(tt.token, tt.start(tt.tool))
			if tt.unknown == "" {
				if err != nil {
					t.Fatalf("got %v, want the turn done", err)
				}
				return
			}
			_, unknownErr := start(scopePlain, tt.start(tt.unknown))
			got, want := refusalOf(err), refusalOf(unknownErr)
			if got.code != codes.InvalidArgument || got.reason == "" || got.field == "" {
				t.Fatalf("got %v (%+v), want INVALID_ARGUMENT with ErrorInfo and BadRequest", err, got)
			}
			// The unknown name may have similar names to offer; the
			// unseen one offers none the token does not see.
			wantDesc, _, _ := strings.Cut(strings.ReplaceAll(want.desc, tt.unknown, tt.tool), ";")
			gotDesc, _, _ := strings.Cut(got.desc, ";")
			if got.code != want.code || got.reason != want.reason || got.field != want.field || gotDesc != wantDesc {
				t.Errorf("got %+v, want %+v as for an unknown tool", got, want)
			}
			for _, n := range allRegistered {
				if n != tt.tool && !scopeSees(tt.token, n) && strings.Contains(got.desc, n) {
					t.Errorf("the refusal names %s, which the token does not see: %s", n, got.desc)
				}
			}
			// The server serves the token's next turn.
			if _, err := start(tt.token, utcpTool(map[string]string{scopeMath: "math.add", scopePrefix: "catalog.get"}[tt.token])); err != nil {
				t.Errorf("the next turn: %v", err)
			}
		})
	}
	t.Run("a codemode tool calls only what the token sees", func(t *testing.T) {
		t.Parallel()
		for _, tt := range []struct {
			token   string
			refused bool
		}{{scopeMath, true}, {scopePrefix, false}} {
			s := &exprdv1.AgentStart{Messages: []*exprdv1.AgentMessage{{Role: exprdv1.AgentMessage_ROLE_USER, Content: "code"}},
				Tools: []*exprdv1.AgentTool{{Name: "code", Executor: exprdv1.AgentTool_EXECUTOR_CODEMODE, CodemodeTools: []string{"catalog.get"}}}}
			results, err := start(tt.token, s)
			if err != nil || len(results) != 1 {
				t.Fatalf("got %v %v, want one tool result and done", results, err)
			}
			if r := results[0]; r.GetIsError() != tt.refused || tt.refused && !strings.Contains(r.GetOutputJson(), "not allowed") {
				t.Errorf("%s: got %v, refused %v", tt.token, r, tt.refused)
			}
		}
		// An unregistered name in the token's view is offered no similar
		// tool it does not see (math.get: not catalog.get).
		s := &exprdv1.AgentStart{Messages: []*exprdv1.AgentMessage{{Role: exprdv1.AgentMessage_ROLE_USER, Content: "similar"}},
			Tools: []*exprdv1.AgentTool{{Name: "code", Executor: exprdv1.AgentTool_EXECUTOR_CODEMODE, CodemodeTools: []string{"math.add", "math.get"}}}}
		results, err := start(scopeMath, s)
		if err != nil || len(results) != 1 || !results[0].GetIsError() || strings.Contains(results[0].GetOutputJson(), "catalog") {
			t.Errorf("math.get under tools:math: %v %v, want an error naming no catalog tool", results, err)
		}
	})
}

// ExprTool resolves a RUNNER_SERVER function only to a tool the token
// sees: another is refused as a function the server does not have.
func TestToolScopesExprTool(t *testing.T) {
	t.Parallel()
	conn, _ := scopedConn(t, scripted.Script{})
	c := exprdv1.NewExprToolClient(conn)
	settings := func(tool string) *exprdv1.Settings {
		return &exprdv1.Settings{Read: true, Functions: []*exprdv1.Function{utcpFn("f", tool)}}
	}
	for _, tt := range []struct {
		token, tool, unknown string
	}{
		{scopeMath, "catalog.get", "catalog.nope"},
		{scopeMath, "math.add", ""},
		{scopePrefix, "math.add", "math.nope"},
		{scopePrefix, "catalog.get", ""},
		{scopeStar, "catalog.get", ""},
		{scopePlain, "catalog.get", ""},
	} {
		ctx := scopeCtx(t, tt.token)
		_, derr := c.Describe(ctx, &exprdv1.DescribeRequest{Settings: settings(tt.tool)})
		stream, err := c.Session(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_ = stream.Send(openMsg(&exprdv1.Open{Settings: settings(tt.tool)}))
		_, serr := stream.Recv()
		_ = stream.CloseSend()
		if tt.unknown == "" {
			if derr != nil || serr != nil {
				t.Errorf("%s with %s: Describe %v, Session %v; want both served", tt.token, tt.tool, derr, serr)
			}
			continue
		}
		_, uerr := c.Describe(scopeCtx(t, scopePlain), &exprdv1.DescribeRequest{Settings: settings(tt.unknown)})
		want := refusalOf(uerr)
		want.desc = strings.ReplaceAll(want.desc, tt.unknown, tt.tool)
		for what, err := range map[string]error{"Describe": derr, "Session": serr} {
			if got := refusalOf(err); got != want || got.code != codes.InvalidArgument {
				t.Errorf("%s with %s: %s got %+v, want %+v as for an unknown function", tt.token, tt.tool, what, got, want)
			}
		}
	}
}
