package main

import (
	"cmp"
	"context"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestMain lets the harness run this test binary again as its Go client
// worker and as its gRPC floor, as it does the command.
func TestMain(m *testing.M) {
	runAsChild()
	os.Exit(m.Run())
}

// TestHarness runs the whole benchmark with tiny counts, each workload:
// a real exprd child, its client (the Go worker, or node over
// @grpc/grpc-js) and node with xsai, against the scripted server.
func TestHarness(t *testing.T) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" { // a skip must not pass silently in CI
				t.Fatalf("%s is not installed: %v", tool, err)
			}
			t.Skipf("%s is not installed: %v", tool, err)
		}
	}
	tests := []struct {
		workload, client string
		cpuGoalNS        int64
	}{
		{"", "Go client", 0}, // the default
		{"client-tool", "node client", 500_000},
		{"client-tool-answer", "node client", 500_000},
	}
	for _, tc := range tests {
		t.Run(cmp.Or(tc.workload, "default"), func(t *testing.T) {
			rep, err := Run(context.Background(), Options{Workload: tc.workload, Rounds: 1, Turns: 2, Warmup: 1, Log: testWriter{t}})
			if err != nil {
				t.Fatal(err)
			}
			checkReport(t, rep)
			if want := cmp.Or(tc.workload, "http-tool"); rep.Workload != want {
				t.Errorf("workload %q, want %q", rep.Workload, want)
			}
			if rep.ExprdClient != tc.client || rep.CPUGoalNS != tc.cpuGoalNS {
				t.Errorf("exprd client %q, CPU goal %d ns; want %q, %d ns", rep.ExprdClient, rep.CPUGoalNS, tc.client, tc.cpuGoalNS)
			}
			// The node client's workloads measure the gRPC floor too (the
			// harness has checked that its turns carry exprd's events).
			if wantFloor := tc.client == "node client"; (rep.Floor != nil) != wantFloor {
				t.Errorf("floor %+v, want one: %v", rep.Floor, wantFloor)
			} else if wantFloor && (rep.Floor.VerifiedTurns != 2 || rep.Floor.MedianNS <= 0 || rep.FloorRatio <= 0) {
				t.Errorf("floor %+v, ratio %v: want 2 verified turns and times", rep.Floor, rep.FloorRatio)
			}
		})
	}
}

func checkReport(t *testing.T, rep *Report) {
	t.Helper()
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"benchmark", "workload", "rounds", "turns_per_round", "go_version", "node_version", "xsai_version",
		"node_modules", "exprd", "xsai", "ratio", "round_ratios", "ratio_min", "ratio_max", "goal", "goal_met",
		"cpu_goal_met", "cpu_ratio", "cpu_window", "scripted_requests", "fairness"} {
		if _, ok := got[k]; !ok {
			t.Errorf("the report has no %q: %s", k, b)
		}
	}
	for _, side := range []struct {
		name string
		s    Side
	}{{"exprd", rep.Exprd}, {"xsai", rep.XSAI}} {
		s := side.s
		if s.Turns != 2 || s.VerifiedTurns != 2 || s.ToolCalls != 3 {
			t.Errorf("%s: %d turns, %d verified, %d tool calls; want 2, 2, 3", side.name, s.Turns, s.VerifiedTurns, s.ToolCalls)
		}
		if s.MedianNS <= 0 || s.P10NS <= 0 || s.P90NS < s.MedianNS || len(s.RoundMediansNS) != 1 ||
			s.MinRoundMedianNS != s.RoundMediansNS[0] || s.MaxRoundMedianNS != s.RoundMediansNS[0] {
			t.Errorf("%s: times incomplete: %+v", side.name, s)
		}
		if s.ClientPeakRSSMiB <= 0 {
			t.Errorf("%s: no client peak RSS", side.name)
		}
		// Two turns may take less than one of exprd's 10 ms ticks, never
		// no CPU at all in the client.
		if s.ClientCPUPerTurnNS <= 0 || s.TotalCPUPerTurnNS != s.ClientCPUPerTurnNS+s.ServerCPUPerTurnNS {
			t.Errorf("%s: CPU per turn: client %d ns, server %d ns, total %d ns", side.name, s.ClientCPUPerTurnNS, s.ServerCPUPerTurnNS, s.TotalCPUPerTurnNS)
		}
	}
	if rep.Exprd.ServerPeakRSSMiB <= 0 {
		t.Error("no exprd peak RSS")
	}
	if len(rep.Exprd.RoundServerCPUPerTurnNS) != 1 || rep.Exprd.ServerCPUPerTurnNS < 0 || rep.XSAI.ServerCPUPerTurnNS != 0 {
		t.Errorf("exprd's CPU per turn %d ns (rounds %v), on the xsai side %d ns", rep.Exprd.ServerCPUPerTurnNS, rep.Exprd.RoundServerCPUPerTurnNS, rep.XSAI.ServerCPUPerTurnNS)
	}
	if rep.Ratio <= 0 || len(rep.RoundRatios) != 1 || rep.CPURatio <= 0 {
		t.Errorf("ratio %v, round ratios %v, CPU ratio %v", rep.Ratio, rep.RoundRatios, rep.CPURatio)
	}
	if rep.ScriptedRequests != 2*2*(2+1) {
		t.Errorf("%d scripted requests checked, want 12", rep.ScriptedRequests)
	}
	if rep.XSAIVersion == "" || rep.NodeModules["xsai"] != rep.XSAIVersion || rep.NodeModules["@grpc/grpc-js"] == "" {
		t.Errorf("xsai %q, node modules %v", rep.XSAIVersion, rep.NodeModules)
	}
}

// TestNodeModules checks which of package.json's dependencies
// nodeModules finds stale: missing, or installed at another version
// than package-lock.json pins.
func TestNodeModules(t *testing.T) {
	const lock = `{"packages": {
		"": {"dependencies": {"a": "1.0.0", "@s/b": "2.0.0"}},
		"node_modules/a": {"version": "1.0.0"},
		"node_modules/@s/b": {"version": "2.0.0"},
		"node_modules/indirect": {"version": "3.0.0"}}}`
	tests := []struct {
		name      string
		installed map[string]string // package → version in node_modules
		stale     []string
	}{
		{"as locked", map[string]string{"a": "1.0.0", "@s/b": "2.0.0"}, nil},
		{"none", nil, []string{"@s/b", "a"}},
		{"one missing", map[string]string{"a": "1.0.0"}, []string{"@s/b"}},
		{"another version", map[string]string{"a": "1.0.1", "@s/b": "2.0.0"}, []string{"a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, "package-lock.json"), lock)
			for name, v := range tc.installed {
				write(t, filepath.Join(dir, "node_modules", name, "package.json"), `{"version": "`+v+`"}`)
			}
			pinned, stale, err := nodeModules(dir)
			if err != nil {
				t.Fatal(err)
			}
			if want := map[string]string{"a": "1.0.0", "@s/b": "2.0.0"}; !maps.Equal(pinned, want) {
				t.Errorf("pinned %v, want %v", pinned, want)
			}
			if !slices.Equal(stale, tc.stale) {
				t.Errorf("stale %q, want %q", stale, tc.stale)
			}
		})
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
