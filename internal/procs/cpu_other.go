//go:build !unix

package procs

import "time"

// cpuTime cannot be read here: Run changes nothing.
func cpuTime() (time.Duration, bool) { return 0, false }
