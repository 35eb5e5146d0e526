package exprbound_test

import (
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/exprd/exprd/internal/exprbound"
)

// Each limit at its value and one past it: {"ab": "xyz"} is estimated at
// 4 (the object) + 2 + 4 (the key) + 4 + 3 (the string) = 17 bytes.
func TestNormalizeLimits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		v        any
		at, past exprbound.ValueLimits
		over     exprbound.ValueLimit
	}{
		{"bytes", map[string]any{"ab": "xyz"}, exprbound.ValueLimits{MaxBytes: 17}, exprbound.ValueLimits{MaxBytes: 16}, exprbound.OverBytes},
		{"string characters", "ééé", exprbound.ValueLimits{MaxString: 3}, exprbound.ValueLimits{MaxString: 2}, exprbound.OverString},
		{"array items", []any{1, 2, 3}, exprbound.ValueLimits{MaxArray: 3}, exprbound.ValueLimits{MaxArray: 2}, exprbound.OverArray},
		{"typed array items", []string{"a", "b", "c"}, exprbound.ValueLimits{MaxArray: 3}, exprbound.ValueLimits{MaxArray: 2}, exprbound.OverArray},
		{"depth", nested(exprbound.MaxDepth), exprbound.ValueLimits{}, exprbound.ValueLimits{}, exprbound.NotJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := exprbound.Normalize(tt.v, tt.at); err != nil {
				t.Errorf("at the limit: got %v, want no error", err)
			}
			past := tt.v
			if tt.name == "depth" {
				past = []any{tt.v}
			}
			_, err := exprbound.Normalize(past, tt.past)
			var ve *exprbound.ValueError
			if !errors.As(err, &ve) || ve.Over != tt.over {
				t.Errorf("one past: got %v, want a *ValueError over %d", err, tt.over)
			}
		})
	}
}

// nested is [[...[]...]], depth levels below the outer array.
func nested(depth int) any {
	var v any = []any{}
	for range depth {
		v = []any{v}
	}
	return v
}

// A Normalizer counts the values it normalised before: the chunks of one
// stream share one limit.
func TestNormalizerCountsAcrossValues(t *testing.T) {
	t.Parallel()
	n := exprbound.Normalizer{Limits: exprbound.ValueLimits{MaxBytes: 32}}
	chunk := map[string]any{"tick": 1.0} // 4 + 4 + 4 + 4 = 16
	for i, want := range []bool{true, true, false} {
		if _, err := n.Normalize(chunk); (err == nil) != want {
			t.Errorf("chunk %d: got %v, want accepted: %v", i, err, want)
		}
	}
}

func TestNormalizeValues(t *testing.T) {
	t.Parallel()
	type label string
	var cycle any
	cycle = &cycle
	tests := []struct {
		name string
		v    any
		want string // JSON, or the error's message
	}{
		{"an int is a float64", 3, `3`},
		{"fromPairs' map", map[any]any{"a": 1}, `{"a":1}`},
		{"a nil array is []", []any(nil), `[]`},
		{"a nil object is {}", map[string]any(nil), `{}`},
		{"a typed map", map[string]int{"a": 1}, `{"a":1}`},
		{"a named string", label("x"), `"x"`},
		{"bytes are text", []byte("hi"), `"hi"`},
		{"a time", time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), `"2025-01-02T03:04:05Z"`},
		{"a duration", 1500 * time.Millisecond, `"1.5s"`},
		{"a pointer", &[]any{true}, `[true]`},
		{"NaN", math.NaN(), "value NaN is not a JSON number"},
		{"a number key", map[any]any{1: "a"}, "a map key 1 (int) is not a string: JSON objects have string keys"},
		{"a typed number key", map[int]string{1: "a"}, "a map key 1 (int) is not a string: JSON objects have string keys"},
		{"a func", func() {}, "a value of type func() cannot be written as JSON"},
		{"a cycle of pointers", cycle, "value is nested deeper than 1000 levels"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v, err := exprbound.Normalize(tt.v, exprbound.ValueLimits{MaxBytes: 1 << 20})
			got := ""
			if err != nil {
				got = err.Error()
			} else {
				b, _ := json.Marshal(v)
				got = string(b)
			}
			if got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

// A value already in JSON types comes back as it is: normalising a subtree
// of the state allocates nothing.
func TestNormalizeKeepsJSONValues(t *testing.T) {
	// Not parallel: it counts allocations.
	v := map[string]any{"items": []any{map[string]any{"id": "p01", "price": 1.5}, nil, true}}
	allocs := testing.AllocsPerRun(100, func() {
		out, err := exprbound.Normalize(v, exprbound.ValueLimits{MaxBytes: 1 << 20, MaxString: 100, MaxArray: 100})
		if err != nil {
			t.Fatal(err)
		}
		if out.(map[string]any)["items"].([]any)[0].(map[string]any)["id"] != "p01" {
			t.Fatal("changed")
		}
	})
	if allocs != 0 {
		t.Errorf("got %v allocations, want 0", allocs)
	}
	// A value that changes below is copied on the way up, never changed.
	w := map[string]any{"a": []any{1}}
	out, err := exprbound.Normalize(w, exprbound.ValueLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := w["a"].([]any)[0].(int); !ok {
		t.Errorf("the input: got %#v, want it unchanged", w)
	}
	if _, ok := out.(map[string]any)["a"].([]any)[0].(float64); !ok {
		t.Errorf("the output: got %#v, want a float64 inside", out)
	}
}
