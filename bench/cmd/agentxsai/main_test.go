package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMain lets the harness run this test binary again as its Go client
// worker, as it does the command.
func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) == "1" {
		if err := workerMain(os.Args[1:]); err != nil {
			os.Stderr.WriteString("agentxsai worker: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestHarness runs the whole benchmark with tiny counts: a real exprd
// child, its Go client worker and node with xsai, against the scripted
// server and the math provider.
func TestHarness(t *testing.T) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" { // a skip must not pass silently in CI
				t.Fatalf("%s is not installed: %v", tool, err)
			}
			t.Skipf("%s is not installed: %v", tool, err)
		}
	}
	rep, err := Run(context.Background(), Options{Rounds: 1, Turns: 2, Warmup: 1, Log: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"benchmark", "rounds", "turns_per_round", "go_version", "node_version", "xsai_version",
		"exprd", "xsai", "ratio", "round_ratios", "ratio_min", "ratio_max", "goal", "goal_met", "scripted_requests", "fairness"} {
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
	}
	if rep.Exprd.ServerPeakRSSMiB <= 0 {
		t.Error("no exprd peak RSS")
	}
	if rep.Ratio <= 0 || len(rep.RoundRatios) != 1 {
		t.Errorf("ratio %v, round ratios %v", rep.Ratio, rep.RoundRatios)
	}
	if rep.ScriptedRequests != 2*2*(2+1) {
		t.Errorf("%d scripted requests checked, want 12", rep.ScriptedRequests)
	}
	if rep.XSAIVersion == "" {
		t.Error("no xsai version")
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
