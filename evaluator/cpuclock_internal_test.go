package evaluator

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/exprd/exprd/internal/exprbound"
)

// The time budget's clock is the CPU time of the thread the program runs
// on: time it does not run (here asleep; on a busy server, waiting for Go
// to schedule it) is not counted, time it computes is. With the tool's
// clock it is that clock.
func TestTimeBudgetClockIsTheThreadsCPUTime(t *testing.T) {
	now, cpu := clockOf(nil)
	if !cpu {
		t.Skip("this system does not tell a thread's CPU time: the budget reads the wall clock")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t0 := now()
	time.Sleep(200 * time.Millisecond)
	if d := now() - t0; d > 100*time.Millisecond {
		t.Errorf("200 ms asleep counted %v, want less than half of it", d)
	}
	t1 := now()
	for now()-t1 < 20*time.Millisecond { // ends only because computing counts
	}
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	wall, cpu := clockOf(func() time.Time { at = at.Add(time.Second); return at })
	if cpu || wall() != time.Second || wall() != 2*time.Second {
		t.Errorf("with the tool's clock: not the clock's reading")
	}
}

// On CPU time, a program stops once its running periods have taken
// wallBackstop times its budget in wall time, however little CPU time
// they had: at it, it goes on; one nanosecond past it, it stops.
func TestWallBackstopOnCPUTime(t *testing.T) {
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	m := &meter{ctx: context.Background(), timeout: 100 * time.Millisecond, cpu: true,
		now:  func() time.Duration { return 0 }, // no CPU time at all
		wall: func() time.Time { return at }, alarm: &exprbound.Alarm{}}
	if err := m.resume(); err != nil {
		t.Fatal(err)
	}
	at = at.Add(wallBackstop * m.timeout / 2)
	m.pause() // half of it in a first running period
	if err := m.resume(); err != nil {
		t.Fatal(err)
	}
	defer m.pause()
	at = at.Add(wallBackstop * m.timeout / 2)
	if err := m.check(); err != nil {
		t.Fatalf("at the backstop: %v", err)
	}
	at = at.Add(time.Nanosecond)
	if err := m.check(); err == nil || !strings.Contains(err.Error(), "too busy") {
		t.Fatalf("one nanosecond past the backstop: %v, want over the time budget", err)
	}
}
