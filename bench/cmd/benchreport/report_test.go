package main

import (
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sampleResults is a run with every scale benchmark and one pair.
func sampleResults(t *testing.T) results {
	t.Helper()
	var out strings.Builder
	out.WriteString("pkg: github.com/exprd/exprd/bench\n")
	for _, size := range stateSizesNames {
		for i, kind := range []string{"snapshot", "point", "scan"} {
			out.WriteString("BenchmarkStateSize/" + size + "/" + kind + "-2 10 " + []string{"1000", "2000", "3000"}[i] + " ns/op\n")
		}
	}
	for _, n := range []string{"1", "4", "16", "50"} {
		out.WriteString("BenchmarkSteps/steps=" + n + "-2 10 " + n + "000 ns/op\n")
	}
	out.WriteString("BenchmarkEngines/small/exprd-2 10 1200 ns/op 5 allocs/op\nBenchmarkEngines/small/expr-2 10 1000 ns/op 4 allocs/op\n")
	out.WriteString("pkg: github.com/exprd/exprd/codemode\nBenchmarkChain/interleaved-2 10 5000 ns/op 1.10 cpu-ratio 1.12 ratio\n")
	r := results{}
	if err := r.parse(strings.NewReader(out.String())); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestMarkdown(t *testing.T) {
	rep := report{results: sampleResults(t), options: options{count: 1, benchtime: "1x"}}
	md := rep.markdown()
	for _, want := range []string{
		"| one-step call (the ids of the 5 cheapest of 20 products)", "**1.20×** | ≤ 1.3× — met |",
		"| the same two sides alternating within each iteration (`codemode:Chain/interleaved`): wall time, and CPU time of the process | | | **1.12×** (1.12–1.12); CPU 1.10× | ≤ 1.15× — met |",
		"| the same two sides alternating within each iteration (`agent:TwoStepTurn/interleaved`) | | | missing | ≤ 1.1× |",
		"| 10,000-item `filter`/`map` step through `evaluator/` vs a bare run on a reused `vm.VM` | missing | missing | — | ≤ 1.1× |",
		"| 10MB | 1 µs (1 µs–1 µs) | 2 µs (2 µs–2 µs) | 3 µs (3 µs–3 µs) |",
		"| 50 | 50 µs (50 µs–50 µs) | 1 µs |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
}

func TestRewrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "B.md")
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"intro\n" + beginMarker + "\nold\n" + endMarker + "\nnotes\n", "intro\n" + beginMarker + "\nnew\n" + endMarker + "\nnotes\n", true},
		{"no markers\n", "no markers\n", false},
		{endMarker + "\n" + beginMarker + "\n", endMarker + "\n" + beginMarker + "\n", false},
	}
	for _, tc := range tests {
		if err := os.WriteFile(path, []byte(tc.in), 0o644); err != nil {
			t.Fatal(err)
		}
		err := rewrite(path, "new\n")
		if (err == nil) != tc.ok {
			t.Errorf("rewrite(%q) error %v, want ok %v", tc.in, err, tc.ok)
		}
		got, _ := os.ReadFile(path)
		if string(got) != tc.want {
			t.Errorf("rewrite(%q) wrote %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestPlot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "scale.png")
	if err := (report{results: sampleResults(t)}).plot(path); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() < 500 || b.Dy() < 200 {
		t.Fatalf("the plot is %v", b)
	}
}

// clientToolJSON is bench/cmd/agentxsai's report of the client-tool
// workload, cut to what the report reads; ratio and CPU are filled in.
const clientToolJSON = `{"workload": "client-tool", "exprd_client": "node client", "rounds": 6, "turns_per_round": 300, "warmup_per_round": 1000,
	"node_version": "v20.20.2", "xsai_version": "0.4.4", "node_modules": {"@grpc/grpc-js": "1.14.7", "xsai": "0.4.4"},
	"exprd": {"median_ns": 1650000, "min_round_median_ns": 1600000, "max_round_median_ns": 1700000, "turns": 1800, "verified_turns": 1800,
		"client_peak_rss_mib": 70, "server_peak_rss_mib": 30, "total_peak_rss_mib": 100,
		"client_cpu_per_turn_ns": 500000, "server_cpu_per_turn_ns": %d, "total_cpu_per_turn_ns": %d},
	"xsai": {"median_ns": 1250000, "min_round_median_ns": 1200000, "max_round_median_ns": 1300000, "turns": 1800, "verified_turns": 1800,
		"client_peak_rss_mib": 75, "total_peak_rss_mib": 75, "client_cpu_per_turn_ns": 900000, "total_cpu_per_turn_ns": 900000},
	"grpc_floor": {"median_ns": 800000, "min_round_median_ns": 750000, "max_round_median_ns": 850000, "turns": 1800, "verified_turns": 1800,
		"client_peak_rss_mib": 70, "client_cpu_per_turn_ns": 1100000},
	"ratio": %g, "ratio_min": 1.3, "ratio_max": 1.4, "goal": 1, "cpu_goal_ns": 400000, "cpu_ratio": 1.78, "floor_ratio": 0.64}`

func TestXSAISection(t *testing.T) {
	httpTool := xsaiReport{Workload: "http-tool", ExprdClient: "Go client", Rounds: 5, TurnsPerRound: 50, XSAIVersion: "0.4.4", NodeVersion: "v20.20.2",
		Exprd: xsaiSide{MedianNS: 2e6, MinRoundMedianNS: 2e6, MaxRoundMedianNS: 2e6, Turns: 250, VerifiedTurns: 250, ServerCPUPerTurnNS: 1e6, ClientCPUPerTurnNS: 3e5, TotalCPUPerTurnNS: 1.3e6},
		XSAI:  xsaiSide{MedianNS: 3e6, MinRoundMedianNS: 3e6, MaxRoundMedianNS: 3e6, Turns: 250, VerifiedTurns: 250, TotalCPUPerTurnNS: 2e6},
		Ratio: 0.667, RatioMin: 0.6, RatioMax: 0.7, Goal: 1}
	tests := []struct {
		name         string
		ratio        float64
		serverCPU    int // ns per turn
		noClientTool bool
		want         []string
	}{
		{name: "goals not met", ratio: 1.35, serverCPU: 1100000, want: []string{
			"**HTTP tool** (`--workload http-tool`)",
			"| exprd | 2 ms (2 ms–2 ms) | 250/250 | 1.3 ms: exprd 1 ms + Go client 300 µs |",
			"exprd/xsai: **0.67×** (rounds 0.60–0.70), goal ≤ 1× — met.",
			"exprd's `AgentLoop` is driven from Node over `@grpc/grpc-js` 1.14.7",
			"xsai 0.4.4, Node v20.20.2; 6 rounds of 300 turns per side, each after 1000 warm-up turns.",
			"| exprd | 1.65 ms (1.6 ms–1.7 ms) | 1800/1800 | 1.6 ms: exprd 1.1 ms + node client 500 µs | 100 MiB: exprd 30 MiB + node client 70 MiB |",
			"| xsai | 1.25 ms (1.2 ms–1.3 ms) | 1800/1800 | 900 µs: node | 75 MiB: node |",
			"exprd/xsai: **1.35×** (rounds 1.30–1.40), goal ≤ 1× — **not met**.",
			"exprd's CPU per turn: **1.1 ms**, goal ≤ 400 µs — **not met**.",
			"against xsai's Node: 1.6 ms vs 900 µs (1.78×).",
			"| gRPC floor: the node client against a stub AgentLoop server that does no work (the same messages, no model) | 800 µs (750 µs–850 µs) | 1800/1800 | 1.1 ms: node client | 70 MiB: node client |",
			"The gRPC floor alone is 0.64× xsai's whole turn; exprd's turn takes 850 µs more than the floor",
			"**Client-run tool, answer only** (`--workload client-tool-answer`)",
			"exprd/xsai: **0.90×** (rounds 0.80–0.95), goal ≤ 1× — met.",
			"exprd's CPU per turn: **1 ms**, goal ≤ 400 µs — **not met**.",
		}},
		{name: "goals met", ratio: 0.95, serverCPU: 400000, want: []string{
			"exprd/xsai: **0.95×** (rounds 1.30–1.40), goal ≤ 1× — met.",
			"exprd's CPU per turn: **400 µs**, goal ≤ 400 µs — met.",
		}},
		{name: "no client-tool report", noClientTool: true, want: []string{
			"exprd/xsai: **0.67×** (rounds 0.60–0.70), goal ≤ 1× — met.",
			"answered with `tool_output` on the stream; xsai runs it in `generateText`'s loop. Missing: no report from this run.\n",
			"the answer without the play-by-play. Missing: no report from this run.\n",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rep := report{xsai: httpTool}
			if !tc.noClientTool {
				j := fmt.Sprintf(clientToolJSON, tc.serverCPU, tc.serverCPU+500000, tc.ratio)
				if err := json.Unmarshal([]byte(j), &rep.xsaiClientTool); err != nil {
					t.Fatal(err)
				}
				rep.xsaiClientToolAnswer = rep.xsaiClientTool
				rep.xsaiClientToolAnswer.Workload = "client-tool-answer"
				rep.xsaiClientToolAnswer.Ratio, rep.xsaiClientToolAnswer.RatioMin, rep.xsaiClientToolAnswer.RatioMax = 0.9, 0.8, 0.95
				rep.xsaiClientToolAnswer.Exprd.ServerCPUPerTurnNS = 1e6
			}
			md := rep.xsaiSection()
			for _, want := range tc.want {
				if !strings.Contains(md, want) {
					t.Errorf("the section lacks %q:\n%s", want, md)
				}
			}
			if tc.noClientTool && strings.Contains(md, "CPU per turn: **") {
				t.Errorf("the section has a CPU goal line without a client-tool report:\n%s", md)
			}
		})
	}
}
