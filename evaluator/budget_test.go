package evaluator_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/exprd/exprd/evaluator"
	"github.com/exprd/exprd/evaluator/evaltest"
)

func TestBudgetsLower(t *testing.T) {
	t.Parallel()
	d := evaluator.DefaultBudgets()
	// Each field: set raises it by one, lower lowers it by one, get reads it.
	fields := []struct {
		name       string
		raise, low func(*evaluator.Budgets)
		get        func(evaluator.Budgets) int64
	}{
		{"timeout", func(b *evaluator.Budgets) { b.Timeout = d.Timeout + 1 }, func(b *evaluator.Budgets) { b.Timeout = d.Timeout - 1 }, func(b evaluator.Budgets) int64 { return int64(b.Timeout) }},
		{"max_iterations", func(b *evaluator.Budgets) { b.MaxIterations = d.MaxIterations + 1 }, func(b *evaluator.Budgets) { b.MaxIterations = d.MaxIterations - 1 }, func(b evaluator.Budgets) int64 { return int64(b.MaxIterations) }},
		{"memory_budget", func(b *evaluator.Budgets) { b.MemoryBudget = d.MemoryBudget + 1 }, func(b *evaluator.Budgets) { b.MemoryBudget = d.MemoryBudget - 1 }, func(b evaluator.Budgets) int64 { return int64(b.MemoryBudget) }},
		{"max_source_length", func(b *evaluator.Budgets) { b.MaxSourceLength = d.MaxSourceLength + 1 }, func(b *evaluator.Budgets) { b.MaxSourceLength = d.MaxSourceLength - 1 }, func(b evaluator.Budgets) int64 { return int64(b.MaxSourceLength) }},
		{"max_nodes", func(b *evaluator.Budgets) { b.MaxNodes = d.MaxNodes + 1 }, func(b *evaluator.Budgets) { b.MaxNodes = d.MaxNodes - 1 }, func(b evaluator.Budgets) int64 { return int64(b.MaxNodes) }},
		{"max_string_length", func(b *evaluator.Budgets) { b.MaxStringLength = d.MaxStringLength + 1 }, func(b *evaluator.Budgets) { b.MaxStringLength = d.MaxStringLength - 1 }, func(b evaluator.Budgets) int64 { return int64(b.MaxStringLength) }},
		{"max_array_length", func(b *evaluator.Budgets) { b.MaxArrayLength = d.MaxArrayLength + 1 }, func(b *evaluator.Budgets) { b.MaxArrayLength = d.MaxArrayLength - 1 }, func(b evaluator.Budgets) int64 { return int64(b.MaxArrayLength) }},
		{"max_read_chars", func(b *evaluator.Budgets) { b.MaxReadChars = d.MaxReadChars + 1 }, func(b *evaluator.Budgets) { b.MaxReadChars = d.MaxReadChars - 1 }, func(b evaluator.Budgets) int64 { return int64(b.MaxReadChars) }},
		{"function_timeout", func(b *evaluator.Budgets) { b.FunctionTimeout = d.FunctionTimeout + 1 }, func(b *evaluator.Budgets) { b.FunctionTimeout = d.FunctionTimeout - 1 }, func(b evaluator.Budgets) int64 { return int64(b.FunctionTimeout) }},
		{"max_steps", func(b *evaluator.Budgets) { b.MaxSteps = d.MaxSteps + 1 }, func(b *evaluator.Budgets) { b.MaxSteps = d.MaxSteps - 1 }, func(b evaluator.Budgets) int64 { return int64(b.MaxSteps) }},
	}
	for _, f := range fields {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			var up evaluator.Budgets
			f.raise(&up)
			if _, err := d.Lower(up); err == nil || !strings.Contains(err.Error(), f.name) {
				t.Errorf("Lower(%s = max+1): got error %v, want one naming %s", f.name, err, f.name)
			}
			var down evaluator.Budgets
			f.low(&down)
			got, err := d.Lower(down)
			if err != nil {
				t.Fatalf("Lower(%s = max-1): got error %v, want none", f.name, err)
			}
			if g, w := f.get(got), f.get(d)-1; g != w {
				t.Errorf("Lower(%s = max-1): got %d, want %d", f.name, g, w)
			}
			// Lowering one field leaves the others at the maximum.
			want := d
			f.low(&want)
			if got != want {
				t.Errorf("Lower(%s = max-1): got %+v, want %+v", f.name, got, want)
			}
		})
	}
	t.Run("the maxima themselves are allowed", func(t *testing.T) {
		t.Parallel()
		if got, err := d.Lower(d); err != nil || got != d {
			t.Errorf("Lower(the maxima): got %+v, %v, want %+v, nil", got, err, d)
		}
	})
	t.Run("zero keeps every maximum", func(t *testing.T) {
		t.Parallel()
		got, err := d.Lower(evaluator.Budgets{})
		if err != nil || got != d {
			t.Errorf("Lower(zero): got %+v, %v, want %+v, nil", got, err, d)
		}
	})
	t.Run("negative is refused", func(t *testing.T) {
		t.Parallel()
		for _, b := range []evaluator.Budgets{{Timeout: -1}, {MaxNodes: -1}, {MaxSteps: -1}, {FunctionTimeout: -time.Second}} {
			if _, err := d.Lower(b); err == nil {
				t.Errorf("Lower(%+v): got no error, want one", b)
			}
		}
	})
	t.Run("a lowered budget cannot be raised again", func(t *testing.T) {
		t.Parallel()
		low, err := d.Lower(evaluator.Budgets{MaxSteps: 5})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := low.Lower(evaluator.Budgets{MaxSteps: 6}); err == nil {
			t.Errorf("Lower(max_steps 6) of max_steps 5: got no error, want one")
		}
	})
}

// TestMemoryBudgetBoundsAllocation checks that the memory budget bounds
// what an expression allocates, not only what expr counts: expr's repeat
// builds its string before it charges the budget, so
// repeat(repeat("a", 999999), 999999) would ask for a terabyte, and string
// concatenation and replace are never charged.
func TestMemoryBudgetBoundsAllocation(t *testing.T) {
	// Not parallel: it measures the process's allocations.
	const limit = 16 << 20
	e, err := evaluator.New()
	if err != nil {
		t.Fatal(err)
	}
	tool, err := evaluator.NewTool(evaluator.Settings{Read: true}, evaluator.DefaultBudgets())
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{
		`len(repeat(repeat("a", 1000), 100000))`,
		`let a = repeat("x", 999999); let b = a + a; let c = b + b; let d = c + c; let f = d + d; len(f + f)`,
		`let a = repeat("x", 5000); len(replace(a, "x", a))`,
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		a := e.Run(context.Background(), tool, evaluator.NewState(), readInput(src), evaltest.NewHost(nil))
		runtime.ReadMemStats(&after)
		if n := after.TotalAlloc - before.TotalAlloc; n > limit {
			t.Errorf("%s: got %d MiB allocated (answer %s), want at most %d MiB under a memory budget of %d",
				src, n>>20, a.JSON(), limit>>20, evaluator.DefaultMemoryBudget)
		}
	}
}

// TestReadLimitBoundsWork checks that deciding a read is over the 8,000
// characters costs about that much, not the whole value's JSON: an array
// holding one subtree twice, nested k times, is 2^k copies of it as JSON
// while costing expr only 2k items.
func TestReadLimitBoundsWork(t *testing.T) {
	// Not parallel: it measures the process's allocations.
	const levels, limit = 12, 4 << 20
	e := newEvaluator(t)
	tool := newTool(t, evaluator.Settings{Read: true})
	st := newState(t, string(productsState(t)))
	var src strings.Builder
	src.WriteString("let v0 = [scopes.root, scopes.root]; ")
	for i := 1; i < levels; i++ {
		fmt.Fprintf(&src, "let v%d = [v%d, v%d]; ", i, i-1, i-1)
	}
	fmt.Fprintf(&src, "v%d", levels-1)

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	a := e.Run(context.Background(), tool, st, readInput(src.String()), evaltest.NewHost(nil))
	runtime.ReadMemStats(&after)
	if a.Reason() != evaluator.BudgetExceeded {
		t.Errorf("read of %d levels: got %.200s, want budget-exceeded", levels, a.JSON())
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > limit {
		t.Errorf("read of %d levels: got %d MiB allocated to refuse it, want at most %d MiB for a limit of %d characters",
			levels, n>>20, limit>>20, evaluator.DefaultMaxReadChars)
	}
}
