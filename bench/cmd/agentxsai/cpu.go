package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/exprd/exprd/internal/procs"
)

// clockTick is the unit of /proc/<pid>/stat's times: USER_HZ, 100 on
// every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// procCPU reads a process's user+system CPU time (all its threads, those
// that exited included) from /proc/<pid>/stat, to the clock tick.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces;
	// after it come state (field 3) ... utime (14) and stime (15).
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %v", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

// selfCPU is this process's user+system CPU time so far (0 where it cannot
// be read).
func selfCPU() time.Duration {
	d, _ := procs.CPUTime()
	return d
}
