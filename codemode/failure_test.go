package codemode_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exprd/exprd/codemode"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/manual"
)

func TestToolErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		name, code, tool string
		reason           codemode.Reason
		line, column     int // the call's position
		sentinel         error
		outcome          codemode.Outcome
	}{
		{"the provider fails", `let x = 1;
codemode.CallTool("math.divide", {"a": 1, "b": 0})`, "math.divide", codemode.HostFunction, 2, 10, utcp.ErrTransport, codemode.OutcomeError},
		{"arguments the schema refuses", `codemode.CallTool("math.add", {"a": "two", "b": 3})`, "math.add", codemode.InvalidArguments, 1, 10, manual.ErrInvalidArguments, codemode.OutcomeError},
		{"a gRPC provider fails", `codemode.CallTool("catalog.get", {"id": "nope"})`, "catalog.get", codemode.HostFunction, 1, 10, utcp.ErrTransport, codemode.OutcomeError},
		{"a broken stream", `codemode.CallToolStream("local.broken", {})`, "local.broken", codemode.HostFunction, 1, 10, utcp.ErrTransport, codemode.OutcomeError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var chunks int
			res, err := e.rt.Run(context.Background(), tt.code, codemode.RunOptions{Tools: allTools, OnChunk: func(string, any) { chunks++ }})
			ce := codeError(t, err)
			if ce.Reason != tt.reason || ce.Tool != tt.tool || !strings.Contains(ce.Message, tt.tool) || ce.Line != tt.line || ce.Column != tt.column {
				t.Errorf("got %s on %q at %d:%d (%s), want %s on %s at %d:%d", ce.Reason, ce.Tool, ce.Line, ce.Column, ce.Message, tt.reason, tt.tool, tt.line, tt.column)
			}
			if !errors.Is(err, tt.sentinel) {
				t.Errorf("got %v, want it to match %v", err, tt.sentinel)
			}
			if len(res.Trace) != 1 || res.Trace[0].Outcome != tt.outcome || res.Trace[0].Error == "" {
				t.Errorf("got trace %+v, want one call with outcome %s", res.Trace, tt.outcome)
			}
			if tt.tool == "local.broken" && chunks != 1 {
				t.Errorf("got %d chunks before the break, want 1", chunks)
			}
		})
	}
}

// On timeout the in-flight call is cancelled (the provider sees it) and
// the run stops.
func TestTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	start := time.Now()
	res, err := e.rt.Run(context.Background(), `codemode.CallTool("local.slow", {})`, codemode.RunOptions{
		Tools: allTools, Budgets: codemode.Budgets{Timeout: 200 * time.Millisecond},
	})
	ce := codeError(t, err)
	if ce.Reason != codemode.BudgetExceeded || ce.Budget != codemode.BudgetTime || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v, want budget-exceeded (time)", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the run took %v, want about 200ms", d)
	}
	waitFor(t, e.local.cancelled, "the provider to see the cancel")
	if len(res.Trace) != 1 || res.Trace[0].Outcome != codemode.OutcomeTimeout || res.Cancelled {
		t.Errorf("got trace %+v (cancelled %v), want one call timed out", res.Trace, res.Cancelled)
	}
}

// A loop with no tool call stops at the deadline too: the counter checks
// the context.
func TestTimeoutOfALoop(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	start := time.Now()
	_, err := e.rt.Run(context.Background(), `sum(map(1..100000, sum(map(1..100000, #))))`, codemode.RunOptions{
		Budgets: codemode.Budgets{Timeout: 50 * time.Millisecond, MaxIterations: 1 << 40, MemoryBudget: 1 << 40},
	})
	if ce := codeError(t, err); ce.Budget != codemode.BudgetTime {
		t.Errorf("got %v, want budget-exceeded (time)", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("the run took %v, want about 50ms", d)
	}
}

func TestCancelMidCall(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-e.local.started
		cancel()
	}()
	res, err := e.rt.Run(ctx, `let a = codemode.CallTool("math.add", {"a": 1, "b": 2}); codemode.CallTool("local.slow", a)`, codemode.RunOptions{Tools: allTools})
	if !errors.Is(err, context.Canceled) || !res.Cancelled {
		t.Fatalf("got %v (cancelled %v), want the run cancelled", err, res.Cancelled)
	}
	waitFor(t, e.local.cancelled, "the provider to see the cancel")
	if len(res.Trace) != 2 || res.Trace[0].Outcome != codemode.OutcomeOK || res.Trace[1].Outcome != codemode.OutcomeCancelled {
		t.Errorf("got trace %+v, want ok then cancelled", res.Trace)
	}
}

func TestApproval(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	code := `let s = codemode.CallTool("math.add", {"a": 1, "b": 2}); codemode.CallTool("math.multiply", {"a": s.result, "b": 10})`
	var mu sync.Mutex
	var asked []string
	approve := func(answer bool) func(context.Context, string, map[string]any) (bool, error) {
		return func(_ context.Context, tool string, args map[string]any) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, tool)
			if args["a"] != 3.0 {
				t.Errorf("got args %v, want a = 3", args)
			}
			return answer, nil
		}
	}
	opts := codemode.RunOptions{Tools: allTools, NeedsApproval: []string{"math.multiply"}, Approve: approve(true)}
	res, err := e.rt.Run(context.Background(), code, opts)
	if err != nil || string(res.ValueJSON) != `{"result":30}` {
		t.Fatalf("approved: got %s, %v, want {\"result\":30}", res.ValueJSON, err)
	}
	opts.Approve = approve(false)
	res, err = e.rt.Run(context.Background(), code, opts)
	ce := codeError(t, err)
	if ce.Reason != codemode.HostFunction || ce.Tool != "math.multiply" || !strings.Contains(ce.Message, "rejected") {
		t.Errorf("rejected: got %v, want host-function on math.multiply", err)
	}
	if len(res.Trace) != 2 || res.Trace[1].Outcome != codemode.OutcomeRejected {
		t.Errorf("rejected: got trace %+v, want the second call rejected", res.Trace)
	}
	opts.Approve = nil
	if _, err := e.rt.Run(context.Background(), code, opts); err == nil {
		t.Error("no approver: got no error, want the call rejected")
	}
	if len(asked) != 2 || asked[0] != "math.multiply" {
		t.Errorf("asked for %v, want math.multiply twice", asked)
	}
	// An approver's error wrapping ErrRejected rejects with its reason.
	opts.Approve = func(context.Context, string, map[string]any) (bool, error) {
		return false, fmt.Errorf("%w: nobody is left to ask", codemode.ErrRejected)
	}
	res, err = e.rt.Run(context.Background(), code, opts)
	want := `tool "math.multiply": the call was rejected: nobody is left to ask`
	if ce := codeError(t, err); ce.Reason != codemode.HostFunction || !strings.HasPrefix(ce.Message, want) {
		t.Errorf("rejected with a reason: got %v, want host-function %q", err, want)
	}
	if len(res.Trace) != 2 || res.Trace[1].Outcome != codemode.OutcomeRejected || res.Trace[1].Error != "the call was rejected: nobody is left to ask" {
		t.Errorf("rejected with a reason: got trace %+v, want the second call rejected with the reason", res.Trace)
	}
}

func TestEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var got []string
	res, err := e.rt.Run(context.Background(), `let n = codemode.CallTool("math.add", {"a": 1, "b": 1}).result; codemode.CallToolStream("local.ticks", {"n": n + 1})`, codemode.RunOptions{
		Tools: allTools,
		OnEvent: func(ev codemode.Event) {
			got = append(got, map[codemode.EventKind]string{codemode.EventToolStart: "start", codemode.EventToolEnd: "end", codemode.EventChunk: "chunk"}[ev.Kind]+" "+ev.Call.Tool)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "start math.add,end math.add,start local.ticks,chunk local.ticks,chunk local.ticks,chunk local.ticks,end local.ticks"
	if strings.Join(got, ",") != want {
		t.Errorf("got events %v, want %s", got, want)
	}
	if c := res.Trace[1]; c.Tool != "local.ticks" || !c.Stream || c.Chunks != 3 || string(c.ArgsJSON()) != `{"n":3}` || c.Outcome != codemode.OutcomeOK || c.Duration <= 0 {
		t.Errorf("got trace entry %+v, want local.ticks streamed 3 chunks", c)
	}
}
