package evaluator_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/exprd/exprd/evaluator"
	"github.com/exprd/exprd/evaluator/evaltest"
)

// TestMaxRunning: with one turn to run, a program waits while another
// runs, and runs when the other stops running (here: calls a host
// function); a program waiting on a host function does not hold the turn.
func TestMaxRunning(t *testing.T) {
	t.Parallel()
	e, err := evaluator.New(evaluator.WithMaxRunning(1))
	if err != nil {
		t.Fatal(err)
	}
	b := evaluator.DefaultBudgets()
	b.Timeout = time.Minute // a loaded machine must not end the long program
	var mu sync.Mutex
	var events []string
	note := func(what string) evaluator.Func {
		return func(context.Context, map[string]any) (any, error) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, what)
			return 0, nil
		}
	}
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
		{Name: "done", Runner: evaluator.RunServer, Impl: note("the first stopped running")},
		{Name: "mark", Runner: evaluator.RunServer, Impl: note("the second ran")},
	}}, b)
	if err != nil {
		t.Fatal(err)
	}
	run := func(read string) evaluator.Answer {
		return e.Run(context.Background(), tool, evaluator.NewState(), readInput(read), evaltest.NewHost(nil))
	}

	// The first program runs for a while between two host functions; the
	// second starts while it runs.
	var first evaluator.Answer
	var wg sync.WaitGroup
	wg.Go(func() { first = run(`start({}) + len(filter(1..300000, # > 0)) + done({})`) })
	<-started
	second := run(`mark({})`)
	wg.Wait()
	if first.Err != nil || second.Err != nil {
		t.Fatalf("answers: %s, %s", first.JSON(), second.JSON())
	}
	if want := []string{"the first stopped running", "the second ran"}; len(events) != 2 || events[0] != want[0] {
		t.Fatalf("events %q, want %q: the second ran while the first did", events, want)
	}

	// A program waiting on a host function lets another run.
	started = make(chan struct{})
	wg.Go(func() { first = run(`hold({})`) })
	<-started
	done := make(chan evaluator.Answer, 1)
	go func() { done <- run(`1 + 1`) }()
	select {
	case a := <-done:
		if string(a.JSON()) != `{"value":2}` {
			t.Errorf("got %s", a.JSON())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a program waited for one that waits on a host function")
	}
	close(release)
	wg.Wait()
}

func TestMaxRunningInvalid(t *testing.T) {
	t.Parallel()
	if _, err := evaluator.New(evaluator.WithMaxRunning(0)); err == nil {
		t.Fatal("WithMaxRunning(0): no error")
	}
}
