package evaluator_test

import (
	"context"
	"testing"

	"github.com/exprd/exprd/evaluator"
	"github.com/exprd/exprd/evaluator/evaltest"
)

func TestCompileCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	run := func(e *evaluator.Evaluator, tool *evaluator.Tool, src string) {
		t.Helper()
		e.Run(ctx, tool, evaluator.NewState(), readInput(src), evaltest.NewHost(nil))
	}
	want := func(e *evaluator.Evaluator, hits, misses uint64, n int) {
		t.Helper()
		if got, w := e.CacheStats(), (evaluator.CacheStats{Hits: hits, Misses: misses, Len: n}); got != w {
			t.Errorf("CacheStats: got %+v, want %+v", got, w)
		}
	}
	plain := evaluator.Settings{Read: true}
	withEcho := evaluator.Settings{Read: true, Functions: catalogue("echo")}

	t.Run("hit and miss", func(t *testing.T) {
		t.Parallel()
		e := newEvaluator(t)
		tool := newTool(t, plain)
		run(e, tool, "1 + 1")
		want(e, 0, 1, 1)
		run(e, tool, "1 + 1")
		want(e, 1, 1, 1)
		run(e, tool, "1 + 2")
		want(e, 1, 2, 2)
	})
	t.Run("a tool with the same functions shares programs", func(t *testing.T) {
		t.Parallel()
		e := newEvaluator(t)
		run(e, newTool(t, withEcho), "echo({})")
		run(e, newTool(t, withEcho), "echo({})")
		want(e, 1, 1, 1)
	})
	t.Run("the key differs with the function set", func(t *testing.T) {
		t.Parallel()
		e := newEvaluator(t)
		run(e, newTool(t, plain), "1 + 1")
		run(e, newTool(t, withEcho), "1 + 1")
		want(e, 0, 2, 2)
		// tool_functions narrowing the set is another set.
		narrowed := withEcho
		narrowed.HasToolFunctions = true
		run(e, newTool(t, narrowed), "1 + 1")
		want(e, 1, 2, 2) // no functions at all: the same set as plain
		run(e, newTool(t, withEcho, evaluator.ClientUnreachable()), "1 + 1")
		want(e, 2, 2, 2) // echo runs on the server: still there
		run(e, newTool(t, evaluator.Settings{Read: true, Functions: catalogue("echo", "downloadCsv")}, evaluator.ClientUnreachable()), "1 + 1")
		want(e, 3, 2, 2) // downloadCsv is refused: the set is {echo}
	})
	t.Run("the key differs with max_nodes", func(t *testing.T) {
		t.Parallel()
		e := newEvaluator(t)
		low, err := evaluator.DefaultBudgets().Lower(evaluator.Budgets{MaxNodes: 10})
		if err != nil {
			t.Fatal(err)
		}
		lowTool, err := evaluator.NewTool(plain, low)
		if err != nil {
			t.Fatal(err)
		}
		run(e, newTool(t, plain), "1 + 1")
		run(e, lowTool, "1 + 1")
		want(e, 0, 2, 2)
	})
	t.Run("a failed compile is not kept", func(t *testing.T) {
		t.Parallel()
		e := newEvaluator(t)
		tool := newTool(t, plain)
		run(e, tool, "1 +")
		run(e, tool, "1 +")
		run(e, tool, "unknown")
		want(e, 0, 3, 0)
	})
	t.Run("eviction at the bound, least recently used first", func(t *testing.T) {
		t.Parallel()
		e := newEvaluator(t, evaluator.WithCacheSize(2))
		tool := newTool(t, plain)
		run(e, tool, "1")
		run(e, tool, "2")
		want(e, 0, 2, 2)
		run(e, tool, "1") // 1 is now the most recently used
		want(e, 1, 2, 2)
		run(e, tool, "3") // evicts 2
		want(e, 1, 3, 2)
		run(e, tool, "1")
		want(e, 2, 3, 2)
		run(e, tool, "2")
		want(e, 2, 4, 2)
	})
	t.Run("every step and the read are looked up", func(t *testing.T) {
		t.Parallel()
		e := newEvaluator(t)
		tool := newTool(t, plain)
		input := []byte(`{"steps":[{"set":"scopes.root.a","expr":"1"},{"set":"scopes.root.b","expr":"1"}],"read":"2"}`)
		e.Run(ctx, tool, evaluator.NewState(), input, evaltest.NewHost(nil))
		want(e, 1, 2, 2)
	})
}

func TestWithCacheSize(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, -1} {
		if _, err := evaluator.New(evaluator.WithCacheSize(n)); err == nil {
			t.Errorf("New(WithCacheSize(%d)): got no error, want one", n)
		}
	}
	if _, err := evaluator.New(evaluator.WithCacheSize(1)); err != nil {
		t.Errorf("New(WithCacheSize(1)): got error %v, want none", err)
	}
}
