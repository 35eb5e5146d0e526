package bench

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// The state sizes of the scale benchmarks: how evaluation time grows with
// the state.
var stateSizes = []struct {
	name  string
	bytes int
}{
	{"1KB", 1 << 10},
	{"100KB", 100 << 10},
	{"10MB", 10 << 20},
}

// stateOfSize is a products state of about n bytes of JSON.
func stateOfSize(n int) []byte {
	per := len(products(100)) / 100
	return products(max(n/per, 1))
}

// BenchmarkStateSize: one call on states of 1 KB, 100 KB and 10 MB.
// "snapshot" applies the state itself; "point" is a one-step call that reads
// one item and writes one field, which copy-on-write keeps independent of
// the state's size; "scan" filters every item, which grows with it.
func BenchmarkStateSize(b *testing.B) {
	for _, size := range stateSizes {
		state := stateOfSize(size.bytes)
		b.Run(size.name+"/snapshot", func(b *testing.B) {
			x, err := newExprd(workload{state: state, expr: "1"})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(state)))
			b.ReportAllocs()
			for b.Loop() {
				if err := x.st.Replace(state); err != nil {
					b.Fatal(err)
				}
			}
		})
		for _, step := range []struct{ name, expr string }{
			{"point", `scopes.root.products.items[0].price * 2`},
			{"scan", `len(filter(scopes.root.products.items, .stock > 0 && .price < 100))`},
		} {
			b.Run(size.name+"/"+step.name, func(b *testing.B) {
				x, err := newExprd(workload{state: state, expr: step.expr})
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
	}
}

// stepCounts are the numbers of steps in one call of BenchmarkSteps.
var stepCounts = []int{1, 4, 16, 50}

// manySteps is a call of n point steps, each writing its own field from
// the one before, on the 100 KB state.
func manySteps(n int) []byte {
	steps := make([]string, n)
	for i := range steps {
		from := "scopes.root.products.items[0].price"
		if i > 0 {
			from = "scopes.root.selected.s" + strconv.Itoa(i-1)
		}
		src, _ := json.Marshal(from + " + 1")
		steps[i] = fmt.Sprintf(`{"set": "scopes.root.selected.s%d", "expr": %s}`, i, src)
	}
	return []byte(`{"steps": [` + strings.Join(steps, ", ") + `]}`)
}

// BenchmarkSteps: one call of 1, 4, 16 and 50 (the default maximum) steps
// on the 100 KB state; each step reads the write of the one before.
func BenchmarkSteps(b *testing.B) {
	state := stateOfSize(100 << 10)
	for _, n := range stepCounts {
		b.Run("steps="+strconv.Itoa(n), func(b *testing.B) {
			x, err := newExprd(workload{state: state, expr: "1"})
			if err != nil {
				b.Fatal(err)
			}
			x.input = manySteps(n)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := x.run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestManySteps checks the steps benchmark's call chains its steps: the
// last write is the first item's price plus the number of steps.
func TestManySteps(t *testing.T) {
	state := stateOfSize(1 << 10)
	var doc struct {
		Products struct{ Items []struct{ Price float64 } }
	}
	if err := json.Unmarshal(state, &doc); err != nil {
		t.Fatal(err)
	}
	x, err := newExprd(workload{state: state, expr: "1"})
	if err != nil {
		t.Fatal(err)
	}
	x.input = manySteps(50)
	v, err := x.run()
	if err != nil {
		t.Fatal(err)
	}
	if want := doc.Products.Items[0].Price + 50; v != want {
		t.Fatalf("the last write is %v, want %v", v, want)
	}
}
