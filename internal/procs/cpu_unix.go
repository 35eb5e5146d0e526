//go:build unix

package procs

import (
	"syscall"
	"time"
)

// CPUTime is the CPU time the process has used, user and system, and
// whether it could be read.
func CPUTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
