package main

import (
	"fmt"
	"strings"
)

// xsaiReport is the part of bench/cmd/agentxsai's JSON the report uses,
// one per workload.
type xsaiReport struct {
	Workload      string            `json:"workload"`
	ExprdClient   string            `json:"exprd_client"`
	Rounds        int               `json:"rounds"`
	TurnsPerRound int               `json:"turns_per_round"`
	WarmupPerRnd  int               `json:"warmup_per_round"`
	NodeVersion   string            `json:"node_version"`
	XSAIVersion   string            `json:"xsai_version"`
	NodeModules   map[string]string `json:"node_modules"`
	Exprd         xsaiSide          `json:"exprd"`
	XSAI          xsaiSide          `json:"xsai"`
	Floor         *xsaiSide         `json:"grpc_floor"`
	FloorRatio    float64           `json:"floor_ratio"`
	Share         float64           `json:"share"`
	ShareMin      float64           `json:"share_min"`
	ShareMax      float64           `json:"share_max"`
	ShareGoal     float64           `json:"share_goal"`
	Ratio         float64           `json:"ratio"`
	RatioMin      float64           `json:"ratio_min"`
	RatioMax      float64           `json:"ratio_max"`
	Goal          float64           `json:"goal"`
	CPUGoalNS     float64           `json:"cpu_goal_ns"`
	CPURatio      float64           `json:"cpu_ratio"`
}

type xsaiSide struct {
	MedianNS           float64 `json:"median_ns"`
	MinRoundMedianNS   float64 `json:"min_round_median_ns"`
	MaxRoundMedianNS   float64 `json:"max_round_median_ns"`
	Turns              int     `json:"turns"`
	VerifiedTurns      int     `json:"verified_turns"`
	ClientPeakRSSMiB   float64 `json:"client_peak_rss_mib"`
	ServerPeakRSSMiB   float64 `json:"server_peak_rss_mib"`
	TotalPeakRSSMiB    float64 `json:"total_peak_rss_mib"`
	ClientCPUPerTurnNS float64 `json:"client_cpu_per_turn_ns"`
	ServerCPUPerTurnNS float64 `json:"server_cpu_per_turn_ns"`
	TotalCPUPerTurnNS  float64 `json:"total_cpu_per_turn_ns"`
}

// xsaiSection renders the workloads of bench/cmd/agentxsai: the HTTP tool
// (agentxsai.json) and the client-run tool with every event
// (agentxsai-clienttool.json) and with the answer only
// (agentxsai-clienttool-answer.json).
func (r report) xsaiSection() string {
	var b strings.Builder
	b.WriteString("\n### AgentLoop vs xsai\n\nThe same two-step turn (the model calls a tool, then answers) against the same scripted OpenAI-compatible server: exprd's `AgentLoop` in a separate exprd process, and npm `xsai`'s `generateText` in Node, in the calling process (`bench/cmd/agentxsai`, rounds alternating the sides, every turn verified). CPU per turn is over the measured turns, warm-up excluded: exprd's from its process's utime+stime, each client's its own.\n")

	x := r.xsai
	fmt.Fprintf(&b, "\n**HTTP tool** (`--workload http-tool`): the math provider's `add`, called over HTTP by exprd's UTCP executor and by the tool's `fetch` in xsai; exprd driven through the Go client from another process.")
	r.xsaiWorkload(&b, x)

	x = r.xsaiClientTool
	fmt.Fprintf(&b, "\n**Client-run tool** (`--workload client-tool`): `get_weather` runs in the calling Node process on both sides. exprd's `AgentLoop` is driven from Node over `@grpc/grpc-js` %s, the tool declared client-run (`EXECUTOR_CLIENT`) and answered with `tool_output` on the stream; xsai runs it in `generateText`'s loop.",
		orUnknown(x.NodeModules["@grpc/grpc-js"]))
	r.xsaiWorkload(&b, x)
	xsaiCPU(&b, x)

	x = r.xsaiClientToolAnswer
	b.WriteString("\n**Client-run tool, answer only** (`--workload client-tool-answer`): the same turn, exprd's `Start` naming every informational event in `omit_events`, so that exprd sends the tool request and `done` (2 messages instead of 9): the answer without the play-by-play.")
	r.xsaiWorkload(&b, x)
	xsaiCPU(&b, x)
	return b.String()
}

// xsaiCPU renders a client-run tool workload's CPU line.
func xsaiCPU(b *strings.Builder, x xsaiReport) {
	if x.Rounds > 0 {
		fmt.Fprintf(b, "exprd's CPU per turn: **%s**, goal %s. The whole CPU of a turn, exprd's and its Node client's against xsai's Node: %s vs %s (%.2f×).\n",
			dur(x.Exprd.ServerCPUPerTurnNS), cpuGoal(x.CPUGoalNS, x.Exprd.ServerCPUPerTurnNS),
			dur(x.Exprd.TotalCPUPerTurnNS), dur(x.XSAI.TotalCPUPerTurnNS), x.CPURatio)
	}
}

// xsaiWorkload renders one workload's table and ratio, after the
// sentence that introduces it.
func (r report) xsaiWorkload(b *strings.Builder, x xsaiReport) {
	if x.Rounds == 0 {
		b.WriteString(" Missing: no report from this run.\n")
		return
	}
	fmt.Fprintf(b, " xsai %s, Node %s; %d rounds of %d turns per side, each after %d warm-up turns.\n\n", x.XSAIVersion, x.NodeVersion, x.Rounds, x.TurnsPerRound, x.WarmupPerRnd)
	client := orUnknown(x.ExprdClient)
	b.WriteString("| side | wall time per turn (median; round medians' range) | turns verified | CPU per turn | peak RSS |\n|---|---|---|---|---|\n")
	fmt.Fprintf(b, "| exprd | %s (%s–%s) | %d/%d | %s: exprd %s + %s %s | %.0f MiB: exprd %.0f MiB + %s %.0f MiB |\n",
		dur(x.Exprd.MedianNS), dur(x.Exprd.MinRoundMedianNS), dur(x.Exprd.MaxRoundMedianNS), x.Exprd.VerifiedTurns, x.Exprd.Turns,
		cpuDur(x.Exprd.TotalCPUPerTurnNS), cpuDur(x.Exprd.ServerCPUPerTurnNS), client, cpuDur(x.Exprd.ClientCPUPerTurnNS),
		x.Exprd.TotalPeakRSSMiB, x.Exprd.ServerPeakRSSMiB, client, x.Exprd.ClientPeakRSSMiB)
	fmt.Fprintf(b, "| xsai | %s (%s–%s) | %d/%d | %s: node | %.0f MiB: node |\n",
		dur(x.XSAI.MedianNS), dur(x.XSAI.MinRoundMedianNS), dur(x.XSAI.MaxRoundMedianNS), x.XSAI.VerifiedTurns, x.XSAI.Turns,
		cpuDur(x.XSAI.TotalCPUPerTurnNS), x.XSAI.TotalPeakRSSMiB)
	if f := x.Floor; f != nil {
		fmt.Fprintf(b, "| gRPC floor: the %s against a stub AgentLoop server that does no work (the same messages, no model) | %s (%s–%s) | %d/%d | %s: %s | %.0f MiB: %s |\n",
			client, dur(f.MedianNS), dur(f.MinRoundMedianNS), dur(f.MaxRoundMedianNS), f.VerifiedTurns, f.Turns,
			cpuDur(f.ClientCPUPerTurnNS), client, f.ClientPeakRSSMiB, client)
	}
	fmt.Fprintf(b, "\nexprd/xsai: **%.2f×** (rounds %.2f–%.2f), goal %s.\n", x.Ratio, x.RatioMin, x.RatioMax, goal(x.Goal, x.Ratio))
	if f := x.Floor; f != nil {
		fmt.Fprintf(b, "The gRPC floor alone is %.2f× xsai's whole turn; exprd's turn takes %s more than the floor: its two model requests, the loop and the hops between processes.\n",
			x.FloorRatio, dur(x.Exprd.MedianNS-f.MedianNS))
		if x.ShareGoal > 0 {
			fmt.Fprintf(b, "exprd's share, that time over the floor as a part of xsai's whole turn: **%.2f×** (rounds %.2f–%.2f), goal %s.\n",
				x.Share, x.ShareMin, x.ShareMax, goal(x.ShareGoal, x.Share))
		}
	}
}

// cpuGoal says whether exprd's CPU per turn is within the goal.
func cpuGoal(goalNS, ns float64) string {
	switch {
	case goalNS == 0:
		return "—"
	case ns <= goalNS:
		return fmt.Sprintf("≤ %s — met", dur(goalNS))
	default:
		return fmt.Sprintf("≤ %s — **not met**", dur(goalNS))
	}
}

// cpuDur is dur, or "?" for a report from before CPU was measured.
func cpuDur(ns float64) string {
	if ns == 0 {
		return "?"
	}
	return dur(ns)
}

func orUnknown(s string) string {
	if s == "" {
		return "?"
	}
	return s
}
