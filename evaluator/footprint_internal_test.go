package evaluator

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/exprd/exprd/evaluator/jsonvalue"
	"github.com/exprd/exprd/membudget"
)

// footprintShapes are states of the shapes whose memory differs most by
// the byte of JSON: small and large objects, arrays of every kind of
// item, short, long, shared and distinct strings, nesting, and a
// catalog of products as a user sends.
func footprintShapes() map[string]string {
	rep := func(s string, n int) string { return strings.TrimSuffix(strings.Repeat(s+",", n), ",") }
	gen := func(open, close string, n int, item func(i int) string) string {
		var b strings.Builder
		b.WriteString(open)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(item(i))
		}
		b.WriteString(close)
		return b.String()
	}
	object := func(members int) func(int) string {
		return func(int) string {
			return gen("{", "}", members, func(i int) string { return fmt.Sprintf(`"k%d":%d`, i, i) })
		}
	}
	shapes := map[string]string{
		"numbers":          `{"a":[` + rep("1", 400_000) + `]}`,
		"long numbers":     `{"a":[` + rep("1234567.25", 100_000) + `]}`,
		"literals":         `{"a":[` + rep("true,null", 150_000) + `]}`,
		"empty strings":    `{"a":[` + rep(`""`, 300_000) + `]}`,
		"short strings":    `{"a":[` + rep(`"x"`, 300_000) + `]}`,
		"distinct strings": gen(`{"a":[`, `]}`, 150_000, func(i int) string { return fmt.Sprintf(`"s%d"`, i) }),
		"escaped strings":  `{"a":[` + rep(`"\u00e9\n\"x\""`, 100_000) + `]}`,
		"a long string":    `{"a":"` + strings.Repeat("x", 1_000_000) + `"}`,
		"empty objects":    `{"a":[` + rep(`{}`, 200_000) + `]}`,
		"empty arrays":     `{"a":[` + rep(`[]`, 200_000) + `]}`,
		"arrays of one":    `{"a":[` + rep(`[1]`, 150_000) + `]}`,
		"nested":           `{"a":[` + rep(`{"b":{"c":[{"d":"e"}]}}`, 30_000) + `]}`,
		"catalog": gen(`{"items":[`, `]}`, 18_000, func(n int) string {
			return fmt.Sprintf(`{"id":"i%07d","name":"item %d","category":"%s","price":%d.%02d,"stock":%d,"discontinued":%t,"note":"an ordinary product, nothing to see"}`,
				n, n, [...]string{"home", "tech", "garden"}[n%3], 1+n%97, n%100, n%50, n%7 == 0)
		}),
		"products": gen(`{"items":[`, `]}`, 20_000, func(i int) string {
			return fmt.Sprintf(`{"id":%d,"name":"product %d","price":%d.99,"tags":["a","b"],"stock":true}`, i, i, i%100)
		}),
	}
	for _, n := range []int{1, 8, 9, 15, 29, 57, 113, 500, 897} {
		shapes[fmt.Sprintf("objects of %d", n)] = gen(`{"a":[`, `]}`, max(1, 100_000/n), object(n))
	}
	for _, n := range []int{5_000, 20_000, 100_000} {
		shapes[fmt.Sprintf("an object of %d", n)] = object(n)(0)
	}
	return shapes
}

// TestFootprintHoldsTheRuntime holds the state's memory model to the
// runtime: for a decoded state of each shape, the live heap it takes
// (after a collection) is at most its footprint, which is at most what
// decoding reserved beforehand, and the footprint is within 4 times the
// heap (the model's price: a short string shared through the decoder's
// cache is counted each time). Not parallel: it reads the whole heap.
// (Objects of fewer than 4,096 entries alone are left out: the pooled
// decoder keeps stacks that size, which the heap would count.)
func TestFootprintHoldsTheRuntime(t *testing.T) {
	const looseness = 4.0
	for name, doc := range footprintShapes() {
		data := []byte(doc)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		v, _, decoded, err := decodeState(context.Background(), data, name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
		sh, _ := scanShape(data, nil)
		fp, reserved := footprint(v), sh.memory()
		if decoded != fp {
			t.Errorf("%s: decoding counted %d, the footprint is %d", name, decoded, fp)
		}
		runtime.KeepAlive(v)
		t.Logf("%-18s %8d bytes of JSON: heap %9d, footprint %9d (%.2f×), reserved to decode %9d", name, len(data), held, fp, float64(fp)/float64(held), reserved)
		if held > fp {
			t.Errorf("%s: the heap holds %d, more than its footprint %d", name, held, fp)
		}
		if float64(fp) > looseness*float64(held) {
			t.Errorf("%s: footprint %d, over %.1f times the heap's %d", name, fp, looseness, held)
		}
		if fp > reserved {
			t.Errorf("%s: decoding reserved %d, less than the footprint %d", name, reserved, fp)
		}
	}
}

// scanShape calls yield each jsonvalue.YieldEvery bytes, and stops with
// its error; nil yields nothing.
func TestScanShapeYields(t *testing.T) {
	data := []byte(footprintShapes()["catalog"])
	calls := 0
	if _, err := scanShape(data, func() error { calls++; return nil }); err != nil || calls != (len(data)-1)/jsonvalue.YieldEvery {
		t.Fatalf("scanned %d bytes: yield called %d times (%v), want %d", len(data), calls, err, (len(data)-1)/jsonvalue.YieldEvery)
	}
	stop := errors.New("stop")
	calls = 0
	if _, err := scanShape(data, func() error { calls++; return stop }); !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("a yield that stops: %d calls, %v", calls, err)
	}
	if _, err := scanShape(data, nil); err != nil {
		t.Fatal(err)
	}
}

// A state written over and over near its budget is measured again when
// the budget refuses its estimate, so the writes go on, a few times in a
// thousand writes; a write the budget refuses does not walk the state
// again until its estimate has grown a quarter past the one last
// measured, however many are refused: at that quarter and one byte past.
func TestStateMeasuredAgainAQuarterOn(t *testing.T) {
	walks := 0
	measure = func(v any) int64 { walks++; return footprint(v) }
	defer func() { measure = footprint }()
	st := NewState()
	if err := st.Replace([]byte(`{"big":"` + strings.Repeat("x", 100_000) + `","k":""}`)); err != nil {
		t.Fatal(err)
	}
	b := membudget.New(2*st.held, time.Millisecond)
	st.UseMemory(b.Empty("state"))
	p, err := ParsePath("scopes.root.k")
	if err != nil {
		t.Fatal(err)
	}
	value := strings.Repeat("y", 1_000)
	for i := range 1_000 {
		if err := st.set(p, value, len(value)+2); err != nil {
			t.Fatalf("write %d: %v (held %d)", i, err, st.held)
		}
	}
	if walks == 0 || walks > 50 {
		t.Fatalf("measured %d times in 1,000 writes of 1 KB over a 125 KB state, want a few", walks)
	}

	// Refused for real (the budget full): an estimate at a quarter past
	// the last measured is not measured again, one a byte past it is.
	full := membudget.New(1<<20, time.Millisecond)
	if _, err := full.Reserve(context.Background(), "the rest", full.Limit()-full.Limit()/16); err != nil {
		t.Fatal(err)
	}
	st = NewState()
	st.UseMemory(full.Empty("state"))
	grown := map[string]any{"a": strings.Repeat("x", 200_000)} // measured past the estimates below
	for _, tc := range []struct {
		past  int64
		walks int
	}{{0, 0}, {1, 1}} {
		st.measuredAt = 100_000
		walks = 0
		if _, err := st.charge(grown, 125_000+tc.past, nil); err == nil {
			t.Fatal("a full budget took the state's growth")
		}
		if walks != tc.walks {
			t.Errorf("an estimate %d past a quarter over the last measured: %d walks, want %d", tc.past, walks, tc.walks)
		}
	}
}
