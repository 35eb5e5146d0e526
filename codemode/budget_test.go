package codemode_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/exprd/exprd/codemode"
)

// Each budget at its limit, then one past it. Source length and node count
// are guardrails, as in the evaluator (docs/exprtool.md#reasons):
// guardrail-violation, naming no budget; the others are budget-exceeded,
// naming theirs.
func TestBudgets(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	three := `codemode.CallTool("math.add", {"a": 1, "b": 1}); codemode.CallTool("math.add", {"a": 1, "b": 1}); codemode.CallTool("math.add", {"a": 1, "b": 1}).result`
	tests := []struct {
		name   string
		code   string
		at     codemode.Budgets
		past   codemode.Budgets
		budget string // "": a guardrail
	}{
		{"iterations", `len(map(1..10, #))`, codemode.Budgets{MaxIterations: 10}, codemode.Budgets{MaxIterations: 9}, codemode.BudgetIterations},
		{"memory", `len(1..99)`, codemode.Budgets{MemoryBudget: 100}, codemode.Budgets{MemoryBudget: 99}, codemode.BudgetMemory},
		{"source length", `1 + 2`, codemode.Budgets{MaxSourceLength: 5}, codemode.Budgets{MaxSourceLength: 4}, ""},
		{"nodes", `1 + 2`, codemode.Budgets{MaxNodes: 3}, codemode.Budgets{MaxNodes: 2}, ""},
		{"string length", `let a = "ab"; a + "cde"`, codemode.Budgets{MaxStringLength: 5}, codemode.Budgets{MaxStringLength: 4}, codemode.BudgetString},
		{"a repeated string", `repeat("é", 5)`, codemode.Budgets{MaxStringLength: 5}, codemode.Budgets{MaxStringLength: 4}, codemode.BudgetString},
		{"tool calls", three, codemode.Budgets{MaxToolCalls: 3}, codemode.Budgets{MaxToolCalls: 2}, codemode.BudgetToolCalls},
		{"result size", `"1234567890"`, codemode.Budgets{MaxResultBytes: 12}, codemode.Budgets{MaxResultBytes: 11}, codemode.BudgetResult},
		{"bytes built", `len(repeat("x", 1000))`, codemode.Budgets{MaxAllocBytes: 1016}, codemode.Budgets{MaxAllocBytes: 1015}, codemode.BudgetAlloc},
		{"bytes of a tool's result", `codemode.CallTool("math.add", {"a": 1, "b": 1}).result`, codemode.Budgets{MaxAllocBytes: 182}, codemode.Budgets{MaxAllocBytes: 181}, codemode.BudgetAlloc},
		{"a stream's size", `len(codemode.CallToolStream("local.ticks", {"n": 2}))`, codemode.Budgets{MaxResultBytes: 32}, codemode.Budgets{MaxResultBytes: 31}, codemode.BudgetResult},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := e.rt.Run(context.Background(), tt.code, codemode.RunOptions{Tools: allTools, Budgets: tt.at}); err != nil {
				t.Errorf("at the limit: got %v, want no error", err)
			}
			_, err := e.rt.Run(context.Background(), tt.code, codemode.RunOptions{Tools: allTools, Budgets: tt.past})
			want := codemode.BudgetExceeded
			if tt.budget == "" {
				want = codemode.GuardrailViolation
			}
			if ce := codeError(t, err); ce.Reason != want || ce.Budget != tt.budget {
				t.Errorf("one past: got %v (budget %q), want %s (budget %q)", err, ce.Budget, want, tt.budget)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// The default call budget: 64 calls run, the 65th is refused.
	for n, fails := range map[int]bool{codemode.DefaultMaxToolCalls: false, codemode.DefaultMaxToolCalls + 1: true} {
		_, err := e.rt.Run(context.Background(), strings.Replace(`len(map(1..N, codemode.CallTool("math.add", {"a": #, "b": 1})))`, "N", strconv.Itoa(n), 1), codemode.RunOptions{Tools: allTools})
		if (err != nil) != fails {
			t.Errorf("%d calls: got %v, want failure %v", n, err, fails)
		}
	}
	if _, err := e.rt.Run(context.Background(), `1`, codemode.RunOptions{Budgets: codemode.Budgets{MaxToolCalls: -1}}); err == nil {
		t.Error("a negative budget: got no error, want one")
	}
	if codemode.DefaultTimeout.Milliseconds() != 30_000 || codemode.ToolHandlerTimeout.Milliseconds() != 3_000 {
		t.Errorf("got timeouts %v and %v, want 30s and 3s", codemode.DefaultTimeout, codemode.ToolHandlerTimeout)
	}
}

// Strings built in a loop, each under the string limit, are counted
// against the run's byte budget as they are made: the run stops at it
// instead of building two gigabytes.
func TestAllocBudgetStopsBuiltStrings(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, err := e.rt.Run(context.Background(), `len(map(1..20000, repeat("x", 100000)))`, codemode.RunOptions{Tools: allTools})
	if ce := codeError(t, err); ce.Reason != codemode.BudgetExceeded || ce.Budget != codemode.BudgetAlloc {
		t.Fatalf("got %v (budget %q), want budget-exceeded (budget %q)", err, ce.Budget, codemode.BudgetAlloc)
	}
}
