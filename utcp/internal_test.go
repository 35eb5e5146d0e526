package utcp

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMergeNames checks the registry's sorted names, kept by merging each
// change in, against sorting the set again, for random changes.
func TestMergeNames(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 0))
	var names []string
	set := map[string]bool{}
	for step := range 2000 {
		var gone, added []string
		for n := range set {
			if rng.IntN(20) == 0 {
				gone = append(gone, n)
			}
		}
		if rng.IntN(50) == 0 {
			gone = append(gone, "never-there")
		}
		for range rng.IntN(4) {
			n := fmt.Sprintf("m%02d.t%d", rng.IntN(30), rng.IntN(10))
			if !set[n] && !slices.Contains(added, n) || slices.Contains(gone, n) && !slices.Contains(added, n) {
				added = append(added, n)
			}
		}
		slices.Sort(gone)
		slices.Sort(added)
		names = mergeNames(names, gone, added)
		for _, n := range gone {
			delete(set, n)
		}
		for _, n := range added {
			set[n] = true
		}
		if want := slices.Sorted(maps.Keys(set)); !slices.Equal(names, want) {
			t.Fatalf("step %d: got %v, want %v", step, names, want)
		}
	}
}
