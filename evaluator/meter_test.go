package evaluator_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/exprd/exprd/evaluator"
	"github.com/exprd/exprd/evaluator/evaltest"
)

// The byte meter against the runtime: for every case of
// testdata/calls.json, run alone with its program compiled, what the Go
// runtime allocated during the call is within meterFactor of what the
// meter counted, plus meterSlack for what every call allocates whatever
// its programs do (the answer, the writes' JSON, the VM's stack). A
// program that could allocate past its count, by an operation the meter
// does not see, fails here. Not parallel: the runtime's counter is the
// whole process's.
func TestMeterHoldsToTheRuntime(t *testing.T) {
	const (
		meterFactor = 4
		meterSlack  = 64 << 10
	)
	e := newEvaluator(t)
	worst := 0.0
	for _, c := range loadCases(t) {
		if c.Limits.FunctionTimeoutMS > 0 || c.Limits.TimeoutMS > 0 {
			continue // a case that waits out a timeout, or is cut short by one
		}
		tool, err := evaluator.NewTool(c.Settings(), c.Budgets())
		if err != nil {
			continue // a case of a settings error
		}
		run := func() (evaluator.Answer, uint64) {
			st := evaluator.NewState()
			if err := st.Replace(c.StateJSON()); err != nil {
				t.Fatalf("%s: state: %v", c.Name, err)
			}
			h := evaltest.NewHost(c.Confirm)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			a := e.Run(context.Background(), tool, st, c.InputJSON(), h)
			runtime.ReadMemStats(&after)
			return a, after.TotalAlloc - before.TotalAlloc
		}
		run() // compiles the programs
		a, got := run()
		if float64(got) > float64(meterFactor*a.Allocated+meterSlack) {
			t.Errorf("%s: the runtime allocated %d bytes, the meter counted %d: over %d× + %d", c.Name, got, a.Allocated, meterFactor, meterSlack)
		}
		if a.Allocated > 0 {
			worst = max(worst, float64(got)/float64(a.Allocated))
		}
		if testing.Verbose() {
			t.Logf("%s: runtime %d, meter %d", c.Name, got, a.Allocated)
		}
	}
	t.Logf("the largest ratio of the runtime's bytes to the meter's: %.2f", worst)
}

// An iteration that costs a lot (a match near MaxMatchCost takes tens of
// milliseconds) stops the call at the next iteration once the time budget
// has passed, not after TickCheckEvery of them: the alarm rings the tick.
// The bound asserted is the budget and four iterations, each timed alone
// first on the same machine (so that a loaded machine, or -race, which
// makes a match several times slower, cannot fail it), and at least
// twenty times the budget; without the alarm the call runs for about a
// minute.
func TestTimeBudgetHoldsForCostlyIterations(t *testing.T) {
	e := newEvaluator(t)
	tool, err := evaluator.NewTool(evaluator.Settings{Read: true}, evaluator.DefaultBudgets())
	if err != nil {
		t.Fatal(err)
	}
	st := evaluator.NewState()
	if err := st.Replace([]byte(`{"s": "` + strings.Repeat("a", 50_000) + `"}`)); err != nil {
		t.Fatal(err)
	}
	long := evaluator.DefaultBudgets()
	long.Timeout = time.Minute
	one, err := evaluator.NewTool(evaluator.Settings{Read: true}, long)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if a := e.Run(context.Background(), one, st, []byte(`{"read": "scopes.root.s matches \"(.*a){30}b\""}`), evaltest.NewHost(nil)); a.Err != nil {
		t.Fatalf("one iteration alone: %s", a.JSON())
	}
	iteration := time.Since(t0)
	start := time.Now()
	a := e.Run(context.Background(), tool, st, []byte(`{"read": "all(1..2000, !(scopes.root.s matches \"(.*a){30}b\"))"}`), evaltest.NewHost(nil))
	took := time.Since(start)
	if a.Err == nil || a.Err.Budget != evaluator.BudgetTime {
		t.Fatalf("got %s, want budget-exceeded (time)", a.JSON())
	}
	if limit := max(20*evaluator.DefaultTimeout, evaluator.DefaultTimeout+4*iteration); took > limit {
		t.Errorf("the call took %v, want it stopped within %v of its budget of %v (an iteration alone: %v)", took, limit, evaluator.DefaultTimeout, iteration)
	}
	t.Logf("stopped after %v (budget %v, an iteration alone %v)", took, evaluator.DefaultTimeout, iteration)
}
