package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// steadyTally is n steady answers of latency d, the first bad of them
// not right.
func steadyTally(n int, d time.Duration, bad int) *tally {
	t := newTally()
	for i := range n {
		t.answer("answer", "", i >= bad, d)
	}
	return t
}

// goodPhase is a phase that holds all five: under the line, quiet after,
// every answer typed and on time, the steady client as fast as the
// baseline and right, the legitimate caller right.
func goodPhase(name string) *phaseResult {
	p := &phaseResult{name: name, total: newTally(), steady: steadyTally(200, time.Millisecond, 0),
		peakMiB: 200, cpuLinger: 0.01, lingerSecs: 1}
	p.total.answer("Answer budget-exceeded", "", true, 50*time.Millisecond)
	p.legit = p.total.legit
	p.legit.answer("legitimate state: read back Answer", "", true, 10*time.Millisecond)
	return p
}

func TestVerdict(t *testing.T) {
	t.Parallel()
	cfg := &config{memoryBudgetMiB: 256, p99Limit: time.Second, p99Factor: 5, quietCores: 0.1, rssAbortMiB: 2048}
	cases := []struct {
		name  string
		spoil func(p *phaseResult)
		want  []string // the criteria that fail; none: it passes
	}{
		{"all hold", func(*phaseResult) {}, nil},
		{"a peak just under the line", func(p *phaseResult) { p.peakMiB = 319.9 }, nil},
		{"a peak at the line", func(p *phaseResult) { p.peakMiB = 320 }, []string{critMemory}},
		{"a peak past the line", func(p *phaseResult) { p.peakMiB = 900 }, []string{critMemory}},
		{"stopped at the safety cap", func(p *phaseResult) { p.aborted = true }, []string{critMemory}},
		{"a core held after the phase", func(p *phaseResult) { p.cpuLinger = 0.5 }, []string{critCores}},
		{"a tenth of a core is not held", func(p *phaseResult) { p.cpuLinger, p.lingerSecs = 0.05, 0.5 }, nil},
		{"a hostile request with no answer by its deadline", func(p *phaseResult) { p.total.noAnswer("call") }, []string{critCores}},
		{"a steady call with no answer by its deadline", func(p *phaseResult) { p.steady.noAnswer("call") }, []string{critCores, critRight}},
		{"an untyped answer", func(p *phaseResult) { p.total.untypedError(errString("EOF")) }, []string{critTyped}},
		{"a crash", func(p *phaseResult) { p.crashed = true }, []string{critTyped}},
		{"a steady p99 past the limit", func(p *phaseResult) { p.steady = steadyTally(200, time.Second+time.Millisecond, 0) }, []string{critP99, critP99Goal}},
		{"a steady p99 at the limit, far past the goal", func(p *phaseResult) { p.steady = steadyTally(200, time.Second, 0) }, []string{critP99Goal}},
		{"a steady p99 past 5 times the baseline's", func(p *phaseResult) { p.steady = steadyTally(200, 6*time.Millisecond, 0) }, []string{critP99Goal}},
		{"a steady p99 at 5 times the baseline's", func(p *phaseResult) { p.steady = steadyTally(200, 5*time.Millisecond, 0) }, nil},
		{"no steady answer at all", func(p *phaseResult) { p.steady = newTally() }, []string{critP99}},
		{"a steady answer not right", func(p *phaseResult) { p.steady = steadyTally(200, time.Millisecond, 1) }, []string{critRight}},
		{"a legitimate request not right", func(p *phaseResult) { p.legit.answer("legitimate state: Rejected", "", false, time.Millisecond) }, []string{critRight}},
		{"hostile answers not as wanted are reported, not failed", func(p *phaseResult) { p.total.answer("Answer", "", false, time.Millisecond) }, nil},
		{"memory and right at once", func(p *phaseResult) {
			p.peakMiB = 400
			p.steady = steadyTally(200, time.Millisecond, 3)
		}, []string{critMemory, critRight}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := goodPhase("9 CodeMode strings")
			c.spoil(p)
			r := &report{cfg: cfg, phases: []*phaseResult{goodPhase(baselineName), p}}
			got := failedCriteria(r.verdict(p, false, r.baseP99()))
			if !slices.Equal(got, c.want) {
				t.Errorf("failed criteria %q, want %q (verdict %q)", got, c.want, r.verdict(p, false, r.baseP99()))
			}
			fails := r.failures()
			if (len(fails) == 0) != (len(c.want) == 0) {
				t.Errorf("failures() = %q, want the run to fail exactly when a criterion does", fails)
			}
			for _, f := range fails {
				if !strings.HasPrefix(f, p.name+": ") {
					t.Errorf("failure %q names no phase", f)
				}
			}
			cell := r.verdictCell(1)
			if pass := cell == "pass"; pass != (len(c.want) == 0) {
				t.Errorf("verdict cell %q", cell)
			}
		})
	}
}

// boundFailures leaves out the p99 goal's failures, and only those: with
// --bounds-only a run whose bounds held exits 0 while it says FAIL.
func TestBoundFailures(t *testing.T) {
	t.Parallel()
	cfg := &config{memoryBudgetMiB: 256, p99Limit: time.Second, p99Factor: 5, quietCores: 0.1}
	for _, tt := range []struct {
		name         string
		spoil        func(p *phaseResult)
		all, bounded int
	}{
		{"all hold", func(*phaseResult) {}, 0, 0},
		{"only the goal fails", func(p *phaseResult) { p.steady = steadyTally(200, 6*time.Millisecond, 0) }, 1, 0},
		{"a bound and the goal fail", func(p *phaseResult) { p.steady = steadyTally(200, 2*time.Second, 0) }, 2, 1},
		{"a bound fails", func(p *phaseResult) { p.peakMiB = 400 }, 1, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := goodPhase("9 CodeMode strings")
			tt.spoil(p)
			r := &report{cfg: cfg, phases: []*phaseResult{goodPhase(baselineName), p}}
			if all, bounded := len(r.failures()), len(r.boundFailures()); all != tt.all || bounded != tt.bounded {
				t.Errorf("failures %d, of bounds %d; want %d and %d (%q)", all, bounded, tt.all, tt.bounded, r.failures())
			}
		})
	}
}

// TestVerdictBaseline: the baseline holds four criteria (it has no p99
// to compare with), and the run fails on it as on any phase.
func TestVerdictBaseline(t *testing.T) {
	t.Parallel()
	cfg := &config{memoryBudgetMiB: 256, p99Limit: time.Second, p99Factor: 5, quietCores: 0.1}
	base := goodPhase(baselineName)
	base.steady = steadyTally(200, 50*time.Millisecond, 0)
	r := &report{cfg: cfg, phases: []*phaseResult{base}}
	if f := r.failures(); len(f) != 0 {
		t.Errorf("a slow baseline fails: %q", f)
	}
	base.peakMiB = 500
	if got := failedCriteria(r.verdict(base, true, r.baseP99())); !slices.Equal(got, []string{critMemory}) {
		t.Errorf("a baseline past the line fails %q, want memory", got)
	}
	if f := (&report{cfg: cfg}).failures(); len(f) == 0 {
		t.Error("a run of no phase passes")
	}
	r = &report{cfg: cfg, phases: []*phaseResult{goodPhase(baselineName)}, crashed: true}
	if f := r.failures(); !slices.Contains(f, "exprd crashed") {
		t.Errorf("a crash outside any phase is not a failure: %q", f)
	}
}

// failedCriteria are the criteria a verdict names, in order, once each.
func failedCriteria(verdict []string) []string {
	var out []string
	for _, v := range verdict {
		c, _, _ := strings.Cut(v, ":")
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

type errString string

func (e errString) Error() string { return string(e) }
