// Package procs fits GOMAXPROCS to the process's load.
//
// Given several Ps, Go's scheduler runs a goroutine that another wakes on
// a second thread, woken for it with a futex, while the first goes to
// sleep. At low concurrency that costs more than the work it spreads: a
// client-run tool's AgentLoop turn (about ten handoffs between goroutines
// and three processes) took exprd 1.45 ms of CPU on two Ps of a two-core
// VM and 1.0 ms on one, and its wall time went from 1.18× to 0.95× of
// xsai's. With many streams at once the other Ps are worth their cost.
// So Run keeps the process on one P while it uses little CPU, and gives
// it back the runtime's default as soon as it uses most of that one. It
// starts on one P: a server starts idle, and the first busy interval
// brings the default back.
package procs

import (
	"context"
	"log/slog"
	"runtime"
	"time"
)

// Policy is when Run changes GOMAXPROCS.
type Policy struct {
	// Interval is how often the process's CPU time is read.
	Interval time.Duration
	// Raise: on one P, the CPU used over one interval, in cores, at or
	// over which the runtime's default comes back at once.
	Raise float64
	// Lower: at the default, the CPU used on average over LowerAfter, in
	// cores, under which one P is enough.
	Lower      float64
	LowerAfter time.Duration
}

// DefaultPolicy reads every 100 ms, raises at 0.8 cores on one P and
// lowers under 0.6 cores over a second. The band between them is wide
// enough that a steady load does not flip between the two: the same work
// takes less CPU on one P than on several, never more.
var DefaultPolicy = Policy{Interval: 100 * time.Millisecond, Raise: 0.8, Lower: 0.6, LowerAfter: time.Second}

// Run adapts GOMAXPROCS until ctx ends, then gives back the runtime's
// default. It returns at once, changing nothing, when the default is one
// P or the process's CPU time cannot be read; the caller leaves it out
// when the operator pinned GOMAXPROCS.
func Run(ctx context.Context, p Policy, log *slog.Logger) {
	if _, ok := cpuTime(); !ok || runtime.GOMAXPROCS(0) <= 1 {
		return
	}
	c := newController(p, runtime.SetDefaultGOMAXPROCS, func() { runtime.GOMAXPROCS(1) })
	defer runtime.SetDefaultGOMAXPROCS()
	c.setOne()
	c.one = true
	log.Debug("GOMAXPROCS changed", "procs", 1)
	t := time.NewTicker(p.Interval)
	defer t.Stop()
	last, _ := cpuTime()
	lastAt := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			cpu, _ := cpuTime()
			if c.observe(float64(cpu-last) / float64(now.Sub(lastAt))) {
				log.Debug("GOMAXPROCS changed", "procs", runtime.GOMAXPROCS(0))
			}
			last, lastAt = cpu, now
		}
	}
}

// controller is Run's decisions, apart from the clock and the runtime.
type controller struct {
	p                  Policy
	setDefault, setOne func()
	one                bool      // on one P, else the runtime's default
	recent             []float64 // at the default: the cores used in the last intervals, oldest first
}

func newController(p Policy, setDefault, setOne func()) *controller {
	n := max(1, int(p.LowerAfter/p.Interval))
	return &controller{p: p, setDefault: setDefault, setOne: setOne, recent: make([]float64, 0, n)}
}

// observe takes the cores used over the last interval and changes
// GOMAXPROCS when the policy says so; it reports a change.
func (c *controller) observe(cores float64) bool {
	if c.one {
		if cores < c.p.Raise {
			return false
		}
		c.setDefault()
		c.one = false
		return true
	}
	if len(c.recent) == cap(c.recent) {
		c.recent = append(c.recent[:0], c.recent[1:]...)
	}
	c.recent = append(c.recent, cores)
	if len(c.recent) < cap(c.recent) {
		return false
	}
	sum := 0.0
	for _, u := range c.recent {
		sum += u
	}
	if sum/float64(len(c.recent)) >= c.p.Lower {
		return false
	}
	c.setOne()
	c.one = true
	c.recent = c.recent[:0]
	return true
}
