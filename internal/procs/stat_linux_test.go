package procs

import (
	"os"
	"testing"
	"time"
)

// ProcessCPU sees the CPU time a process spends, as getrusage counts it,
// to the clock tick.
func TestProcessCPU(t *testing.T) {
	before, err := ProcessCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	spent, ok := CPUTime()
	if !ok {
		t.Skip("no getrusage here")
	}
	for x := 0; ; x++ {
		if now, _ := CPUTime(); now-spent >= 100*time.Millisecond {
			break
		}
		_ = x * x
	}
	after, err := ProcessCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if got := after - before; got < 100*time.Millisecond-2*clockTick {
		t.Errorf("ProcessCPU grew by %v while this process spent 100ms of CPU", got)
	}
	if _, err := ProcessCPU(-1); err == nil {
		t.Error("ProcessCPU(-1): no error")
	}
}
