package mcpserve_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/exprd/exprd/codemode"
	"github.com/exprd/exprd/mcpserve"
)

const chain = `let r1 = codemode.CallTool("math.add", {"a": 5, "b": 7});
let sum = codemode.Get(r1, "result");
codemode.CallTool("math.multiply", {"a": sum, "b": 3})`

// Every code-mode tool, at every revision: the same tools, the same
// answers, each request on its own (the server keeps no session).
func TestCodeModeToolsAtEachRevision(t *testing.T) {
	t.Parallel()
	url, _ := serve(t, mcpserve.Config{Registry: demoRegistry(t)})
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			t.Parallel()
			cs := connect(t, url, rev, "")
			if got := cs.InitializeResult().ProtocolVersion; got != rev {
				t.Errorf("negotiated %s, want %s", got, rev)
			}
			names, _ := listAll(t, cs)
			if want := []string{"search_tools", "tools_info", "call_tool_chain"}; !slices.Equal(names, want) {
				t.Errorf("tools/list: %v, want %v", names, want)
			}

			res := call(t, cs, "search_tools", map[string]any{"task_description": "add two numbers together", "limit": 3})
			found := structuredAs[struct {
				Tools []struct{ Name, Inputs, Description string }
			}](t, res)
			if res.IsError || len(found.Tools) == 0 || found.Tools[0].Name != "math.add" || found.Tools[0].Inputs != "{a: number, b: number}" {
				t.Errorf("search_tools: %+v (%s), want math.add first with {a: number, b: number}", found, text(res))
			}
			if !strings.HasPrefix(text(res), "math.add({a: number, b: number}): ") {
				t.Errorf("search_tools text: %q, want a line a tool", text(res))
			}

			res = call(t, cs, "tools_info", map[string]any{"names": []string{"math.add", "catalog.get"}})
			info := structuredAs[struct {
				Tools []struct {
					Name        string
					InputSchema map[string]any `json:"input_schema"`
				}
			}](t, res)
			if res.IsError || len(info.Tools) != 2 || info.Tools[1].Name != "catalog.get" || info.Tools[0].InputSchema["type"] != "object" {
				t.Errorf("tools_info: %+v (%s)", info, text(res))
			}

			res = call(t, cs, "call_tool_chain", map[string]any{"code": chain})
			run := structuredAs[chainResult](t, res)
			if res.IsError || string(run.Value) != `{"result":36}` || len(run.Trace) != 2 || run.Trace[1].Tool != "math.multiply" || run.Trace[1].Outcome != "ok" {
				t.Errorf("call_tool_chain: %+v (%s), want 36 and two calls", run, text(res))
			}
			res = call(t, cs, "call_tool_chain", map[string]any{"code": `codemode.Get(codemode.CallTool("catalog.get", {"id": "p03"}), "name")`, "timeout": 5000})
			if run := structuredAs[chainResult](t, res); res.IsError || string(run.Value) != `"Pen set"` {
				t.Errorf("call_tool_chain over gRPC: %+v (%s)", run, text(res))
			}
		})
	}
}

// What a model gets wrong comes back as a tool error it can read, and
// the server goes on answering.
func TestCodeModeToolsBadInput(t *testing.T) {
	t.Parallel()
	url, _ := serve(t, mcpserve.Config{Registry: demoRegistry(t), Limits: mcpserve.Limits{MaxTimeout: time.Minute}})
	cs := connect(t, url, "2025-11-25", "")
	tests := []struct {
		name, tool string
		args       any
		want       string // in the error's text
		reason     string // call_tool_chain's error reason, when it ran
		trace      int
	}{
		{"no task", "search_tools", map[string]any{}, "task_description is empty", "", 0},
		{"limit 0", "search_tools", map[string]any{"task_description": "add", "limit": 0}, "limit 0: want 1 to 50", "", 0},
		{"limit past the most", "search_tools", map[string]any{"task_description": "add", "limit": mcpserve.MaxSearchLimit + 1}, "limit 51", "", 0},
		{"the arguments not an object", "search_tools", []int{1}, "", "", 0},
		{"no names", "tools_info", map[string]any{"names": []string{}}, "0 names: give 1 to 32", "", 0},
		{"too many names", "tools_info", map[string]any{"names": slices.Repeat([]string{"math.add"}, mcpserve.MaxInfoNames+1)}, "33 names", "", 0},
		{"names not an array", "tools_info", map[string]any{"names": "math.add"}, "names must be an array", "", 0},
		{"an unknown tool", "tools_info", map[string]any{"names": []string{"math.ad"}}, "no such tool: math.ad (did you mean math.add", "", 0},
		{"no code", "call_tool_chain", map[string]any{"code": " "}, "code is empty", "", 0},
		{"code not a string", "call_tool_chain", map[string]any{"code": 7}, "code must be a string", "", 0},
		{"a syntax error", "call_tool_chain", map[string]any{"code": "1 +"}, "", "expression-syntax", 0},
		{"a computed name", "call_tool_chain", map[string]any{"code": `let n = "math." + "add"; codemode.CallTool(n, {"a": 1, "b": 2})`}, "", "unknown-reference", 0},
		{"a tool that is not registered", "call_tool_chain", map[string]any{"code": `codemode.CallTool("math.power", {"a": 1})`}, "", "host-function", 1},
		{"the provider's error", "call_tool_chain", map[string]any{"code": `codemode.CallTool("math.divide", {"a": 1, "b": 0})`}, "", "host-function", 1},
		{"the tool's arguments", "call_tool_chain", map[string]any{"code": `codemode.CallTool("math.add", {"a": "x"})`}, "", "invalid-arguments", 1},
		{"source over the limit", "call_tool_chain", map[string]any{"code": "1" + strings.Repeat(" ", codemode.DefaultMaxSourceLength)}, "", "guardrail-violation", 0},
		{"a negative timeout", "call_tool_chain", map[string]any{"code": "1", "timeout": -1}, "timeout -1 ms", "", 0},
		{"a timeout past the maximum", "call_tool_chain", map[string]any{"code": "1", "timeout": 60_001}, "the server's maximum of 60000 ms", "", 0},
		{"the time budget", "call_tool_chain", map[string]any{"code": `len(map(1..1000000, # * 2))`, "timeout": 1}, "", "budget-exceeded", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := call(t, cs, tt.tool, tt.args)
			if !res.IsError {
				t.Fatalf("got %s, want a tool error", text(res))
			}
			if !strings.Contains(text(res), tt.want) {
				t.Errorf("got %q, want it to say %q", text(res), tt.want)
			}
			if tt.reason != "" {
				run := structuredAs[chainResult](t, res)
				if run.Error == nil || run.Error.Reason != tt.reason || len(run.Trace) != tt.trace {
					t.Errorf("got %+v, want reason %s and %d calls traced", run, tt.reason, tt.trace)
				}
			}
		})
	}
	// A task told at length is ranked by its first terms.
	long := "add two numbers " + strings.Repeat("and then some more words ", 400)
	if res := call(t, cs, "search_tools", map[string]any{"task_description": long}); res.IsError || !strings.HasPrefix(text(res), "math.add(") {
		t.Errorf("a %d-byte task: %s", len(long), text(res))
	}
	// A tool the endpoint does not serve is a JSON-RPC error.
	if _, err := callErr(cs, "math.add", map[string]any{"a": 1, "b": 2}); err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Errorf("an unknown tool: %v, want a JSON-RPC error", err)
	}
	// The server is intact.
	if res := call(t, cs, "call_tool_chain", map[string]any{"code": chain}); res.IsError {
		t.Errorf("after the bad input: %s", text(res))
	}
}

// A run may take exactly the server's maximum; the tool-call bound and
// the source bound hold at their limit and one past it.
func TestCodeModeLimitsAtTheEdge(t *testing.T) {
	t.Parallel()
	url, _ := serve(t, mcpserve.Config{Registry: demoRegistry(t), Limits: mcpserve.Limits{MaxTimeout: 20 * time.Second}})
	cs := connect(t, url, "2026-07-28", "")
	calls := func(n int) string {
		return "len(map(1.." + strconv.Itoa(n) + `, codemode.CallTool("math.add", {"a": #, "b": 1})))`
	}
	tests := []struct {
		name   string
		args   map[string]any
		reason string
	}{
		{"timeout at the maximum", map[string]any{"code": "1", "timeout": 20_000}, ""},
		{"tool calls at the limit", map[string]any{"code": calls(codemode.DefaultMaxToolCalls)}, ""},
		{"one call past it", map[string]any{"code": calls(codemode.DefaultMaxToolCalls + 1)}, "budget-exceeded"},
		{"source at the limit", map[string]any{"code": "1" + strings.Repeat(" ", codemode.DefaultMaxSourceLength-1)}, ""},
		{"one past it", map[string]any{"code": "1" + strings.Repeat(" ", codemode.DefaultMaxSourceLength)}, "guardrail-violation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := call(t, cs, "call_tool_chain", tt.args)
			run := structuredAs[chainResult](t, res)
			switch {
			case tt.reason == "" && res.IsError:
				t.Errorf("got %s, want it to run", text(res))
			case tt.reason != "" && (run.Error == nil || run.Error.Reason != tt.reason):
				t.Errorf("got %s, want %s", text(res), tt.reason)
			}
		})
	}
}

// tools_info at the body's limit, on a registry of 1,500 tools:
// MaxInfoNames names as long as the body allows are answered within the
// call's deadline (20 s; a long name is compared with no tool's name for
// similar ones: at its length times each name's, 500 tools took over 20
// s), a name asked twice once; one name more is refused without the list
// being decoded.
func TestInfoNamesAtTheBodyLimit(t *testing.T) {
	t.Parallel()
	url, _ := serve(t, mcpserve.Config{Registry: wideRegistry(t, 1500, 16)})
	cs := connect(t, url, "2026-07-28", "")
	long := func(n int) []string {
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("math.%d%s", i, strings.Repeat("x", (mcpserve.DefaultMaxBodyBytes-4096)/(mcpserve.MaxInfoNames+1)))
		}
		return names
	}
	tests := []struct {
		name  string
		names []string
		want  string
	}{
		{"the most names, each long", long(mcpserve.MaxInfoNames), "no such tool: math.0x"},
		{"one name more", long(mcpserve.MaxInfoNames + 1), "33 names or more"},
		{"a name asked twice", []string{"math.add", "math.add"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := call(t, cs, "tools_info", map[string]any{"names": tt.names})
			if tt.want == "" {
				if n := strings.Count(text(res), `"name":"math.add"`); res.IsError || n != 1 {
					t.Errorf("described %d times: %s", n, text(res))
				}
				return
			}
			if !res.IsError || !strings.Contains(text(res), tt.want) {
				t.Errorf("got %.200s, want a tool error saying %q", text(res), tt.want)
			}
		})
	}
}
