package codemode_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/exprd/exprd/codemode"
)

// checkCase is a program refused before it runs (testdata/checks.json);
// the same cases seed the fuzz target.
type checkCase struct {
	Name   string `json:"name"`
	Code   string `json:"code"`
	Reason string `json:"reason"`
	Line   int    `json:"line"`
	Column int    `json:"column"`
}

func loadChecks(t testing.TB) []checkCase {
	t.Helper()
	b, err := os.ReadFile("testdata/checks.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []checkCase
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	return cases
}

func TestRefusedBeforeRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tt := range loadChecks(t) {
		t.Run(tt.Name, func(t *testing.T) {
			t.Parallel()
			res, err := e.rt.Run(context.Background(), tt.Code, codemode.RunOptions{Tools: []string{"math.add"}})
			ce := codeError(t, err)
			if string(ce.Reason) != tt.Reason || ce.Line != tt.Line || ce.Column != tt.Column {
				t.Errorf("got %s at %d:%d (%s), want %s at %d:%d", ce.Reason, ce.Line, ce.Column, ce.Message, tt.Reason, tt.Line, tt.Column)
			}
			if len(res.Trace) != 0 {
				t.Errorf("got %d tool calls, want none", len(res.Trace))
			}
		})
	}
	if n := e.local.calls.Load(); n != 0 {
		t.Errorf("got %d calls of the provider, want none", n)
	}
}

// The whitelist holds where the call happens: a name computed at run time
// is refused too, and nothing is sent.
func TestRunTimeWhitelist(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, code := range []string{
		`let n = "local.slow"; codemode.CallTool(n, {})`,
		`codemode.CallTool("local." + "slow", {})`,
		`let n = "local.slow"; codemode.CallToolStream(n, {})`,
		`map(["math.add", "local.slow"], codemode.CallTool(#, {"a": 1, "b": 2}))`,
	} {
		res, err := e.rt.Run(context.Background(), code, codemode.RunOptions{Tools: []string{"math.add"}})
		ce := codeError(t, err)
		if ce.Reason != codemode.UnknownReference || ce.Tool != "local.slow" || ce.Line != 1 {
			t.Errorf("%s: got %s on %q at line %d (%s), want unknown-reference on local.slow", code, ce.Reason, ce.Tool, ce.Line, ce.Message)
		}
		for _, c := range res.Trace {
			if c.Tool == "local.slow" {
				t.Errorf("%s: local.slow is in the trace", code)
			}
		}
	}
	if n := e.local.calls.Load(); n != 0 {
		t.Errorf("got %d calls of local.slow, want none", n)
	}
}

// Exact names: a literal is checked as written, never by prefix or case.
func TestToolNameExtraction(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	code := `let a = codemode.CallTool("math.add", {"a": 1, "b": 2});
let s = codemode.CallToolStream("local.ticks", {"n": 1});
codemode.CallTool("math.add", {"a": codemode.Get(a, "result"), "b": len(s)})`
	a, err := e.rt.Check(code, allTools, codemode.Budgets{})
	if err != nil {
		t.Fatal(err)
	}
	if got := a.UsedTools(); len(got) != 2 || got[0] != "local.ticks" || got[1] != "math.add" {
		t.Errorf("got %v, want [local.ticks math.add]", got)
	}
	if !a.Streams || a.Dynamic || len(a.Tools) != 3 || a.Tools[1].Line != 2 || a.Tools[1].Column != 33 {
		t.Errorf("got %+v, want streams, no dynamic name, local.ticks at 2:33", a)
	}
	for _, name := range []string{"math.ad", "Math.add", "math.add ", "math"} {
		if _, err := e.rt.Check(`codemode.CallTool("math.add", {}); codemode.CallTool("`+name+`", {})`, []string{"math.add"}, codemode.Budgets{}); err == nil {
			t.Errorf("%q: got no error, want it refused", name)
		}
	}
}
