package main

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

func TestCgroupMemoryLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  int64
		ok    bool
	}{
		{"v2", map[string]string{"memory.max": "2147483648\n"}, 2 << 30, true},
		{"v2 without a limit", map[string]string{"memory.max": "max\n"}, 0, false},
		{"v1", map[string]string{"memory/memory.limit_in_bytes": "536870912\n"}, 512 << 20, true},
		{"v1 without a limit", map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712\n"}, 0, false},
		{"v2 wins over v1", map[string]string{"memory.max": "1073741824", "memory/memory.limit_in_bytes": "536870912"}, 1 << 30, true},
		{"neither", nil, 0, false},
		{"garbage", map[string]string{"memory.max": "lots"}, 0, false},
	} {
		root := t.TempDir()
		for name, body := range tc.files {
			path := filepath.Join(root, name)
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		got, ok := cgroupMemoryLimit(root)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: got %d, %v; want %d, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// GOMEMLIMIT from the environment wins; else 90% of the cgroup's limit.
func TestSetMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(math.MaxInt64)
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "memory.max"), []byte("1000000000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := setMemoryLimit(root, func(string) string { return "1GiB" }); got != 0 {
		t.Errorf("with GOMEMLIMIT set: got %d, want 0 (left to the runtime)", got)
	}
	if got := setMemoryLimit(root, func(string) string { return "" }); got != 900000000 {
		t.Errorf("from the cgroup: got %d, want 900000000", got)
	}
	if got := debug.SetMemoryLimit(-1); got != 900000000 {
		t.Errorf("the runtime's limit: got %d, want 900000000", got)
	}
}

// With no soft limit set, the memory budget sets one at 85% of its line;
// one set (GOMEMLIMIT, the cgroup's) is left as it is.
func TestSetMemoryLimitFromLine(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	debug.SetMemoryLimit(math.MaxInt64)
	if got := setMemoryLimitFromLine(1000); got != 850 || debug.SetMemoryLimit(-1) != 850 {
		t.Errorf("with none set: got %d, the runtime's %d; want 850", got, debug.SetMemoryLimit(-1))
	}
	if got := setMemoryLimitFromLine(5000); got != 0 || debug.SetMemoryLimit(-1) != 850 {
		t.Errorf("with one set: got %d, the runtime's %d; want 0, 850 left as it was", got, debug.SetMemoryLimit(-1))
	}
}

func TestMemoryBudgetSize(t *testing.T) {
	dir := t.TempDir()
	cgroup := filepath.Join(dir, "cgroup")
	if err := os.MkdirAll(cgroup, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cgroup, "memory.max"), []byte("1000000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	meminfo := filepath.Join(dir, "meminfo")
	if err := os.WriteFile(meminfo, []byte("MemTotal:        1000 kB\nMemFree:  10 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name            string
		flagged         int64
		cgroup, meminfo string
		want            int64
	}{
		{"the flag wins", 123, cgroup, meminfo, 123},
		{"70% of the cgroup's limit", 0, cgroup, meminfo, 700000},
		{"70% of the machine's memory", 0, filepath.Join(dir, "none"), meminfo, 716800},
		{"1 GiB when nothing says", 0, filepath.Join(dir, "none"), filepath.Join(dir, "none"), 1 << 30},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if debug.SetMemoryLimit(-1) != math.MaxInt64 && tt.flagged == 0 && tt.cgroup != cgroup {
				t.Skip("GOMEMLIMIT is set: it would be the source")
			}
			if got, _ := memoryBudget(tt.flagged, tt.cgroup, tt.meminfo); got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
}
