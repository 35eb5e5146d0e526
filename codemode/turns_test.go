package codemode_test

import (
	"context"
	"testing"
	"time"

	"github.com/exprd/exprd/codemode"
	"github.com/exprd/exprd/internal/turns"
	"github.com/exprd/exprd/membudget"
)

// With turns (codemode.WithTurns), a run's program takes one to compute
// and gives it back while a tool call runs: with one turn, a run waiting
// on a slow tool does not keep another from computing; a run that cannot
// get a turn waits for one within its time budget, and runs once it is
// given back.
func TestRunsTakeTurns(t *testing.T) {
	e := newEnv(t)
	tr := turns.NewTurns(1)
	rt, err := codemode.New(e.reg, codemode.WithTurns(tr))
	if err != nil {
		t.Fatal(err)
	}
	alice := membudget.WithCaller(context.Background(), "alice")
	bob := membudget.WithCaller(context.Background(), "bob")

	// alice's run waits on a slow tool, holding no turn.
	slowCtx, stopSlow := context.WithCancel(alice)
	slowDone := make(chan error, 1)
	go func() {
		_, err := rt.Run(slowCtx, `codemode.CallTool("local.slow", {})`, codemode.RunOptions{Tools: allTools})
		slowDone <- err
	}()
	waitFor(t, e.local.started, "the slow call")
	res, err := rt.Run(bob, `1 + 2`, codemode.RunOptions{})
	if err != nil || string(res.ValueJSON) != "3" {
		t.Fatalf("bob's run while alice's waits on a tool: %s, %v", res.ValueJSON, err)
	}
	stopSlow()
	<-slowDone

	// The one turn held elsewhere: bob's run waits for it, to the end of
	// its time budget, then runs once it is given back.
	if err := tr.Acquire(context.Background(), "carol"); err != nil {
		t.Fatal(err)
	}
	_, err = rt.Run(bob, `1 + 2`, codemode.RunOptions{Budgets: codemode.Budgets{Timeout: 50 * time.Millisecond}})
	if e := codeError(t, err); e.Reason != codemode.BudgetExceeded || e.Budget != codemode.BudgetTime {
		t.Fatalf("a run with no turn to take: %v, want over its time budget", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := rt.Run(bob, `1 + 2`, codemode.RunOptions{})
		done <- err
	}()
	tr.Release("carol", time.Millisecond)
	if err := <-done; err != nil {
		t.Fatalf("once the turn was given back: %v", err)
	}
}

// A run computes on one turn for codemode.TurnSlice at most: with one
// turn, a run whose program computes for seconds gives it to another
// caller that waits, before it ends.
func TestRunsYieldTheirTurnAfterASlice(t *testing.T) {
	e := newEnv(t)
	tr := turns.NewTurns(1)
	rt, err := codemode.New(e.reg, codemode.WithTurns(tr))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(membudget.WithCaller(context.Background(), "alice"))
	defer cancel()
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		// Each iteration a costly match: seconds in all.
		_, _ = rt.Run(ctx, `let s = repeat("a", 50000); all(1..1000, !(s matches "(.*a){30}b"))`, codemode.RunOptions{})
	}()
	time.Sleep(200 * time.Millisecond) // let it take the turn
	if err := tr.Acquire(context.Background(), "bob"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
		t.Fatal("the long run ended before it gave its turn to another caller")
	default:
	}
	tr.Release("bob", time.Millisecond)
	cancel()
	<-ended
}
