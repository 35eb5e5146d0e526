package main

import (
	"fmt"
	"strings"
)

// xsaiReport is the part of bench/cmd/agentxsai's JSON the report uses.
type xsaiReport struct {
	Rounds        int      `json:"rounds"`
	TurnsPerRound int      `json:"turns_per_round"`
	NodeVersion   string   `json:"node_version"`
	XSAIVersion   string   `json:"xsai_version"`
	Exprd         xsaiSide `json:"exprd"`
	XSAI          xsaiSide `json:"xsai"`
	Ratio         float64  `json:"ratio"`
	RatioMin      float64  `json:"ratio_min"`
	RatioMax      float64  `json:"ratio_max"`
	Goal          float64  `json:"goal"`
}

type xsaiSide struct {
	MedianNS         float64 `json:"median_ns"`
	MinRoundMedianNS float64 `json:"min_round_median_ns"`
	MaxRoundMedianNS float64 `json:"max_round_median_ns"`
	Turns            int     `json:"turns"`
	VerifiedTurns    int     `json:"verified_turns"`
	ClientPeakRSSMiB float64 `json:"client_peak_rss_mib"`
	ServerPeakRSSMiB float64 `json:"server_peak_rss_mib"`
	TotalPeakRSSMiB  float64 `json:"total_peak_rss_mib"`
}

func (r report) xsaiSection() string {
	x := r.xsai
	var b strings.Builder
	fmt.Fprintf(&b, "\n### AgentLoop vs xsai\n\nThe same two-step turn (the model calls the math provider's `add`, then answers) against the same scripted OpenAI-compatible server and the same HTTP tool: exprd's `AgentLoop` driven through the Go client from another process, and npm `xsai` %s's `generateText` in Node %s (`bench/cmd/agentxsai`; %d alternating rounds of %d verified turns per side).\n\n",
		x.XSAIVersion, x.NodeVersion, x.Rounds, x.TurnsPerRound)
	b.WriteString("| side | wall time per turn (median; round medians' range) | turns verified | peak RSS |\n|---|---|---|---|\n")
	fmt.Fprintf(&b, "| exprd | %s (%s–%s) | %d/%d | %.0f MiB: exprd %.0f MiB + Go client %.0f MiB |\n",
		dur(x.Exprd.MedianNS), dur(x.Exprd.MinRoundMedianNS), dur(x.Exprd.MaxRoundMedianNS), x.Exprd.VerifiedTurns, x.Exprd.Turns,
		x.Exprd.TotalPeakRSSMiB, x.Exprd.ServerPeakRSSMiB, x.Exprd.ClientPeakRSSMiB)
	fmt.Fprintf(&b, "| xsai | %s (%s–%s) | %d/%d | %.0f MiB: node |\n",
		dur(x.XSAI.MedianNS), dur(x.XSAI.MinRoundMedianNS), dur(x.XSAI.MaxRoundMedianNS), x.XSAI.VerifiedTurns, x.XSAI.Turns, x.XSAI.TotalPeakRSSMiB)
	fmt.Fprintf(&b, "\nexprd/xsai: **%.2f×** (rounds %.2f–%.2f), goal %s.\n", x.Ratio, x.RatioMin, x.RatioMax, goal(x.Goal, x.Ratio))
	return b.String()
}
