package evaluator_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/exprd/exprd/evaluator"
	"github.com/exprd/exprd/evaluator/evaltest"
)

// fuzzCallTimeout is how long one fuzzed call may take before it counts as
// a hang: 50 steps waiting the lowered function timeout, with room.
const fuzzCallTimeout = 10 * time.Second

// FuzzCall runs fuzzed tool input on the products state with every
// catalogue function. The property: no panic, no hang, every error is one
// of evaluator.Reasons, and no message holds Go's words.
func FuzzCall(f *testing.F) {
	for _, c := range loadCases(f) {
		f.Add(c.InputJSON())
	}
	state := productsState(f)
	e := newEvaluator(f)
	names := slices.Sorted(maps.Keys(evaltest.Functions()))
	b, err := evaluator.DefaultBudgets().Lower(evaluator.Budgets{FunctionTimeout: 20 * time.Millisecond})
	if err != nil {
		f.Fatal(err)
	}
	tool, err := evaluator.NewTool(evaluator.Settings{Read: true, Functions: catalogue(names...)}, b)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		st := evaluator.NewState()
		if err := st.Replace(state); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), fuzzCallTimeout)
		defer cancel()
		start := time.Now()
		a := e.Run(ctx, tool, st, input, evaltest.NewHost(nil))
		if a.Cancelled {
			t.Fatalf("input %q: the call hung for %v", input, time.Since(start))
		}
		if !json.Valid(a.JSON()) {
			t.Fatalf("input %q: the answer %q is not JSON", input, a.JSON())
		}
		if a.Err != nil {
			if !slices.Contains(evaluator.Reasons, a.Err.Reason) {
				t.Fatalf("input %q: got reason %q, want one of %v", input, a.Err.Reason, evaluator.Reasons)
			}
			for _, g := range goInternals {
				if strings.Contains(a.Err.Message, g) {
					t.Fatalf("input %q: got message %q, want none of Go's words (%q)", input, a.Err.Message, g)
				}
			}
			if strings.HasSuffix(a.Err.Message, ": refused") {
				t.Fatalf("input %q: got %q: the hand check refused what the input schema accepts", input, a.Err.Message)
			}
			return
		}
		if a.ValueJSON != nil && utf8.RuneCount(a.ValueJSON) > b.MaxReadChars {
			t.Fatalf("input %q: got a read of %d characters, want at most %d", input, utf8.RuneCount(a.ValueJSON), b.MaxReadChars)
		}
	})
}

// FuzzSetPath parses fuzzed set addresses. The property: no panic; an
// error is always a guardrail-violation *evaluator.Error; a parsed path's
// String() is the address; and a call setting a parsed path fails, if at
// all, only on the state's shape (expression-runtime), never on the path.
func FuzzSetPath(f *testing.F) {
	for _, c := range loadCases(f) {
		var in struct {
			Steps []struct {
				Set string `json:"set"`
			} `json:"steps"`
		}
		if json.Unmarshal(c.InputJSON(), &in) != nil {
			continue
		}
		for _, s := range in.Steps {
			if s.Set != "" {
				f.Add(s.Set)
			}
		}
	}
	for _, s := range []string{`scopes.root["a]b"].c`, `scopes.root.grid[1][2]`, `scopes.root[""]`, `scopes.root.$ref`, `scopes.root.a[100000]`, `scopes.root["\u00e9"]`} {
		f.Add(s)
	}
	e := newEvaluator(f)
	tool := newTool(f, evaluator.Settings{})
	const state = `{"a":{"b":[1,{"c":2}]},"list":[],"s":"x","n":null}`
	f.Fuzz(func(t *testing.T, path string) {
		p, err := evaluator.ParsePath(path)
		if err != nil {
			var e *evaluator.Error
			if !errors.As(err, &e) || e.Reason != evaluator.GuardrailViolation {
				t.Fatalf("ParsePath(%q): got error %v (%T), want a guardrail-violation *evaluator.Error", path, err, err)
			}
			return
		}
		if got := p.String(); got != path {
			t.Fatalf("ParsePath(%q).String(): got %q, want %q", path, got, path)
		}
		if !utf8.ValidString(path) {
			return // JSON carries it as U+FFFD: another address
		}
		st := newState(t, state)
		h := evaltest.NewHost(nil)
		a := e.Run(context.Background(), tool, st, setInput(path, "1"), h)
		switch {
		case a.Err == nil:
			if w := h.Writes(); len(w) != 1 || w[0].Path != path {
				t.Fatalf("set %q: got writes %+v, want one at %q", path, w, path)
			}
		case a.Err.Reason != evaluator.ExpressionRuntime:
			t.Fatalf("set %q: got %s, want {} or expression-runtime", path, a.JSON())
		}
	})
}
