package main

import (
	"strings"
	"testing"
)

func TestIntervalSection(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		ratios []float64
		want   string
	}{
		{"under the goal", []float64{1.02, 1.03, 1.03, 1.04, 1.04, 1.05, 1.05, 1.06, 1.06, 1.07}, "| 10 | ≤ 1.1× — met (the interval is under it) |"},
		{"over it", []float64{1.12, 1.13, 1.13, 1.14, 1.14, 1.15, 1.15, 1.16, 1.16, 1.17}, "≤ 1.1× — **not met** (the interval is over it)"},
		{"spanning it", []float64{1.02, 1.05, 1.07, 1.08, 1.09, 1.11, 1.12, 1.13, 1.15, 1.18}, "**not met**: undecided (the interval spans it)"},
		{"missing", nil, "| missing | 0 | ≤ 1.1× |"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := report{results: results{}, options: options{count: 5}}
			for _, v := range tc.ratios {
				r.results["mcptransport:Call/sessions/interleaved"] = append(r.results["mcptransport:Call/sessions/interleaved"], sample{"ratio": v})
			}
			md := r.intervalSection(false)
			if !strings.Contains(md, tc.want) || !strings.Contains(md, "`-count 10`") {
				t.Errorf("got\n%s\nwant a row with %q", md, tc.want)
			}
		})
	}
	// Which sections show: make bench's report leaves out those apart
	// (their benchmarks run elsewhere); --intervals shows those measured.
	ratios := []float64{1.01, 1.02, 1.02, 1.03, 1.03, 1.03, 1.04, 1.04, 1.04, 1.05}
	for _, tc := range []struct {
		name      string
		key       string
		given     bool
		want, not string
	}{
		{"make bench's report", "mcptransport:Call/sessions/interleaved", false, "### MCP tools", "### Durable turns"},
		{"make bench's report, nothing measured", "", false, "### MCP tools", "### Durable turns"},
		{"make bench-turns", "cluster:TurnStore/interleaved", true, "### Durable turns", "### MCP tools"},
		{"make bench-mcp", "mcptransport:Call/stateless/interleaved", true, "### MCP tools", "### Durable turns"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := report{results: results{}, options: options{count: 10}}
			for _, v := range ratios {
				if tc.key != "" {
					r.results[tc.key] = append(r.results[tc.key], sample{"ratio": v})
				}
			}
			md := r.intervalSection(tc.given)
			if !strings.Contains(md, tc.want) || strings.Contains(md, tc.not) {
				t.Errorf("got\n%s\nwant %q in it and not %q", md, tc.want, tc.not)
			}
		})
	}
	// The interval is benchstat's: n = 10 gives the 2nd and 9th values.
	s := interval([]float64{1.02, 1.03, 1.04, 1.05, 1.06, 1.07, 1.08, 1.09, 1.10, 1.11})
	if s.Lo != 1.03 || s.Hi != 1.10 {
		t.Errorf("interval: [%v, %v], want [1.03, 1.10]", s.Lo, s.Hi)
	}
}
