package evaluator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync/atomic"
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

// TestBudgetsLowerMessages checks that a refused budget is named as the
// proto's Budgets field and given in that field's unit, not in nanoseconds.
func TestBudgetsLowerMessages(t *testing.T) {
	t.Parallel()
	d := evaluator.DefaultBudgets()
	for _, tt := range []struct {
		name string
		in   evaluator.Budgets
		want string
	}{
		{"timeout in ms", evaluator.Budgets{Timeout: time.Second}, "budget timeout_ms: 1000 ms is above the server's maximum of 100 ms"},
		{"timeout one ms past", evaluator.Budgets{Timeout: d.Timeout + time.Millisecond}, "budget timeout_ms: 101 ms is above the server's maximum of 100 ms"},
		{"timeout with a fraction of a ms", evaluator.Budgets{Timeout: d.Timeout + time.Microsecond}, "budget timeout_ms: 100.001 ms is above the server's maximum of 100 ms"},
		{"function timeout in ms", evaluator.Budgets{FunctionTimeout: d.FunctionTimeout + time.Millisecond}, "budget function_timeout_ms: 10001 ms is above the server's maximum of 10000 ms"},
		{"iterations", evaluator.Budgets{MaxIterations: d.MaxIterations + 1}, "budget max_iterations: 1000001 iterations is above the server's maximum of 1000000 iterations"},
		{"iterations past int64", evaluator.Budgets{MaxIterations: math.MaxUint64}, "budget max_iterations: 18446744073709551615 iterations is above the server's maximum of 1000000 iterations"},
		{"memory in expr's units", evaluator.Budgets{MemoryBudget: d.MemoryBudget + 1}, "budget memory_budget: 1000001 is above the server's maximum of 1000000"},
		{"memory past int64", evaluator.Budgets{MemoryBudget: 1 << 63}, "budget memory_budget: 9223372036854775808 is above the server's maximum of 1000000"},
		{"source length", evaluator.Budgets{MaxSourceLength: d.MaxSourceLength + 1}, "budget max_source_length: 8001 characters is above the server's maximum of 8000 characters"},
		{"nodes", evaluator.Budgets{MaxNodes: d.MaxNodes + 1}, "budget max_nodes: 2001 nodes is above the server's maximum of 2000 nodes"},
		{"string length", evaluator.Budgets{MaxStringLength: d.MaxStringLength + 1}, "budget max_string_length: 100001 characters is above the server's maximum of 100000 characters"},
		{"array length", evaluator.Budgets{MaxArrayLength: d.MaxArrayLength + 1}, "budget max_array_length: 100001 items is above the server's maximum of 100000 items"},
		{"read chars", evaluator.Budgets{MaxReadChars: d.MaxReadChars + 1}, "budget max_read_chars: 8001 characters is above the server's maximum of 8000 characters"},
		{"steps", evaluator.Budgets{MaxSteps: d.MaxSteps + 1}, "budget max_steps: 51 steps is above the server's maximum of 50 steps"},
		{"value bytes", evaluator.Budgets{MaxValueBytes: d.MaxValueBytes + 1}, "budget max_value_bytes: 8388609 bytes is above the server's maximum of 8388608 bytes"},
		{"negative", evaluator.Budgets{MaxSteps: -1}, "budget max_steps: -1 steps, want a positive value (0 keeps the server's maximum of 50 steps)"},
		{"negative duration", evaluator.Budgets{Timeout: -time.Millisecond}, "budget timeout_ms: -1 ms, want a positive value (0 keeps the server's maximum of 100 ms)"},
		{"the first refused field in proto order", evaluator.Budgets{MaxSteps: 51, Timeout: time.Second}, "budget timeout_ms: 1000 ms is above the server's maximum of 100 ms"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := d.Lower(tt.in)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("Lower(%+v): got error %v, want %q", tt.in, err, tt.want)
			}
			if got != d {
				t.Errorf("Lower(%+v) refused: got budgets %+v, want the maxima unchanged", tt.in, got)
			}
		})
	}
}

func TestBudgetsValidateMessages(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		set  func(*evaluator.Budgets)
		want string
	}{
		{"zero timeout", func(b *evaluator.Budgets) { b.Timeout = 0 }, "budget timeout_ms: 0 ms, want a positive value"},
		{"negative function timeout", func(b *evaluator.Budgets) { b.FunctionTimeout = -time.Second }, "budget function_timeout_ms: -1000 ms, want a positive value"},
		{"zero iterations", func(b *evaluator.Budgets) { b.MaxIterations = 0 }, "budget max_iterations: 0 iterations, want a positive value"},
		{"zero value bytes", func(b *evaluator.Budgets) { b.MaxValueBytes = 0 }, "budget max_value_bytes: 0 bytes, want a positive value"},
		{"zero alloc bytes", func(b *evaluator.Budgets) { b.MaxAllocBytes = 0 }, "budget max_alloc_bytes: 0 bytes, want a positive value"},
		{"zero function calls", func(b *evaluator.Budgets) { b.MaxFunctionCalls = 0 }, "budget max_function_calls: 0 calls, want a positive value"},
		{"the smallest positive values pass", func(b *evaluator.Budgets) {
			*b = evaluator.Budgets{Timeout: 1, MaxIterations: 1, MemoryBudget: 1, MaxSourceLength: 1, MaxNodes: 1, MaxStringLength: 1,
				MaxArrayLength: 1, MaxReadChars: 1, FunctionTimeout: 1, MaxSteps: 1, MaxValueBytes: 1, MaxAllocBytes: 1, MaxFunctionCalls: 1}
		}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := evaluator.DefaultBudgets()
			tt.set(&b)
			err := b.Validate()
			if got := fmt.Sprint(err); (tt.want == "" && err != nil) || (tt.want != "" && got != tt.want) {
				t.Errorf("Validate(): got %v, want %q", err, tt.want)
			}
		})
	}
}

// waitHost runs the client-run function wait: it answers after args.ms
// milliseconds, or fails when its context ends first.
type waitHost struct{ *evaltest.Host }

func (h waitHost) CallClient(ctx context.Context, _ string, args map[string]any) (any, error) {
	return wait(ctx, args)
}

func wait(ctx context.Context, args map[string]any) (any, error) {
	ms, _ := args["ms"].(float64)
	select {
	case <-time.After(time.Duration(ms) * time.Millisecond):
		return "done", nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestFunctionTimeoutAppliesToEveryRunner pins what docs/exprtool.md says
// (and the proto once said only of client-run functions): the time
// budget is paused while any host function runs, and function_timeout_ms
// bounds each one, whoever runs it. UTCP functions are server-run ones
// whose Impl calls the registry.
func TestFunctionTimeoutAppliesToEveryRunner(t *testing.T) {
	t.Parallel()
	const timeout, functionTimeout = 20 * time.Millisecond, 200 * time.Millisecond
	b, err := evaluator.DefaultBudgets().Lower(evaluator.Budgets{Timeout: timeout, FunctionTimeout: functionTimeout})
	if err != nil {
		t.Fatal(err)
	}
	schema := json.RawMessage(`{"type":"object","required":["ms"],"properties":{"ms":{"type":"number"}}}`)
	for _, runner := range []struct {
		name string
		fn   evaluator.Function
	}{
		{"client-run", evaluator.Function{Name: "wait", InputSchema: schema, Runner: evaluator.RunClient}},
		{"server-run", evaluator.Function{Name: "wait", InputSchema: schema, Runner: evaluator.RunServer, Impl: wait}},
	} {
		for _, tt := range []struct {
			name, read, want string
			reason           evaluator.Reason
		}{
			{"a wait past the time budget is not counted", `wait({ms: 60})`, `{"value":"done"}`, ""},
			{"a wait past function_timeout is host-function", `wait({ms: 2000})`, "timed out after 200ms", evaluator.HostFunction},
		} {
			t.Run(runner.name+": "+tt.name, func(t *testing.T) {
				t.Parallel()
				tool, err := evaluator.NewTool(evaluator.Settings{Read: true, Functions: []evaluator.Function{runner.fn}}, b)
				if err != nil {
					t.Fatal(err)
				}
				a := newEvaluator(t).Run(context.Background(), tool, evaluator.NewState(), readInput(tt.read), waitHost{evaltest.NewHost(nil)})
				if a.Reason() != tt.reason || !strings.Contains(string(a.JSON()), tt.want) {
					t.Errorf("%s (time budget %v, function_timeout %v): got %s, want reason %q and %q", tt.read, timeout, functionTimeout, a.JSON(), tt.reason, tt.want)
				}
			})
		}
	}
}

// clockHost is a host whose client-run functions move the clock on by
// an hour, and answer.
type clockHost struct {
	*evaltest.Host
	advance func()
}

func (h clockHost) CallClient(context.Context, string, map[string]any) (any, error) {
	h.advance()
	return "done", nil
}

// TestTimeBudgetCountsEvaluationOnly: the time budget reads the tool's
// clock while the expression evaluates, and not while a host function
// runs, whoever runs it. The clock moves only when the test moves it.
func TestTimeBudgetCountsEvaluationOnly(t *testing.T) {
	t.Parallel()
	start := time.Date(2025, time.January, 1, 0, 0, 0, 0, time.UTC)
	for name, runner := range map[string]evaluator.Runner{"an hour in a client-run function": evaluator.RunClient, "an hour in a server-run function": evaluator.RunServer} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var hours atomic.Int64
			advance := func() { hours.Add(1) }
			later := evaluator.Function{Name: "later", Runner: runner}
			if runner == evaluator.RunServer {
				later.Impl = func(context.Context, map[string]any) (any, error) { advance(); return "done", nil }
			}
			tool := newTool(t, evaluator.Settings{Read: true, Functions: []evaluator.Function{later}},
				evaluator.WithClock(func() time.Time { return start.Add(time.Duration(hours.Load()) * time.Hour) }))
			h := clockHost{evaltest.NewHost(nil), advance}
			if a := newEvaluator(t).Run(context.Background(), tool, evaluator.NewState(), readInput(`later({})`), h); string(a.JSON()) != `{"value":"done"}` {
				t.Errorf("got %s, want {\"value\":\"done\"}", a.JSON())
			}
		})
	}
	t.Run("an hour of evaluation", func(t *testing.T) {
		t.Parallel()
		var reads atomic.Int64
		tool := newTool(t, evaluator.Settings{Read: true},
			evaluator.WithClock(func() time.Time { return start.Add(time.Duration(reads.Add(1)) * time.Hour) }))
		a := newEvaluator(t).Run(context.Background(), tool, evaluator.NewState(), readInput(`1`), evaltest.NewHost(nil))
		if a.Err == nil || a.Err.Budget != evaluator.BudgetTime {
			t.Errorf("got %s, want budget-exceeded (time)", a.JSON())
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
