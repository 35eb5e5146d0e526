package evaluator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/exprd/exprd/evaluator"
	"github.com/exprd/exprd/evaluator/evaltest"
)

// TestConcurrentRuns runs many calls on one State, one Tool and one
// Evaluator at once, with merge patches in between, as the calls in flight
// on one stream do. Under -race it checks the sharing; after it, that no
// write was lost.
func TestConcurrentRuns(t *testing.T) {
	t.Parallel()
	const workers, callsEach = 8, 25
	e := newEvaluator(t, evaluator.WithCacheSize(16))
	// The clock stands still: the time budget, which a loaded machine
	// could spend, is not what this test is about.
	stopped := time.Date(2025, time.January, 1, 0, 0, 0, 0, time.UTC)
	tool := newTool(t, evaluator.Settings{Read: true, Functions: catalogue("echo", "total")}, evaluator.WithClock(func() time.Time { return stopped }))
	st := newState(t, string(productsState(t)))

	var wg sync.WaitGroup
	errs := make(chan error, workers*callsEach*2)
	for w := range workers {
		wg.Go(func() {
			for i := range callsEach {
				input, _ := json.Marshal(map[string]any{
					"steps": []any{
						map[string]any{"set": fmt.Sprintf("scopes.root.w%d.c%d", w, i), "expr": fmt.Sprintf("echo({n: %d}).n", i)},
						map[string]any{"set": fmt.Sprintf("scopes.root.products.items[%d].seen", (w+i)%20), "expr": "true"},
					},
					"read": fmt.Sprintf("[scopes.root.w%d.c%d, total({rows: scopes.root.products.items}).total > 0, len(scopes.root.products.items)]", w, i),
				})
				a := e.Run(context.Background(), tool, st, input, evaltest.NewHost(nil))
				if got, want := string(a.JSON()), fmt.Sprintf(`{"value":[%d,true,20]}`, i); got != want {
					errs <- fmt.Errorf("worker %d call %d: got %s, want %s", w, i, got, want)
				}
			}
		})
	}
	for i := range callsEach {
		wg.Go(func() {
			if err := st.MergePatch(fmt.Appendf(nil, `{"patch%d": {"i": %d}}`, i, i)); err != nil {
				errs <- err
			}
			_ = mustMarshalAny(st.Snapshot())
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	root := st.Snapshot()
	for w := range workers {
		obj, _ := root[fmt.Sprintf("w%d", w)].(map[string]any)
		for i := range callsEach {
			if _, ok := obj[fmt.Sprintf("c%d", i)]; !ok {
				t.Errorf("state: scopes.root.w%d.c%d is missing: a write was lost", w, i)
			}
		}
	}
	for i := range callsEach {
		if _, ok := root[fmt.Sprintf("patch%d", i)]; !ok {
			t.Errorf("state: patch%d is missing: a merge patch was lost", i)
		}
	}
	items := root["products"].(map[string]any)["items"].([]any)
	if len(items) != 20 {
		t.Errorf("state: got %d items, want 20", len(items))
	}
}

// mustMarshalAny reads the whole value, as a client mirroring the state does.
func mustMarshalAny(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
