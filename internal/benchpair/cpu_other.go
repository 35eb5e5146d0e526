//go:build !unix

package benchpair

import "time"

// cpuTime cannot be read here: no "cpu-ratio" is reported.
func cpuTime() time.Duration { return 0 }
