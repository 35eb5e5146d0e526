package evaluator_test

import (
	"encoding/json"
	"testing"

	"github.com/exprd/exprd/evaluator"
	"github.com/exprd/exprd/evaluator/evaltest"
)

// readInput is a call that only reads src.
func readInput(src string) []byte {
	b, _ := json.Marshal(map[string]any{"read": src})
	return b
}

// setInput is a call of one step writing src at path.
func setInput(path, src string) []byte {
	b, _ := json.Marshal(map[string]any{"steps": []any{map[string]any{"set": path, "expr": src}}})
	return b
}

// catalogue returns the named functions of evaltest's catalogue.
func catalogue(names ...string) []evaluator.Function {
	all := evaltest.Functions()
	out := make([]evaluator.Function, len(names))
	for i, n := range names {
		out[i] = all[n]
	}
	return out
}

func newEvaluator(t testing.TB, opts ...evaluator.Option) *evaluator.Evaluator {
	t.Helper()
	e, err := evaluator.New(opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return e
}

func newTool(t testing.TB, s evaluator.Settings, opts ...evaluator.ToolOption) *evaluator.Tool {
	t.Helper()
	tool, err := evaluator.NewTool(s, evaluator.DefaultBudgets(), opts...)
	if err != nil {
		t.Fatalf("NewTool: %v", err)
	}
	return tool
}

// productsState is the state of demo/products.json.
func productsState(t testing.TB) []byte {
	t.Helper()
	for _, c := range loadCases(t) {
		if string(c.State) == `"products"` {
			return c.StateJSON()
		}
	}
	t.Fatal("no case uses the products state")
	return nil
}
