package main

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// memoryLimitShare is the part of the cgroup's memory limit that the Go
// runtime's soft limit is set to when GOMEMLIMIT is not: the rest is room
// for what the runtime does not count (stacks in flight, the binary, page
// cache) before the OOM killer would act.
const memoryLimitShare = 0.9

// cgroupMemoryLimit is the memory limit of the cgroup the process runs in,
// read under root (normally /sys/fs/cgroup): cgroup v2's memory.max, else
// v1's memory/memory.limit_in_bytes. ok is false when there is none
// ("max", or v1's huge "unlimited" value) or it cannot be read.
func cgroupMemoryLimit(root string) (limit int64, ok bool) {
	for _, f := range []string{"memory.max", filepath.Join("memory", "memory.limit_in_bytes")} {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(data))
		if s == "max" {
			return 0, false
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 || n >= 1<<60 {
			return 0, false
		}
		return n, true
	}
	return 0, false
}

// setMemoryLimit sets the Go runtime's soft memory limit from the cgroup's
// when the environment does not set GOMEMLIMIT, so that exprd collects
// garbage harder as it nears its limit instead of meeting the OOM killer.
// It returns the limit set, 0 when it set none.
func setMemoryLimit(root string, getenv func(string) string) int64 {
	if getenv("GOMEMLIMIT") != "" {
		return 0
	}
	limit, ok := cgroupMemoryLimit(root)
	if !ok {
		return 0
	}
	soft := int64(float64(limit) * memoryLimitShare)
	debug.SetMemoryLimit(soft)
	return soft
}

// lineSoftShare is the part of the overload line (the memory budget and
// a quarter) the runtime's soft limit is set to when neither GOMEMLIMIT
// nor a cgroup sets one: without a soft limit the GC lets the heap grow to
// twice what is live (GOGC), and the resident set passed the line by half
// again; at the line itself, garbage took it 10-20 MiB past. Past the
// soft limit the GC lets the heap run on while it is behind: in the
// hostile run at 90% of the line, the resident set passed the line by up
// to 2% in four phases of nine (39 MiB past the limit); at 85%, it stayed
// under in every phase since (ten, 295-316 MiB against 320).
const lineSoftShare = 0.85

// setMemoryLimitFromLine sets the runtime's soft memory limit to
// lineSoftShare of line when none is set (GOMEMLIMIT, or the cgroup's by
// setMemoryLimit), and returns the limit set, 0 when it set none.
func setMemoryLimitFromLine(line int64) int64 {
	if soft := debug.SetMemoryLimit(-1); soft > 0 && soft < math.MaxInt64 {
		return 0
	}
	soft := int64(float64(line) * lineSoftShare)
	debug.SetMemoryLimit(soft)
	return soft
}

// softMemoryLimit is the runtime's soft memory limit, 0 when there is
// none.
func softMemoryLimit() int64 {
	if soft := debug.SetMemoryLimit(-1); soft > 0 && soft < math.MaxInt64 {
		return soft
	}
	return 0
}

// memoryBudgetShare is the part of the memory exprd may use that its
// memory budget takes: the rest is the runtime, connections, messages in
// flight, compiled programs and garbage not yet collected.
const memoryBudgetShare = 0.7

// memoryBudget is the memory budget's size: flagged when positive, else
// memoryBudgetShare of the cgroup's limit, else of the soft limit the
// runtime has (GOMEMLIMIT), else of the machine's memory (meminfo, as
// /proc/meminfo reads). from says which.
func memoryBudget(flagged int64, cgroupRoot, meminfo string) (n int64, from string) {
	if flagged > 0 {
		return flagged, "--memory-budget"
	}
	if limit, ok := cgroupMemoryLimit(cgroupRoot); ok {
		return int64(float64(limit) * memoryBudgetShare), "the cgroup's memory limit"
	}
	if soft := debug.SetMemoryLimit(-1); soft > 0 && soft < math.MaxInt64 {
		return int64(float64(soft) * memoryBudgetShare), "GOMEMLIMIT"
	}
	if total, ok := memTotal(meminfo); ok {
		return int64(float64(total) * memoryBudgetShare), "the machine's memory"
	}
	return 1 << 30, "a default of 1 GiB (no limit found)"
}

// memTotal reads MemTotal from a /proc/meminfo file.
func memTotal(path string) (int64, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "MemTotal:" && f[2] == "kB" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err == nil && kb > 0
		}
	}
	return 0, false
}
