package evaluator

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU is the CPU time the calling thread has used, and whether the
// system tells it (CLOCK_THREAD_CPUTIME_ID). The goroutine reading it must
// be locked to its thread (runtime.LockOSThread) between two readings
// for their difference to be its own.
func threadCPU() (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
