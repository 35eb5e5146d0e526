package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestMain lets the harness run this test binary again as its Go client.
func TestMain(m *testing.M) {
	runAsClient()
	os.Exit(m.Run())
}

// TestHarness runs the whole benchmark with a few turns: the model server,
// a real exprd and its Go client, the direct client, and node with xsai.
func TestHarness(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs exprd and node")
	}
	if _, err := exec.LookPath("node"); err != nil {
		if os.Getenv("CI") != "" { // a skip must not pass silently in CI
			t.Fatalf("node is not installed: %v", err)
		}
		t.Skipf("node is not installed: %v", err)
	}
	if _, err := os.Stat("../../xsai/node_modules/xsai"); err != nil {
		t.Skipf("xsai is not installed (npm ci in bench/xsai): %v", err)
	}
	const n = 8
	rep, err := Run(context.Background(), Options{N: []int{n}, ModuleDir: "../../..", PhaseTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	row := rep.Rows[0]
	for name, p := range map[string]Phase{"direct": row.Direct, "exprd": row.Exprd, "xsai": row.XSAI, "xsai streamText": row.XSAIStream} {
		if p.Client.Verified != n || p.Client.Errors != 0 {
			t.Errorf("%s: %d of %d turns verified, %d failed: %s", name, p.Client.Verified, n, p.Client.Errors, p.Client.FirstError)
		}
		if p.ModelConns < n {
			t.Errorf("%s: the model server accepted %d connections for %d turns at once", name, p.ModelConns, n)
		}
	}
	for name, p := range map[string]Phase{"direct": row.Direct, "exprd": row.Exprd, "xsai streamText": row.XSAIStream} {
		if p.Client.Deltas != n*textDeltas || p.Client.Latency.N != n*textDeltas || p.Client.Latency.P50 <= 0 {
			t.Errorf("%s: %d deltas, latency %+v; want %d", name, p.Client.Deltas, p.Client.Latency, n*textDeltas)
		}
	}
	// Every exprd turn held its goroutines at the gate, and the breakdowns
	// were read.
	if row.Exprd.GoroutinesPerTurn < 1 || row.Exprd.GateRSSMiB <= 0 || row.XSAI.GateRSSMiB <= 0 || len(row.Goroutines) == 0 {
		t.Errorf("exprd at the gate: %+v; goroutines %v; xsai %+v", row.Exprd, row.Goroutines, row.XSAI)
	}
	if rep.XSAIVersion == "" || len(rep.Goals) == 0 {
		t.Errorf("report %+v", rep)
	}
	if err := rep.plot(t.TempDir() + "/inflight.png"); err != nil {
		t.Fatal(err)
	}
}

func TestParseHeap(t *testing.T) {
	// The text form as runtime/pprof writes it (debug=1), rate 512 KiB
	// (written twice over, as the legacy format has it): one record of the
	// model's HTTP client, one of exprd's, one of the runtime's only, one
	// freed; then the MemStats.
	const profile = "heap profile: 3: 12288 [9: 40960] @ heap/1048576\n" +
		"1: 4096 [2: 8192] @ 0x1 0x2 0x3\n" +
		"#\t0x1\tbufio.NewReaderSize+0x1\t/go/src/bufio/bufio.go:60\n" +
		"#\t0x2\tnet/http.(*Transport).dialConn+0x2\t/go/src/net/http/transport.go:1\n" +
		"#\t0x3\tnet/http.(*Transport).dialConnFor+0x3\t/go/src/net/http/transport.go:2\n" +
		"\n" +
		"1: 4096 [1: 4096] @ 0x4 0x5\n" +
		"#\t0x4\truntime.mallocgc+0x4\t/go/src/runtime/malloc.go:1\n" +
		"#\t0x5\tgithub.com/exprd/exprd/server.(*turn).record+0x5\t/x/server/turn.go:1\n" +
		"\n" +
		"1: 4096 [6: 28672] @ 0x6\n" +
		"#\t0x6\truntime.malg+0x6\t/go/src/runtime/proc.go:1\n" +
		"\n" +
		"0: 0 [0: 0] @ 0x7\n" +
		"#\t0x7\tmain.gone+0x7\t/x/main.go:1\n" +
		"\n# runtime.MemStats\n# Alloc = 1\n# HeapInuse = 8192\n# Stack = 4096 / 16384\n# PauseNs = [0 0]\n"
	s, err := parseHeap(strings.NewReader(profile))
	if err != nil {
		t.Fatal(err)
	}
	one := scaled(1, 4096, 524288)
	for _, tc := range []struct {
		where, site string
	}{
		{"the model's HTTP connection (net/http client)", "net/http.(*Transport).dialConn"},
		{"exprd server", "github.com/exprd/exprd/server.(*turn).record"},
		{"runtime and the standard library's generic code", "runtime.malg"},
	} {
		if s.where[tc.where] != one || s.site[tc.site] != one {
			t.Errorf("%s: %v, site %s: %v; want %v each", tc.where, s.where[tc.where], tc.site, s.site[tc.site], one)
		}
	}
	if len(s.where) != 3 {
		t.Errorf("where: %v, want 3 places", s.where)
	}
	if s.memStats["HeapInuse"] != 8192 || s.memStats["Stack"] != 4096 {
		t.Errorf("MemStats %v, want HeapInuse 8192 and Stack (in use) 4096", s.memStats)
	}
	// A 4 KiB object is sampled with probability 1-exp(-4096/524288).
	if one < 4096*120 || one > 4096*135 {
		t.Errorf("a sampled 4 KiB record scales to %v bytes, want about 128 times 4096", one)
	}
}

func TestParseGoroutines(t *testing.T) {
	const profile = "goroutine profile: total 5\n" +
		"3 @ 0x1 0x2\n" +
		"#\t0x1\truntime.gopark+0x1\t/go/src/runtime/proc.go:1\n" +
		"#\t0x2\tnet/http.(*persistConn).readLoop+0x2\t/go/src/net/http/transport.go:1\n" +
		"\n" +
		"2 @ 0x3\n" +
		"#\t0x3\tgithub.com/exprd/exprd/server.receive[...]+0x3\t/x/server/stream.go:1\n"
	g, err := parseGoroutines(strings.NewReader(profile))
	if err != nil {
		t.Fatal(err)
	}
	if g["net/http.(*persistConn).readLoop"] != 3 || g["github.com/exprd/exprd/server.receive[...]"] != 2 || len(g) != 2 {
		t.Errorf("goroutines %v", g)
	}
}

func TestShares(t *testing.T) {
	before := map[string]float64{"a": 1024, "b": 0}
	at := map[string]float64{"a": 1024 + 30*1024, "b": 70 * 1024, "c": 0.5 * 1024}
	got := shares(before, at, 10, 1, 1024)
	want := []Share{{Where: "b", PerTurn: 7, Percent: 69.7}, {Where: "the rest", PerTurn: 3.05, Percent: 30.3}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("shares: %+v, want %+v", got, want)
	}
}

func TestQuantiles(t *testing.T) {
	for _, tc := range []struct {
		in   []int64
		want Quantiles
	}{
		{nil, Quantiles{}},
		{[]int64{5}, Quantiles{N: 1, P50: 5, P90: 5, P99: 5, Max: 5, Mean: 5}},
		{[]int64{4, 1, 3, 2, 10}, Quantiles{N: 5, P50: 3, P90: 10, P99: 10, Max: 10, Mean: 4}},
	} {
		if got := quantilesOf(tc.in); got != tc.want {
			t.Errorf("quantilesOf(%v) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}
