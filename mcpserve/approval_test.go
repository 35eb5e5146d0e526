package mcpserve_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/exprd/exprd/mcpserve"
)

// asker is a host's user: it answers every elicitation with action and
// counts what it was asked.
type asker struct {
	action string
	asked  atomic.Int32
	last   atomic.Value // the last message
}

func (a *asker) handle(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	a.asked.Add(1)
	a.last.Store(req.Params.Message)
	return &mcp.ElicitResult{Action: a.action}, nil
}

// connectAsking is a go-sdk client session that puts elicitations to a
// (nil: it declares no elicitation), its multi-round trip driven by the
// SDK unless manual.
func connectAsking(t testing.TB, url, revision, token string, a *asker, manual bool) *mcp.ClientSession {
	t.Helper()
	opts := &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: manual}}
	if a != nil {
		opts.ElicitationHandler = a.handle
	}
	cs, err := dialWith(url, revision, token, opts)
	if err != nil {
		t.Fatalf("connect (%s): %v", revision, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

const divideChain = `let r = codemode.CallTool("math.add", {"a": 1, "b": 3}); codemode.CallTool("math.divide", {"a": r.result, "b": 2})`

// A tool that needs approval is asked about through input_required (the
// 2026-07-28 multi-round trip) and runs only when the user accepts; a
// client that cannot be asked is refused. Nothing runs unasked.
func TestApprovalAsked(t *testing.T) {
	t.Parallel()
	url, _ := serve(t, mcpserve.Config{Registry: demoRegistry(t), Expose: mcpserve.ExposeBoth, NeedsApproval: []string{"math.divide"}})
	for _, tc := range []struct {
		name     string
		revision string
		action   string // "": the client declares no elicitation
		tool     string
		args     map[string]any
		asked    int32
		want     string // in the text; an error unless it is the value
		isError  bool
	}{
		{"chain accepted", "2026-07-28", "accept", "call_tool_chain", map[string]any{"code": divideChain}, 1, `"value":{"result":2}`, false},
		{"chain declined", "2026-07-28", "decline", "call_tool_chain", map[string]any{"code": divideChain}, 1, `did not approve "math.divide" (decline); nothing ran`, true},
		{"chain cancelled", "2026-07-28", "cancel", "call_tool_chain", map[string]any{"code": divideChain}, 1, `(cancel); nothing ran`, true},
		{"gateway accepted", "2026-07-28", "accept", "math.divide", map[string]any{"a": 9, "b": 3}, 1, `"result":3`, false},
		{"gateway declined", "2026-07-28", "decline", "math.divide", map[string]any{"a": 9, "b": 3}, 1, `nothing ran`, true},
		{"no elicitation", "2026-07-28", "", "call_tool_chain", map[string]any{"code": divideChain}, 0, `declares no elicitation capability`, true},
		{"older revision", "2025-11-25", "accept", "call_tool_chain", map[string]any{"code": divideChain}, 0, `this client speaks 2025-11-25`, true},
		{"older revision, gateway", "2025-06-18", "accept", "math.divide", map[string]any{"a": 9, "b": 3}, 0, `needs a person's approval`, true},
		{"no tool needs it", "2026-07-28", "accept", "call_tool_chain", map[string]any{"code": `codemode.CallTool("math.add", {"a": 1, "b": 3})`}, 0, `"value":{"result":4}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a *asker
			if tc.action != "" {
				a = &asker{action: tc.action}
			}
			cs := connectAsking(t, url, tc.revision, "", a, false)
			res := call(t, cs, tc.tool, tc.args)
			if res.IsError != tc.isError || !strings.Contains(text(res), tc.want) {
				t.Errorf("isError %v, %s; want isError %v and %q", res.IsError, text(res), tc.isError, tc.want)
			}
			if tc.isError && strings.Contains(text(res), `"trace":[{`) {
				t.Errorf("a refused call ran something: %s", text(res))
			}
			var asked int32
			if a != nil {
				asked = a.asked.Load()
			}
			if asked != tc.asked {
				t.Errorf("the user was asked %d times, want %d", asked, tc.asked)
			}
			if asked > 0 {
				msg, _ := a.last.Load().(string)
				if !strings.Contains(msg, `"math.divide"`) || (tc.tool == "call_tool_chain" && !strings.Contains(msg, divideChain)) {
					t.Errorf("the user was asked %q: want the tool and what it runs", msg)
				}
			}
		})
	}
}

// askState calls a tool with the multi-round trip left to the test: the
// input_required result and its request state.
func askState(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) string {
	t.Helper()
	res := call(t, cs, name, args)
	if !res.NeedsInput() || res.RequestState == "" || len(res.InputRequests) != 1 {
		t.Fatalf("%s: %+v, want input_required with one request and a state", name, res)
	}
	return res.RequestState
}

func answer(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, state, action string) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args, RequestState: state,
		InputResponses: mcp.InputResponseMap{"approval": &mcp.ElicitResult{Action: action}}})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

// A request state is good only for the call, the caller and the tools it
// was asked for, on a replica holding the key that signed it: a hostile
// client cannot forge one, change the program under it, or use
// another's; replicas sharing the key take each other's.
func TestApprovalState(t *testing.T) {
	t.Parallel()
	key := []byte(strings.Repeat("k", mcpserve.MinApprovalKeyBytes))
	reg := demoRegistry(t)
	cfg := mcpserve.Config{Registry: reg, Expose: mcpserve.ExposeBoth, NeedsApproval: []string{"math.divide", "math.multiply"},
		ApprovalKey: key, Verify: verifier}
	urlA, _ := serve(t, cfg)
	urlB, _ := serve(t, cfg)
	other := cfg
	other.ApprovalKey = []byte(strings.Repeat("o", mcpserve.MinApprovalKeyBytes))
	urlC, _ := serve(t, other)
	chain := map[string]any{"code": divideChain}
	a := &asker{action: "accept"}
	ops := connectAsking(t, urlA, "2026-07-28", tokenAll, a, true)
	state := askState(t, ops, "call_tool_chain", chain)
	opsB := connectAsking(t, urlB, "2026-07-28", tokenAll, a, true)
	opsC := connectAsking(t, urlC, "2026-07-28", tokenAll, a, true)
	host := connectAsking(t, urlB, "2026-07-28", tokenMCP, a, true)

	for _, tc := range []struct {
		name   string
		cs     *mcp.ClientSession
		tool   string
		args   map[string]any
		state  string
		action string
		want   string
	}{
		{"answered on another replica", opsB, "call_tool_chain", chain, state, "accept", `"value":{"result":2}`},
		{"again, within its time", opsB, "call_tool_chain", chain, state, "accept", `"value":{"result":2}`},
		{"a replica with another key", opsC, "call_tool_chain", chain, state, "accept", "not one this server gave"},
		{"another caller", host, "call_tool_chain", chain, state, "accept", "asked for another call"},
		{"another program", opsB, "call_tool_chain", map[string]any{"code": strings.Replace(divideChain, `"b": 2`, `"b": 4`, 1)}, state, "accept", "asked for another call"},
		{"the program written otherwise", opsB, "call_tool_chain", map[string]any{"code": divideChain, "timeout": 0}, state, "accept", "asked for another call"},
		{"another tool", opsB, "call_tool_chain", map[string]any{"code": `codemode.CallTool("math.multiply", {"a": 2, "b": 2})`}, state, "accept", "asked for another call"},
		{"a gateway call", opsB, "math.divide", map[string]any{"a": 4, "b": 2}, state, "accept", "asked for another call"},
		{"forged", opsB, "call_tool_chain", chain, "e30." + strings.Repeat("A", 43), "accept", "not one this server gave"},
		{"changed", opsB, "call_tool_chain", chain, "x" + state, "accept", "not one this server gave"},
		{"too long", opsB, "call_tool_chain", chain, strings.Repeat("a", 9000), "accept", "not one this server gave"},
		{"declined", opsB, "call_tool_chain", chain, state, "decline", "did not approve"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := answer(t, tc.cs, tc.tool, tc.args, tc.state, tc.action)
			if !strings.Contains(text(res), tc.want) {
				t.Errorf("%s, want %q", text(res), tc.want)
			}
			if strings.HasPrefix(tc.want, `"value"`) == res.IsError {
				t.Errorf("isError %v: %s", res.IsError, text(res))
			}
		})
	}
	// A gateway call's state holds its arguments, whatever their order
	// or spacing.
	gw := askState(t, ops, "math.divide", map[string]any{"a": 4, "b": 2})
	if res := answer(t, opsB, "math.divide", map[string]any{"b": 2, "a": 4}, gw, "accept"); res.IsError || !strings.Contains(text(res), `"result":2`) {
		t.Errorf("the gateway call approved: %s", text(res))
	}
	if res := answer(t, opsB, "math.divide", map[string]any{"a": 40, "b": 2}, gw, "accept"); !res.IsError || !strings.Contains(text(res), "asked for another call") {
		t.Errorf("other arguments under an approval: %s", text(res))
	}
	// No answer with the state.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := opsB.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool_chain", Arguments: chain, RequestState: state})
	if err != nil || !res.IsError || !strings.Contains(text(res), "answer") {
		t.Errorf("a state without its answer: %v %v", err, res)
	}
}

// A gateway call's arguments are shown whole to the user, or the call is
// refused: at the bound and one past it.
func TestApprovalArgsBound(t *testing.T) {
	t.Parallel()
	url, _ := serve(t, mcpserve.Config{Registry: demoRegistry(t), Expose: mcpserve.ExposeTools, NeedsApproval: []string{"math.divide"}})
	cs := connectAsking(t, url, "2026-07-28", "", &asker{action: "decline"}, true)
	pad := func(n int) map[string]any {
		// {"a":1,"b":1,"p":"..."} of n bytes
		return map[string]any{"a": 1, "b": 1, "p": strings.Repeat("x", n-len(`{"a":1,"b":1,"p":""}`))}
	}
	if res := call(t, cs, "math.divide", pad(mcpserve.MaxApprovalArgsBytes)); !res.NeedsInput() {
		t.Errorf("arguments at the bound: %s, want asked", text(res))
	}
	if res := call(t, cs, "math.divide", pad(mcpserve.MaxApprovalArgsBytes+1)); !res.IsError || !strings.Contains(text(res), "more than a person is asked about") {
		t.Errorf("arguments one past the bound: %s", text(res))
	}
}
