//go:build !unix

package procs

import "time"

// CPUTime cannot be read here: Run changes nothing.
func CPUTime() (time.Duration, bool) { return 0, false }
