package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// watch samples the exprd process from /proc every 50 ms: its resident set
// (VmRSS; each phase keeps the largest sample), and whether it is still
// alive. Past the safety cap it stops the phase and kills the process
// (each phase has one of its own), so that a shared machine gets its
// memory back at once rather than at the requests' deadlines.
type watch struct {
	pid      int
	abortMiB float64
	kill     func()

	mu      sync.Mutex
	peakMiB float64
	onOver  context.CancelFunc // the phase to stop when RSS passes abortMiB
	aborted bool

	crashed atomic.Bool
}

const sampleEvery = 50 * time.Millisecond

// When the process exits, the watch stops the phase too; it counts as a
// crash unless the cap killed it.
func startWatch(ctx context.Context, pid int, abortMiB float64, kill func()) *watch {
	w := &watch{pid: pid, abortMiB: abortMiB, kill: kill}
	go func() {
		t := time.NewTicker(sampleEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			rss, alive := vmRSSMiB(pid)
			if !alive {
				w.mu.Lock()
				if !w.aborted {
					w.crashed.Store(true)
				}
				if w.onOver != nil {
					w.onOver()
				}
				w.mu.Unlock()
				return
			}
			w.sample(rss)
		}
	}()
	return w
}

func (w *watch) sample(rss float64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.peakMiB = max(w.peakMiB, rss)
	if w.abortMiB > 0 && rss > w.abortMiB && w.onOver != nil && !w.aborted {
		w.aborted = true
		w.onOver()
		w.kill()
	}
}

// begin starts a phase: the peak starts from the current resident set, and
// onOver is called once if it passes the safety cap.
func (w *watch) begin(onOver context.CancelFunc) {
	rss, _ := vmRSSMiB(w.pid)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.peakMiB, w.onOver, w.aborted = rss, onOver, false
}

// end returns the phase's largest sample and whether the cap stopped it.
func (w *watch) end() (peakMiB float64, aborted bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.onOver = nil
	return w.peakMiB, w.aborted
}

// vmRSSMiB reads VmRSS; alive is false once the process is gone or a zombie.
func vmRSSMiB(pid int) (float64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	var rss float64
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "State:"); ok && strings.HasPrefix(strings.TrimSpace(rest), "Z") {
			return 0, false
		}
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			rss = kb / 1024
		}
	}
	return rss, true
}

// clockTicks is USER_HZ, 100 on every Linux Go runs on.
const clockTicks = 100

// cpuSeconds is the process's user+system CPU time from /proc/<pid>/stat.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces: fields count from its closing ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	return (ut + st) / clockTicks, nil
}
