// Package procs fits GOMAXPROCS to the process's load.
//
// Given several Ps, Go's scheduler runs a goroutine that another wakes on
// a second thread, woken for it with a futex, while the first goes to
// sleep. At low concurrency that costs more than the work it spreads: a
// client-run tool's AgentLoop turn (about ten handoffs between goroutines,
// across three processes) took exprd 1.35–1.45 ms of CPU on two Ps of a
// two-core VM and 1.0–1.07 ms on one, and one stream of back-to-back
// ExprTool calls ran 7,710 calls/s on one P against 5,771 on two. With
// many streams at once the other Ps are worth their cost. So Run keeps
// the process on one P while it uses little CPU, and gives it back the
// runtime's default as soon as it uses most of that one. It starts on one
// P: a server starts idle, and the first busy interval brings the default
// back.
package procs

import (
	"context"
	"log/slog"
	"os"
	"runtime"
	"time"
)

// policy is when run changes GOMAXPROCS.
type policy struct {
	// interval is how often the process's CPU time is read.
	interval time.Duration
	// raise: on one P, the CPU used over one interval, in cores, at or
	// over which the runtime's default comes back at once.
	raise float64
	// lower: at the default, the CPU used on average over lowerAfter, in
	// cores, under which one P is enough.
	lower      float64
	lowerAfter time.Duration
}

// defaultPolicy reads every 100 ms, raises at 0.8 cores on one P and
// lowers under 0.6 cores over a second. The band between them is wide
// enough that a steady load does not flip between the two: the same work
// takes less CPU on one P than on several, never more.
var defaultPolicy = policy{interval: 100 * time.Millisecond, raise: 0.8, lower: 0.6, lowerAfter: time.Second}

// Run adapts GOMAXPROCS until ctx ends, then gives back the runtime's
// default. It changes nothing, and says why in log, when the GOMAXPROCS
// variable is set (the operator's value holds), when the runtime's
// default is one P, or where the process's CPU time cannot be read (not
// on a unix).
func Run(ctx context.Context, log *slog.Logger) { run(ctx, defaultPolicy, log) }

func run(ctx context.Context, p policy, log *slog.Logger) {
	why := ""
	if _, ok := CPUTime(); !ok {
		why = "the process's CPU time cannot be read on this system"
	} else if os.Getenv("GOMAXPROCS") != "" {
		why = "the GOMAXPROCS variable is set"
	} else if runtime.GOMAXPROCS(0) <= 1 {
		why = "Go runs on one core"
	}
	if why != "" {
		log.Info("GOMAXPROCS not adapted to the load: "+why, "gomaxprocs", runtime.GOMAXPROCS(0))
		return
	}
	c := newController(p, runtime.SetDefaultGOMAXPROCS, func() { runtime.GOMAXPROCS(1) })
	defer runtime.SetDefaultGOMAXPROCS()
	c.setOne()
	c.one = true
	log.Debug("GOMAXPROCS changed", "procs", 1)
	t := time.NewTicker(p.interval)
	defer t.Stop()
	last, _ := CPUTime()
	lastAt := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cpu, ok := CPUTime()
		now := time.Now()
		if ok && now.After(lastAt) && c.observe(float64(cpu-last)/float64(now.Sub(lastAt))) {
			log.Debug("GOMAXPROCS changed", "procs", runtime.GOMAXPROCS(0))
		}
		if ok {
			last, lastAt = cpu, now
		}
	}
}

// controller is run's decisions, apart from the clock and the runtime.
type controller struct {
	p                  policy
	setDefault, setOne func()
	one                bool      // on one P, else the runtime's default
	recent             []float64 // at the default: the cores used in the last intervals, oldest first
}

func newController(p policy, setDefault, setOne func()) *controller {
	n := max(1, int(p.lowerAfter/p.interval))
	return &controller{p: p, setDefault: setDefault, setOne: setOne, recent: make([]float64, 0, n)}
}

// observe takes the cores used over the last interval and changes
// GOMAXPROCS when the policy says so; it reports a change.
func (c *controller) observe(cores float64) bool {
	if c.one {
		if cores < c.p.raise {
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
	if sum/float64(len(c.recent)) >= c.p.lower {
		return false
	}
	c.setOne()
	c.one = true
	c.recent = c.recent[:0]
	return true
}
