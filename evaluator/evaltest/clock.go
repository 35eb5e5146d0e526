package evaltest

import (
	"sync/atomic"
	"time"
)

// ClockStep is how far a StepClock moves at each read. The meter reads the
// clock when evaluation starts and stops and every 1,024 iterations, so a
// case's time is a count of its work, the same on a loaded machine as on
// an idle one: 20 µs a read puts the million iterations of the default
// budget at 20 ms, within the default time budget of 100 ms, and the
// 810,900 of the case that must run out of 5 ms at 16 ms.
const ClockStep = 20 * time.Microsecond

// StepClock returns a clock that moves ClockStep on at every read, and only
// then: give each case a clock of its own (evaluator.WithClock), since
// another case's reads would move it too.
func StepClock() func() time.Time {
	var reads atomic.Int64
	start := time.Date(2025, time.January, 1, 0, 0, 0, 0, time.UTC)
	return func() time.Time { return start.Add(time.Duration(reads.Add(1)) * ClockStep) }
}
