package main

import (
	"time"

	"github.com/exprd/exprd/internal/procs"
)

// selfCPU is this process's user+system CPU time so far (0 where it cannot
// be read).
func selfCPU() time.Duration {
	d, _ := procs.CPUTime()
	return d
}
