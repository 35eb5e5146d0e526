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
//
// Busy, it may run Go on more Ps than cores (perCore, exprd's
// --procs-per-core, 1 by default), its programs still on one turn a core
// (Cores). Go's scheduler preempts a goroutine that computes after 10 ms
// and looks at the network only when a P runs out of work (or every 10
// ms), so on as many Ps as cores a caller's millisecond call waits behind
// every goroutine that computes for another; with more Ps the operating
// system's scheduler, which shares the cores among the threads, gives a
// thread woken for a short call a core sooner. In the hostile run on two
// cores, a steady client's p99 during 64 allocating programs was 30-36 ms
// on two Ps and 9.5-9.7 ms on four, during 128 streams of 15 MB states
// 36-42 ms and 20-29 ms. It costs throughput at saturation (200 streams
// of back-to-back calls by one client ran 0.82-0.85 times the calls a
// second on four Ps) and memory: more goroutines allocate at once, and
// the 15 MB states took exprd to 310-350 MiB on four Ps against 295 on
// two, past the hostile run's line of 320. So one P a core stays the
// default.
package procs

import (
	"context"
	"log/slog"
	"os"
	"runtime"
	"sync/atomic"
	"time"
)

// cores is the runtime's default GOMAXPROCS as Run last read it; 0
// before Run, or when it does not adapt.
var cores atomic.Int32

// Cores is the cores Go's runtime gives the process (GOMAXPROCS's default:
// the machine's, or its cgroup's CPU limit) while Run adapts GOMAXPROCS,
// else GOMAXPROCS itself (the operator's value, or the runtime's). Turns
// to compute are counted in these (evaluator.DefaultMaxRunning): more Ps
// than cores serve latency, not more programs at once.
func Cores() int {
	if n := cores.Load(); n > 0 {
		return int(n)
	}
	return runtime.GOMAXPROCS(0)
}

// DefaultPerCore is Run's Ps a core while busy (see the package doc).
const DefaultPerCore = 1

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
	// perCore: busy, GOMAXPROCS is this many times the runtime's
	// default.
	perCore int
}

// defaultPolicy reads every 100 ms, raises at 0.8 cores on one P and
// lowers under 0.6 cores over a second. The band between them is wide
// enough that a steady load does not flip between the two: the same work
// takes less CPU on one P than on several, never more.
var defaultPolicy = policy{interval: 100 * time.Millisecond, raise: 0.8, lower: 0.6, lowerAfter: time.Second, perCore: DefaultPerCore}

// Run adapts GOMAXPROCS until ctx ends, then gives back the runtime's
// default: one P while the process uses little CPU, perCore Ps a core
// (at least 1) while busy. It changes nothing, and says why in log, when
// the GOMAXPROCS variable is set (the operator's value holds), when the
// runtime's default is one P, or where the process's CPU time cannot be
// read (not on a unix).
func Run(ctx context.Context, log *slog.Logger, perCore int) {
	p := defaultPolicy
	p.perCore = max(perCore, 1)
	run(ctx, p, log)
}

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
	busy := func() {
		runtime.SetDefaultGOMAXPROCS()
		n := runtime.GOMAXPROCS(0) // the cgroup's limit may have changed
		cores.Store(int32(n))
		if p.perCore > 1 {
			runtime.GOMAXPROCS(n * p.perCore)
		}
	}
	cores.Store(int32(runtime.GOMAXPROCS(0)))
	defer func() {
		runtime.SetDefaultGOMAXPROCS()
		cores.Store(0)
	}()
	c := newController(p, busy, func() { runtime.GOMAXPROCS(1) })
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
	one                bool      // on one P, else busy: the runtime's default, perCore Ps a core
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
