package main

import (
	"fmt"
	"slices"
	"strings"

	"golang.org/x/perf/benchmath"
)

// intervalCount is the fewest runs of a benchmark whose ratio is judged
// by its confidence interval: with fewer, benchstat's 95% interval of a
// median is too wide to tell much.
const intervalCount = 10

// An intervalPair is a benchmark that runs exprd's side and a bare
// baseline one after the other in each iteration (internal/benchpair),
// judged by its "ratio" metric's 95% confidence interval, as benchstat
// computes it: the goal is met only when the whole interval is under it.
type intervalPair struct {
	what, key string
	goal      float64
}

// intervalPackages are the packages whose benchmarks make bench runs a
// second time with at least intervalCount runs, for intervalSections; the
// main run skips intervalBenchmarks there.
var (
	intervalPackages   = []string{"./utcp/mcptransport"}
	intervalBenchmarks = "^BenchmarkCall$"
)

// intervalSections are the interval-judged pairs, by section. A section
// apart is run by a make target of its own (make bench-turns: the cluster
// module, which make bench does not run), so only --intervals shows it.
var intervalSections = []struct {
	title string
	apart bool
	pairs []intervalPair
}{
	{"MCP tools", false, []intervalPair{
		{"warm MCP tool call through the registry vs the same call with a bare go-sdk client session, a go-sdk server on loopback, 2025-11-25 with a session", "mcptransport:Call/sessions/interleaved", 1.1},
		{"the same, stateless (2026-07-28)", "mcptransport:Call/stateless/interleaved", 1.1},
	}},
	{"Durable turns", true, []intervalPair{
		{"a detached turn with a 50 ms model (ten deltas) on a replica keeping its turns in JetStream (lease, journal, events) vs one keeping them in memory", "cluster:TurnStore/interleaved", 1.05},
	}},
}

// interval is the median of vs and its 95% confidence interval, by
// benchstat's method (benchmath.AssumeNothing: no assumption on the
// distribution).
func interval(vs []float64) benchmath.Summary {
	return benchmath.AssumeNothing.Summary(benchmath.NewSample(vs, &benchmath.DefaultThresholds), 0.95)
}

// intervalVerdict says whether the interval [lo, hi] is under goal:
// met when hi is, not met when lo is over it, else undecided.
func intervalVerdict(goal, lo, hi float64) string {
	switch {
	case hi <= goal:
		return fmt.Sprintf("≤ %g× — met (the interval is under it)", goal)
	case lo > goal:
		return fmt.Sprintf("≤ %g× — **not met** (the interval is over it)", goal)
	}
	return fmt.Sprintf("≤ %g× — **not met**: undecided (the interval spans it)", goal)
}

// intervalSection is the interval-judged pairs' tables: for make bench's
// report (given false) every section but those apart; for the results
// given to --intervals (given true) the sections with any pair measured
// in them, so that make bench-mcp and make bench-turns show their own.
func (r report) intervalSection(given bool) string {
	var b strings.Builder
	for _, s := range intervalSections {
		if given && !slices.ContainsFunc(s.pairs, func(p intervalPair) bool { return len(r.results[p.key]) > 0 }) || !given && s.apart {
			continue
		}
		fmt.Fprintf(&b, "\n### %s\n\nEach ratio is the median of the `ratio` metric over the runs of a benchmark that alternates the two sides within each iteration, with its 95%% confidence interval as benchstat computes it (`-count %d`); a goal is met only when the whole interval is under it.\n\n| benchmark | ratio [95%% interval] | runs | goal |\n|---|---|---|---|\n",
			s.title, max(r.options.count, intervalCount))
		for _, p := range s.pairs {
			var vs []float64
			for _, smp := range r.results[p.key] {
				if v, ok := smp["ratio"]; ok {
					vs = append(vs, v)
				}
			}
			if len(vs) == 0 {
				fmt.Fprintf(&b, "| %s (`%s`) | missing | 0 | ≤ %g× |\n", p.what, p.key, p.goal)
				continue
			}
			sum := interval(vs)
			fmt.Fprintf(&b, "| %s (`%s`) | **%.3f×** [%.3f, %.3f] | %d | %s |\n", p.what, p.key, sum.Center, sum.Lo, sum.Hi, len(vs), intervalVerdict(p.goal, sum.Lo, sum.Hi))
		}
	}
	return b.String()
}
