package evaluator

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/exprd/exprd/internal/exprbound"
	"github.com/exprd/exprd/internal/turns"
)

// tickName is the counter the patcher calls at the start of every predicate
// body.
const tickName = exprbound.TickName

// meter enforces a call's iteration, time, byte and function-call
// budgets. The time budget counts evaluation only: waits on the user and
// on host functions (client- or server-run) are paused. It reads its clock
// every TickCheckEvery iterations, and at once when its alarm rings (the
// context ended or the budget's time passed), so that an expensive
// iteration overruns the budget by one iteration, not by a thousand.
//
// The clock is the CPU time of the thread the program runs on (the
// goroutine is locked to it while it runs): on a busy server Go's
// scheduler runs every other goroutine in turn with the program's, and a
// program of a millisecond ran out of its 100 ms of wall time in the
// hostile mix. The call's context bounds its wall time. Where the system
// does not tell a thread's CPU time, and with the tool's clock
// (WithClock), it is the wall clock.
//
// On CPU time, a program whose thread gets little of it (a server far
// busier than its cores, a CPU-throttled container) holds its turn longer
// than its budget in wall time: past wallBackstop times its budget in wall
// time it stops too, so that no program holds a turn for long however
// little CPU it is given.
type meter struct {
	ctx        context.Context
	now        func() time.Duration // the clock of the time budget
	cpu        bool                 // now is the thread's CPU time: lock the goroutine to it while running
	wall       func() time.Time     // the wall clock, on CPU time (nil: time.Now)
	wallSince  time.Time            // when the running period started, on the wall clock
	wallUsed   time.Duration        // the wall time of the running periods before
	iterations uint64
	max        uint64
	timeout    time.Duration
	used       time.Duration
	since      time.Duration // when the running period started
	on         bool          // in a running period
	running    *turns.Turns  // the evaluator's turns to run; nil: no wait
	caller     string        // whose turn it waits for
	turnSince  time.Time     // when it took its turn, on the wall clock
	alarm      *exprbound.Alarm
	bytes      exprbound.Meter // what the call's programs built and received
	calls      int             // host-function calls made
	maxCalls   int
}

// clockOf is the time budget's clock for a tool's clock (nil: the
// thread's CPU time where the system tells it, else the wall clock), and
// whether it is the thread's CPU time.
func clockOf(wall func() time.Time) (now func() time.Duration, cpu bool) {
	if wall == nil {
		if threadCPUTold() {
			return threadCPUNow, true
		}
		wall = time.Now
	}
	start := wall()
	return func() time.Duration { return wall().Sub(start) }, false
}

// tick counts one iteration. It panics with an *Error, which the VM
// recovers and wraps, to stop a run that cannot otherwise be interrupted.
func (m *meter) tick() bool {
	m.iterations++
	if m.iterations > m.max {
		panic(budgetError(BudgetIterations, "over the limit of %d iterations: filter, map and the other predicates ran too often", m.max))
	}
	if rung := m.alarm.Rung(); rung || m.iterations%exprbound.TickCheckEvery == 0 {
		if err := m.check(); err != nil {
			panic(err)
		}
		if rung {
			m.alarm.Quiet(m.ctx)
		}
		switch {
		case m.running != nil && time.Since(m.turnSince) >= turns.Slice:
			// Its slice is over: give the core to the goroutines
			// waiting for it (Go preempts a goroutine that computes
			// after 10 ms only), then the turn to whoever waits, and
			// take the turn back in turn. The core goes first: a turn
			// given back wakes its next holder on this core, ahead of
			// every goroutine already waiting for one.
			runtime.Gosched()
			m.pause()
			if err := m.resume(); err != nil {
				panic(err)
			}
		case rung:
			m.arm()
		}
	}
	return true
}

// arm rings the alarm at the end of the time budget, or of the turn's
// slice when it ends first.
func (m *meter) arm() {
	d := m.timeout - m.elapsed()
	if m.running != nil {
		d = min(d, turns.Slice-time.Since(m.turnSince))
	}
	m.alarm.Arm(d)
}

// charge counts n bytes a host function's answer brought, or the error
// the program stops with.
func (m *meter) charge(n int64) error { return m.bytes.Charge(n) }

// threadCPUTold says, once for the process, whether the system tells a
// thread's CPU time.
var threadCPUTold = sync.OnceValue(func() bool { _, ok := threadCPU(); return ok })

// threadCPUNow is the calling thread's CPU time.
func threadCPUNow() time.Duration { d, _ := threadCPU(); return d }

// wallBackstop is how many times its time budget a program may run in
// wall time when the budget counts CPU time (meter).
const wallBackstop = 10

// check reports a cancelled call or a spent time budget.
func (m *meter) check() error {
	if err := m.ctx.Err(); err != nil {
		return err
	}
	if m.elapsed() > m.timeout {
		return budgetError(BudgetTime, "over the time budget of %v", m.timeout)
	}
	if m.cpu && m.wallElapsed() > wallBackstop*m.timeout {
		return budgetError(BudgetTime, "over the time budget of %v: the server was too busy to give it that much time within %v; retry later", m.timeout, wallBackstop*m.timeout)
	}
	return nil
}

func (m *meter) wallNow() time.Time {
	if m.wall == nil {
		return time.Now()
	}
	return m.wall()
}

// wallElapsed is the wall time of the call's running periods, on CPU
// time.
func (m *meter) wallElapsed() time.Duration {
	if !m.on {
		return m.wallUsed
	}
	return m.wallUsed + m.wallNow().Sub(m.wallSince)
}

func (m *meter) elapsed() time.Duration {
	if !m.on {
		return m.used
	}
	return m.used + m.now() - m.since
}

// resume starts a running period, once it is the call's turn to run (or
// the call's context ends: its error).
func (m *meter) resume() error {
	if m.running != nil {
		if err := m.running.Acquire(m.ctx, m.caller); err != nil {
			return err
		}
		m.turnSince = time.Now()
	}
	if m.cpu {
		runtime.LockOSThread()
		m.wallSince = m.wallNow()
	}
	m.since, m.on = m.now(), true
	m.arm()
	return nil
}

// pause ends a running period and gives up the call's turn.
func (m *meter) pause() {
	if m.on {
		m.alarm.Disarm()
		ran := m.now() - m.since
		if m.cpu {
			m.wallUsed += m.wallNow().Sub(m.wallSince)
			runtime.UnlockOSThread()
		}
		m.used += ran
		m.on = false
		if m.running != nil {
			m.running.Release(m.caller, ran)
		}
	}
}
