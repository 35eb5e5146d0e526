// Package benchpair runs the two sides of a benchmark's comparison one
// after the other within each iteration, so that the load of a shared
// machine falls on both alike, and reports their ratio: "ratio" for wall
// time and "cpu-ratio" for the process's CPU time (the baseline's server,
// when it runs in the process, counted alike on both sides). Benchmarks
// that run the sides as separate sub-benchmarks see the machine change
// between them: on this project's shared 2-core machine, a ratio read that
// way moved by a fifth between two runs of unchanged code.
package benchpair

import (
	"testing"
	"time"

	"github.com/exprd/exprd/internal/procs"
)

// cpuTime is the process's CPU time, 0 where it cannot be read.
func cpuTime() time.Duration {
	t, _ := procs.CPUTime()
	return t
}

// Interleave runs side then base once per iteration of b and reports
// side's time over base's.
func Interleave(b *testing.B, side, base func(b *testing.B)) {
	var ts, tb, cs, cb time.Duration
	for b.Loop() {
		start, c0 := time.Now(), cpuTime()
		side(b)
		mid, c1 := time.Now(), cpuTime()
		base(b)
		ts, tb = ts+mid.Sub(start), tb+time.Since(mid)
		cs, cb = cs+c1-c0, cb+cpuTime()-c1
	}
	b.ReportMetric(float64(ts)/float64(tb), "ratio")
	// Where the process's CPU time cannot be read it is 0: no cpu-ratio.
	if cb > 0 {
		b.ReportMetric(float64(cs)/float64(cb), "cpu-ratio")
	}
}
