package bench

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/exprd/exprd/internal/testkit/benchpair"
)

var engines = []struct {
	name string
	new  func(workload) (engine, error)
}{
	{"exprd", func(w workload) (engine, error) { return newExprd(w) }},
	{"expr", func(w workload) (engine, error) { return newExpr(w) }},
	{"cel", func(w workload) (engine, error) { return newCEL(w) }},
	{"goja", func(w workload) (engine, error) { return newGoja(w) }},
}

// TestEnginesAgree holds every engine to the same value, so that the
// benchmarks compare the same work.
func TestEnginesAgree(t *testing.T) {
	for _, w := range []workload{small(), large()} {
		var want any
		for _, en := range engines {
			x, err := en.new(w)
			if err != nil {
				t.Fatalf("%s/%s: %v", w.name, en.name, err)
			}
			v, err := x.run()
			if err != nil {
				t.Fatalf("%s/%s: %v", w.name, en.name, err)
			}
			got := asJSON(t, v)
			if want == nil {
				want = got
				if n := len(got.([]any)); n == 0 {
					t.Fatalf("%s: the workload selects nothing", w.name)
				}
				continue
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s/%s = %.200v, want %.200v", w.name, en.name, got, want)
			}
		}
	}
}

// asJSON normalises a value through JSON, as a client would see it.
func asJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(stringKeys(v))
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// BenchmarkEngines runs each workload on each engine. exprd's figure
// against expr's is the evaluator's overhead (goals: ≤ 1.3× small, ≤ 1.1×
// large); cel and goja are context. "interleaved" runs exprd and expr one
// after the other within each iteration, so that a shared machine's load
// falls on both alike: its "ratio" is the figure the goals are judged by.
func BenchmarkEngines(b *testing.B) {
	for _, w := range []workload{small(), large()} {
		for _, en := range engines {
			b.Run(w.name+"/"+en.name, func(b *testing.B) {
				x, err := en.new(w)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					if _, err := x.run(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run(w.name+"/interleaved", func(b *testing.B) {
			x, err := newExprd(w)
			if err != nil {
				b.Fatal(err)
			}
			y, err := newExpr(w)
			if err != nil {
				b.Fatal(err)
			}
			benchpair.Interleave(b, runOrFail(x), runOrFail(y))
		})
	}
}

// runOrFail is x's run as one side of benchpair.Interleave.
func runOrFail(x engine) func(*testing.B) {
	return func(b *testing.B) {
		if _, err := x.run(); err != nil {
			b.Fatal(err)
		}
	}
}

// stringKeys turns cel-go's map[any]any into map[string]any for encoding.
func stringKeys(v any) any {
	switch v := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, x := range v {
			m[fmt.Sprint(k)] = stringKeys(x)
		}
		return m
	case []any:
		for i, x := range v {
			v[i] = stringKeys(x)
		}
	}
	return v
}
