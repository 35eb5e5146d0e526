package evaluator_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/exprd/exprd/evaluator"
	"github.com/exprd/exprd/evaluator/evaltest"
)

// TestMaxRunning: with one turn to run, a program that computes gives
// the turn to another after its slice (turns.Slice), long before
// it ends; a program waiting on a host function does not hold the turn.
func TestMaxRunning(t *testing.T) {
	t.Parallel()
	e, err := evaluator.New(evaluator.WithMaxRunning(1))
	if err != nil {
		t.Fatal(err)
	}
	b := evaluator.DefaultBudgets()
	b.Timeout = time.Minute // a loaded machine must not end the long program
	b.MaxIterations = 1 << 40
	started, release := make(chan struct{}), make(chan struct{})
	tool, err := evaluator.NewTool(evaluator.Settings{Read: true, Functions: []evaluator.Function{
		{Name: "start", Runner: evaluator.RunServer, Impl: func(context.Context, map[string]any) (any, error) {
			close(started)
			return 0, nil
		}},
		{Name: "hold", Runner: evaluator.RunServer, Impl: func(context.Context, map[string]any) (any, error) {
			close(started)
			<-release
			return 0, nil
		}},
	}}, b)
	if err != nil {
		t.Fatal(err)
	}
	runCtx := func(ctx context.Context, read string) evaluator.Answer {
		return e.Run(ctx, tool, evaluator.NewState(), readInput(read), evaltest.NewHost(nil))
	}
	run := func(read string) evaluator.Answer { return runCtx(context.Background(), read) }

	// The first program computes for a minute (10^9 iterations, unless
	// cancelled); the second, started while it does, runs once the
	// first's slice ends. Holding its turn to its end, the first kept
	// the second waiting the whole minute.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var first evaluator.Answer
	var wg sync.WaitGroup
	wg.Go(func() {
		first = runCtx(ctx, `let r = 1..1000; start({}) + count(r, count(r, count(r, # > 0) > 0) > 0)`)
	})
	<-started
	// A second program runs meanwhile, within 10 s.
	secondRuns := func(failure string) {
		t.Helper()
		second := make(chan evaluator.Answer, 1)
		go func() { second <- run(`1 + 1`) }()
		select {
		case a := <-second:
			if string(a.JSON()) != `{"value":2}` {
				t.Errorf("the second got %s", a.JSON())
			}
		case <-time.After(10 * time.Second):
			t.Fatal(failure)
		}
	}
	secondRuns("the second program waited 10 s for the first to give its turn")
	cancel()
	wg.Wait()
	if first.Err == nil || first.Err.Message != "the call was cancelled" {
		t.Fatalf("the first ended before it was cancelled (%s): the test proves nothing", first.JSON())
	}

	// A program waiting on a host function lets another run.
	started = make(chan struct{})
	wg.Go(func() { first = run(`hold({})`) })
	<-started
	secondRuns("a program waited for one that waits on a host function")
	close(release)
	wg.Wait()
}

func TestMaxRunningInvalid(t *testing.T) {
	t.Parallel()
	if _, err := evaluator.New(evaluator.WithMaxRunning(0)); err == nil {
		t.Fatal("WithMaxRunning(0): no error")
	}
}
