package agent

import (
	"fmt"
	"testing"
)

// The message of a missing tool among 4,096 declared names of one length,
// the worst case of the search: what one distinct missing name costs a
// step (it is made once a step for each, at most 65 a step). Measured
// here: 2.2 ms, 16 allocations.
func BenchmarkMissingToolMessage(b *testing.B) {
	names := make([]string, maxToolsCompared)
	for i := range names {
		names[i] = fmt.Sprintf("tool_%04d_search_the_catalogue", i)
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = missingToolMessage("tool_0042_serach_the_catalogue", names)
	}
}
