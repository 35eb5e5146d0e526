package main

import (
	"fmt"
	"strings"
)

type report struct {
	machine  machineInfo
	options  options
	results  results
	sessions sessionsReport
	// xsai, xsaiClientTool and xsaiClientToolAnswer are
	// bench/cmd/agentxsai's workloads.
	xsai, xsaiClientTool, xsaiClientToolAnswer xsaiReport
}

// sessionsReport is bench/cmd/sessions' output.
type sessionsReport struct {
	Sessions            int     `json:"sessions"`
	StateBytes          int     `json:"state_bytes"`
	BaseRSSMiB          float64 `json:"base_rss_mib"`
	IdleKiBPerSession   float64 `json:"idle_kib_per_session"`
	ActiveKiBPerSession float64 `json:"active_kib_per_session"`
}

// A pair is exprd's benchmark and the baseline doing the same work bare.
// interleaved, when set, is the benchmark that runs the two one after the
// other in each iteration (internal/benchpair): its row follows the pair's.
type pair struct {
	what, exprd, baseline string
	goal                  float64 // the ratio to stay under; 0: none
	interleaved           string
}

var sections = []struct {
	title string
	pairs []pair
}{
	{"Evaluator", []pair{
		{"one-step call (the ids of the 5 cheapest of 20 products) through `evaluator/` vs a bare run of the same precompiled program on a reused `vm.VM`", "bench:Engines/small/exprd", "bench:Engines/small/expr", 1.3, "bench:Engines/small/interleaved"},
		{"the same step, bare in cel-go (context)", "bench:Engines/small/exprd", "bench:Engines/small/cel", 0, ""},
		{"the same step, bare in goja (context)", "bench:Engines/small/exprd", "bench:Engines/small/goja", 0, ""},
		{"10,000-item `filter`/`map` step through `evaluator/` vs a bare run on a reused `vm.VM`", "bench:Engines/large/exprd", "bench:Engines/large/expr", 1.1, "bench:Engines/large/interleaved"},
		{"the same step, bare in cel-go (context)", "bench:Engines/large/exprd", "bench:Engines/large/cel", 0, ""},
		{"the same step, bare in goja (context)", "bench:Engines/large/exprd", "bench:Engines/large/goja", 0, ""},
		{"the steady call's step with `fromPairs` (`evaluator` `BenchmarkOneStep`) vs a bare run on a reused `vm.VM`", "evaluator:OneStep/exprd", "evaluator:OneStep/bare_expr", 1.3, "evaluator:OneStep/interleaved"},
		{"compile-cache hit vs a compile of the same step", "evaluator:Compile/cache_hit", "evaluator:Compile/compile", 0, ""},
		{"applying a 1 MB state snapshot vs `encoding/json.Unmarshal` into `map[string]any`", "evaluator:StateSnapshot/exprd", "evaluator:StateSnapshot/encoding_json", 1, ""},
	}},
	{"ExprTool over gRPC", []pair{
		{"one-step call round trip on an open `Session` vs a bare grpc-go bidi echo of the same payload, loopback TCP", "server:SessionRoundTrip/exprd", "server:SessionRoundTrip/bare_grpc_echo", 2, ""},
		{"the same round trip vs the call answered by a two-message echo (its write and its answer) registered on an exprd server, through its interceptors and stats handler: the evaluator's and the Session protocol's share (context)", "server:SessionRoundTrip/exprd", "server:SessionEcho/exprd_server", 0, ""},
		{"that echo through exprd's server vs the bare grpc-go echo: the interceptors', stats handler's and second message's share (context)", "server:SessionEcho/exprd_server", "server:SessionRoundTrip/bare_grpc_echo", 0, ""},
		{"the round trip with the memory budget, as cmd/exprd runs (and so the gate of received messages, which reads every HTTP/2 frame), vs without one (context)", "server:SessionRoundTrip/exprd", "server:SessionRoundTrip/exprd_without_memory_budget", 0, ""},
	}},
	{"UTCP tools", []pair{
		{"warm HTTP tool call through the registry vs the same request with bare `net/http`", "utcp:WarmCall/registry", "utcp:WarmCall/bare", 1.1, "utcp:WarmCall/interleaved"},
		{"the same, against a bare call with the same 10 s deadline", "utcp:WarmCall/registry", "utcp:WarmCall/bare+deadline", 0, ""},
		{"warm go-utcp `UTCPService` `CallTool` through the registry (its span per call included) vs a bare generated stub with the same 10 s deadline", "grpctransport:WarmCallTool/registry", "grpctransport:WarmCallTool/bare+deadline", 1.1, "grpctransport:WarmCallTool/interleaved"},
		{"the same, against a bare stub call without a deadline (context)", "grpctransport:WarmCallTool/registry", "grpctransport:WarmCallTool/bare", 0, ""},
	}},
	{"Model provider", []pair{
		{"streamed turn (57 chunks) through the OpenAI-compatible provider vs a bare `net/http` read of the same SSE stream", "openaicompat:StreamTurn/provider", "openaicompat:StreamTurn/bare-http", 1.2, ""},
	}},
	{"CodeMode", []pair{
		{"three-call chain over the loopback HTTP math provider vs the same three calls with `net/http`", "codemode:Chain/codemode", "codemode:Chain/direct", 1.15, "codemode:Chain/interleaved"},
	}},
	{"AgentLoop in process", []pair{
		{"two-step turn through `agent.Run` vs a plain Go loop over the model and tools", "agent:TwoStepTurn/agent", "agent:TwoStepTurn/plain", 1.1, "agent:TwoStepTurn/interleaved"},
	}},
}

func (r report) markdown() string {
	var b strings.Builder
	m := r.machine
	fmt.Fprintf(&b, "\nLatest run: %s on %d × %s, %s, %s; `make bench` took %s (load average %s before, %s after).\n",
		m.Date, m.CPUs, m.CPU, m.Go, m.OS, m.Took, m.LoadBefore, m.LoadAfter)
	fmt.Fprintf(&b, "Go benchmarks ran `-count %d -benchtime %s`: each figure is the median of the runs with the lowest and highest in brackets, and a ratio is the median's over the baseline's median. Raw output: `bench/results/`.\n",
		r.options.count, r.options.benchtime)
	for _, s := range sections {
		fmt.Fprintf(&b, "\n### %s\n\n| benchmark | exprd | baseline | ratio | goal |\n|---|---|---|---|---|\n", s.title)
		for _, p := range s.pairs {
			b.WriteString(r.pairRow(p))
			b.WriteString(r.interleavedRow(p))
		}
	}
	b.WriteString(r.intervalSection(false))
	b.WriteString(r.throughput())
	b.WriteString(r.xsaiSection())
	b.WriteString(r.scaleSection())
	return b.String()
}

func (r report) pairRow(p pair) string {
	x, okx := r.results.stat(p.exprd, "ns/op")
	y, oky := r.results.stat(p.baseline, "ns/op")
	if !okx || !oky {
		return fmt.Sprintf("| %s | missing | missing | — | %s |\n", p.what, goal(p.goal, 0))
	}
	ratio := x.Median / y.Median
	return fmt.Sprintf("| %s (`%s`, `%s`) | %s, %s | %s, %s | **%s×** | %s |\n",
		p.what, p.exprd, p.baseline, durRange(x), r.allocs(p.exprd), durRange(y), r.allocs(p.baseline), ratioText(ratio), goal(p.goal, ratio))
}

// interleavedRow is the row of p's interleaved benchmark, the steadier
// figure on a loaded machine; "" when p has none or the run lacks it.
func (r report) interleavedRow(p pair) string {
	if p.interleaved == "" {
		return ""
	}
	wall, ok := r.results.stat(p.interleaved, "ratio")
	if !ok {
		return fmt.Sprintf("| the same two sides alternating within each iteration (`%s`) | | | missing | %s |\n", p.interleaved, goal(p.goal, 0))
	}
	cpu, _ := r.results.stat(p.interleaved, "cpu-ratio")
	return fmt.Sprintf("| the same two sides alternating within each iteration (`%s`): wall time, and CPU time of the process | | | **%.2f×** (%.2f–%.2f); CPU %.2f× | %s |\n",
		p.interleaved, wall.Median, wall.Min, wall.Max, cpu.Median, goal(p.goal, wall.Median))
}

func (r report) throughput() string {
	var b strings.Builder
	b.WriteString("\n### ExprTool calls per second\n\nThe one-step call (the five cheapest products selected with `fromPairs`) made back to back on each of N `Session` streams sharing one connection to one server (`server:SessionThroughput`).\n\n| streams | calls/s | wall time per call |\n|---|---|---|\n")
	for _, n := range []int{1, 8, 64} {
		key := fmt.Sprintf("server:SessionThroughput/streams=%d", n)
		cps, ok := r.results.stat(key, "calls/s")
		ns, _ := r.results.stat(key, "ns/op")
		if !ok {
			fmt.Fprintf(&b, "| %d | missing | |\n", n)
			continue
		}
		fmt.Fprintf(&b, "| %d | %s (%s–%s) | %s |\n", n, count(cps.Median), count(cps.Min), count(cps.Max), dur(ns.Median))
	}
	return b.String()
}

func (r report) scaleSection() string {
	var b strings.Builder
	b.WriteString("\n### Scale\n\nTime of one call as the state grows (`bench:StateSize`): `snapshot` applies the state itself, `point` reads one item and writes one field, `scan` filters every item. Plotted in `benchmarks-scale.png`.\n\n| state | snapshot | point | scan |\n|---|---|---|---|\n")
	for _, size := range stateSizesNames {
		fmt.Fprintf(&b, "| %s |", size)
		for _, kind := range []string{"snapshot", "point", "scan"} {
			s, ok := r.results.stat("bench:StateSize/"+size+"/"+kind, "ns/op")
			if !ok {
				b.WriteString(" missing |")
				continue
			}
			fmt.Fprintf(&b, " %s |", durRange(s))
		}
		b.WriteString("\n")
	}
	b.WriteString("\nTime of one call as its steps grow, on the 100 KB state, each step reading the write of the one before (`bench:Steps`).\n\n| steps | time per call | per step |\n|---|---|---|\n")
	for _, n := range stepCountsPlotted {
		s, ok := r.results.stat(fmt.Sprintf("bench:Steps/steps=%d", n), "ns/op")
		if !ok {
			fmt.Fprintf(&b, "| %d | missing | |\n", n)
			continue
		}
		fmt.Fprintf(&b, "| %d | %s | %s |\n", n, durRange(s), dur(s.Median/float64(n)))
	}
	ss := r.sessions
	fmt.Fprintf(&b, "\nResident memory a real exprd process gains per Session (`bench/cmd/sessions`, %d sessions of each kind, from %.0f MiB at start): **%.1f KiB** per idle session (opened, nothing else) and **%.1f KiB** per active session (a %d-byte products state pushed and one call that writes).\n",
		ss.Sessions, ss.BaseRSSMiB, ss.IdleKiBPerSession, ss.ActiveKiBPerSession, ss.StateBytes)
	return b.String()
}

// The names the scale benchmarks use (bench/scale_test.go).
var (
	stateSizesNames   = []string{"1KB", "100KB", "10MB"}
	stepCountsPlotted = []int{1, 4, 16, 50}
)

func (r report) allocs(key string) string {
	a, ok := r.results.stat(key, "allocs/op")
	if !ok {
		return "? allocs"
	}
	return fmt.Sprintf("%.0f allocs", a.Median)
}

// ratioText gives two decimals, or three significant figures below 0.1.
func ratioText(r float64) string {
	if r < 0.1 {
		return fmt.Sprintf("%.3g", r)
	}
	return fmt.Sprintf("%.2f", r)
}

func goal(g, ratio float64) string {
	switch {
	case g == 0:
		return "—"
	case ratio == 0:
		return fmt.Sprintf("≤ %g×", g)
	case ratio <= g:
		return fmt.Sprintf("≤ %g× — met", g)
	default:
		return fmt.Sprintf("≤ %g× — **not met**", g)
	}
}

func durRange(s stat) string {
	return fmt.Sprintf("%s (%s–%s)", dur(s.Median), dur(s.Min), dur(s.Max))
}

// dur formats nanoseconds with three significant figures.
func dur(ns float64) string {
	switch {
	case ns >= 1e9:
		return fmt.Sprintf("%.3g s", ns/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%.3g ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.3g µs", ns/1e3)
	default:
		return fmt.Sprintf("%.3g ns", ns)
	}
}

func count(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
