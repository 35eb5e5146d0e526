package main

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

type report struct {
	cfg          *config
	phases       []*phaseResult
	crashed      bool
	exprdLog     *tailLog
	seconds      float64
	memLimitNote string
	args         []string
}

const (
	startMarker = "<!-- hostile:start -->"
	endMarker   = "<!-- hostile:end -->"
)

// The six things a phase must hold; a phase passes when none fails. The
// first five are bounds; the last, critP99Goal, is a goal not yet met on
// two shared cores, which --bounds-only leaves out of the exit status
// (never out of the report).
const (
	critMemory  = "memory"
	critCores   = "cores"
	critTyped   = "typed"
	critP99     = "steady p99"
	critRight   = "right"
	critP99Goal = "p99 goal"
)

// criteria says what each one measures, for the report.
var criteria = []struct{ name, what string }{
	{critMemory, "exprd's peak VmRSS (sampled every 50 ms) stays under the memory budget and a quarter"},
	{critCores, "no core is held past a deadline and a second: exprd's CPU, from a second into the quiet period after the phase to its end, stays under the quiet-cores limit, and every request was answered by its deadline"},
	{critTyped, "every request got a typed answer (a gRPC status other than UNKNOWN, a stream reset, a GOAWAY, a closed connection) and exprd did not crash"},
	{critP99, "the steady client's p99 stays under the p99 limit: other callers are answered meanwhile, none waits on a core held past a deadline and a second (the ratio to its quiet baseline's is reported, not held)"},
	{critRight, "every answer of the well-behaved clients is right: the steady client's value, and case 8d's legitimate caller reading back its state (each may send a call refused RESOURCE_EXHAUSTED again after a back-off, as a well-behaved client does)"},
	{critP99Goal, "the goal: the steady client's p99 stays within the p99 factor of its quiet baseline's"},
}

// verdict is which criteria a phase fails, each with what was measured;
// base is the baseline's steady p99, for the report (isBaseline: this is
// the baseline).
func (r *report) verdict(p *phaseResult, isBaseline bool, base time.Duration) []string {
	var out []string
	fail := func(crit, format string, a ...any) { out = append(out, crit+": "+fmt.Sprintf(format, a...)) }
	if line := r.cfg.lineMiB(); p.peakMiB >= line || p.aborted {
		how := ""
		if p.aborted {
			how = fmt.Sprintf(" (stopped at the %.0f MiB safety cap)", r.cfg.rssAbortMiB)
		}
		fail(critMemory, "peak VmRSS %.0f MiB, the line %.0f MiB%s", p.peakMiB, line, how)
	}
	if cores := p.lingerCores(); cores > r.cfg.quietCores {
		fail(critCores, "exprd used %.2f cores from a second after the phase on, over %.2f", cores, r.cfg.quietCores)
	}
	tallies := []struct {
		who string
		t   *tally
	}{{"the hostile requests", p.total}, {"the steady client's calls", p.steady}, {"the legitimate requests", p.legit}}
	for _, t := range tallies {
		if t.t != nil && t.t.late > 0 {
			fail(critCores, "%d of %s had no answer by their deadline", t.t.late, t.who)
		}
	}
	if p.crashed {
		fail(critTyped, "exprd crashed")
	}
	for _, t := range tallies {
		if t.t != nil && t.t.untyped > 0 {
			fail(critTyped, "%d of %s got an untyped answer", t.t.untyped, t.who)
		}
	}
	if p99 := percentile(p.steady.lat, 99); len(p.steady.lat) == 0 {
		fail(critP99, "the steady client got no answer")
	} else if p99 > r.cfg.p99Limit {
		vs := ""
		if base > 0 && !isBaseline {
			vs = fmt.Sprintf(" (%.1f× the baseline's %s)", float64(p99)/float64(base), ms(base))
		}
		fail(critP99, "%s%s, over %s", ms(p99), vs, ms(r.cfg.p99Limit))
	}
	if p99 := percentile(p.steady.lat, 99); !isBaseline && base > 0 && len(p.steady.lat) > 0 && float64(p99) > r.cfg.p99Factor*float64(base) {
		fail(critP99Goal, "%s, %.1f× the baseline's %s, over %.0f×", ms(p99), float64(p99)/float64(base), ms(base), r.cfg.p99Factor)
	}
	if n := p.steady.wrong(); n > 0 {
		fail(critRight, "%d of the steady client's %d answers were not %s", n, p.steady.requests, steadyAnswer)
	}
	if p.legit != nil {
		if n := p.legit.wrong(); n > 0 {
			fail(critRight, "%d of the legitimate caller's %d requests did not read back its state", n, p.legit.requests)
		}
	}
	for _, e := range p.setupErrs {
		out = append(out, "harness: "+e)
	}
	return out
}

// lingerCores is exprd's CPU from a second into the quiet period on, in
// cores.
func (p *phaseResult) lingerCores() float64 {
	if p.lingerSecs <= 0 {
		return 0
	}
	return p.cpuLinger / p.lingerSecs
}

// isBaseline reports whether the i-th phase is the baseline.
func (r *report) isBaseline(i int) bool { return i == 0 && r.phases[0].name == baselineName }

// baseP99 is the baseline's steady p99, 0 without one.
func (r *report) baseP99() time.Duration {
	if len(r.phases) == 0 || !r.isBaseline(0) {
		return 0
	}
	return percentile(r.phases[0].steady.lat, 99)
}

// boundFailures is failures without the goal's: what fails the run
// with --bounds-only.
func (r *report) boundFailures() []string {
	var out []string
	for _, f := range r.failures() {
		if _, what, _ := strings.Cut(f, ": "+critP99Goal+":"); what == "" {
			out = append(out, f)
		}
	}
	return out
}

// failures lists what makes the run fail: each phase's failed criteria,
// and a crash.
func (r *report) failures() []string {
	if len(r.phases) == 0 {
		return []string{"no phase ran"}
	}
	var out []string
	base := r.baseP99()
	crashSeen := false
	for i, p := range r.phases {
		for _, f := range r.verdict(p, r.isBaseline(i), base) {
			out = append(out, p.name+": "+f)
		}
		crashSeen = crashSeen || p.crashed
	}
	if r.crashed && !crashSeen {
		out = append(out, "exprd crashed")
	}
	return out
}

// failedPhases counts the phases with a failed criterion.
func (r *report) failedPhases() int {
	n := 0
	base := r.baseP99()
	for i, p := range r.phases {
		if len(r.verdict(p, r.isBaseline(i), base)) > 0 {
			n++
		}
	}
	return n
}

// verdictCell is a phase's verdict for the table: pass, or the criteria
// it fails.
func (r *report) verdictCell(i int) string {
	fails := r.verdict(r.phases[i], r.isBaseline(i), r.baseP99())
	if len(fails) == 0 {
		return "pass"
	}
	var names []string
	for _, f := range fails {
		n, _, _ := strings.Cut(f, ":")
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return "**fail**: " + strings.Join(names, ", ")
}

func (r *report) markdown() string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("## Hostile load\n\n")
	w("Latest run: %s on %d × %s, %s, %s/%s, a machine shared with other work (load average %s at the end); the run took %s.\n",
		time.Now().Format("2006-01-02"), runtime.NumCPU(), cpuModel(), runtime.Version(), runtime.GOOS, runtime.GOARCH, loadAvg(), (time.Duration(r.seconds) * time.Second).String())
	w("Command: `%s`%s; exprd ran with `%s` (a budget of %.0f MiB) and %s. Its providers, all on loopback: an HTTP one whose tool `%s` answers %.0f MiB (`--manuals-dir`), the demo's `math` and `catalog`, a hostile model server (`--models-config`: the providers `flood` and `forever`) and a server of hostile OpenAPI documents. ",
		commandLine(), viaMake(), strings.Join(r.args, " "), r.cfg.memoryBudgetMiB, r.memLimitNote, bigTool, float64(r.cfg.bigToolBytes)/(1<<20))
	w("Every client has a token of its own, so that the rate limiter sees each case as a caller of its own, except case 5's and case 8's, which send none (all of 8d's and half of 8c's have one).\n")
	w("Each phase runs on an exprd of its own, started for it and warmed up by 20 steady calls, so that what one case leaves resident is not the next one's. ")
	w("Each case sends for %v (case 5 for up to %v, the mix %v), each client finishing at least one round and every answer it waits for; one steady client, in a process of its own as another service's client would be, makes exprd-load's call (select the five cheapest products, read how many) with the unary `ExprTool/Call`, one at a time, throughout, and checks its value; then %v of quiet. ",
		r.cfg.caseDuration, r.cfg.callersDuration, r.cfg.mixDuration, r.cfg.quiet)
	w("Deadlines: %v for a hostile request (case 12's %v; half of case 4's 100 ms, which run out counted apart); a stream without a token held open until its case's end must be refused by %v after it; the steady client's and the legitimate caller's %v.\n\n",
		r.cfg.deadline, r.cfg.slowDeadline, holdGrace, r.cfg.steadyDeadline)
	w("A phase passes only when all six hold (the line %.0f MiB, quiet cores %.2f, p99 limit %s, p99 factor %.0f×):\n\n", r.cfg.lineMiB(), r.cfg.quietCores, ms(r.cfg.p99Limit), r.cfg.p99Factor)
	for _, c := range criteria {
		w("- **%s**: %s.\n", c.name, c.what)
	}
	w("\n")
	if f := r.failures(); len(f) > 0 {
		w("**Result: FAIL** — %d of %d phases fail", r.failedPhases(), len(r.phases))
		if b := r.boundFailures(); len(b) == 0 {
			w(" (every bound held; what fails is the p99 goal)")
		}
		w(":\n\n")
		for _, s := range f {
			w("- %s\n", s)
		}
		w("\n")
	} else {
		panics := 0.0
		for _, p := range r.phases {
			panics += p.counted["panics"]
		}
		w("**Result: pass** — every phase held all six; panics exprd recovered: %.0f.\n\n", panics)
	}

	base := r.baseP99()
	w("| phase | verdict | peak VmRSS | cores a second after | requests | typed (not as wanted) | untyped | no answer by deadline | hostile answer p50 / p99 | steady calls (not right) | steady p50 / p99 | steady p99 vs. baseline | legitimate (not right) | exprd CPU during / in the quiet | VmRSS after the quiet | goroutines before → after |\n")
	w("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for i, p := range r.phases {
		t, s := p.total, p.steady
		typed := t.requests - t.untyped - t.late - t.unread
		requests := fmt.Sprint(t.requests)
		if t.unread > 0 {
			requests = fmt.Sprintf("%d (%d of them calls sent and never read)", t.requests, t.unread)
		}
		p99 := percentile(s.lat, 99)
		vs := "—"
		if !r.isBaseline(i) && base > 0 {
			vs = fmt.Sprintf("%.1f×", float64(p99)/float64(base))
		}
		hostileLat := "—"
		if len(t.lat) > 0 {
			hostileLat = ms(percentile(t.lat, 50)) + " / " + ms(percentile(t.lat, 99))
		}
		legit := "—"
		if p.legit != nil && p.legit.requests > 0 {
			legit = fmt.Sprintf("%d (%d)", p.legit.requests, p.legit.wrong())
		}
		w("| %s | %s | %.0f MiB | %.2f | %s | %d (%d) | %d | %d | %s | %d (%d) | %s / %s | %s | %s | %.2f s / %.2f s | %.0f MiB | %.0f → %.0f |\n",
			p.name, r.verdictCell(i), p.peakMiB, p.lingerCores(), requests, typed, t.wrongKind, t.untyped, t.late, hostileLat,
			s.requests, s.wrong(), ms(percentile(s.lat, 50)), ms(p99), vs, legit, p.cpuDuring, p.cpuQuiet, p.rssAfter, p.goroBefore, p.goroAfter)
	}
	w("\nWhat each phase's clients did, what they got back (a request is one answer waited for: a stream's Open, a state and the call that reads it back, a call, a unary RPC, a raw stream) and what exprd's counters added meanwhile:\n\n")
	w("| phase | load | answers by kind | exprd counted |\n|---|---|---|---|\n")
	for _, p := range r.phases {
		load := strings.Join(nonEmpty(p.loads), "; ")
		if load == "" {
			load = "none"
		}
		kinds := p.total.kindsString()
		if p.legit != nil && p.legit.requests > 0 {
			kinds += "; legitimate: " + p.legit.kindsString()
		}
		if p.steady != nil && p.steady.requests > 0 {
			kinds += "; steady: " + p.steady.kindsString()
		}
		if kinds == "" {
			kinds = "—"
		}
		var counted []string
		for _, k := range slices.Sorted(maps.Keys(p.counted)) {
			counted = append(counted, fmt.Sprintf("%s %.0f", k, p.counted[k]))
		}
		if len(counted) == 0 {
			counted = []string{"—"}
		}
		w("| %s | %s | %s | %s |\n", p.name, load, kinds, strings.Join(counted, "; "))
	}
	seen := map[string]bool{}
	var samples []string
	for _, p := range r.phases {
		for _, t := range []*tally{p.total, p.legit, p.steady} {
			if t == nil {
				continue
			}
			for _, k := range slices.Sorted(maps.Keys(t.samples)) {
				if !seen[k] {
					seen[k] = true
					samples = append(samples, fmt.Sprintf("%s — `%s`", k, clip(t.samples[k], 200)))
				}
			}
		}
	}
	if len(samples) > 0 {
		w("\nWhat each kind of answer said, the first time:\n\n")
		for _, s := range samples {
			w("- %s\n", s)
		}
	}
	var notes []string
	for _, p := range r.phases {
		for _, n := range p.total.notes {
			notes = append(notes, p.name+": "+n)
		}
		if p.legit != nil {
			for _, n := range p.legit.notes {
				notes = append(notes, p.name+": legitimate caller: "+n)
			}
		}
		for _, n := range p.steady.notes {
			notes = append(notes, p.name+": steady client: "+n)
		}
	}
	if len(notes) > 0 {
		w("\nFirst unwanted outcomes of each phase:\n\n")
		for _, n := range notes {
			w("- %s\n", strings.ReplaceAll(n, "\n", " "))
		}
	}
	return b.String()
}

// writeSection puts text between the markers of path, appending the
// markers at the end when the file has none.
func writeSection(path, text string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	section := startMarker + "\n\n" + text + "\n" + endMarker
	i, j := strings.Index(s, startMarker), strings.Index(s, endMarker)
	switch {
	case i >= 0 && j > i:
		s = s[:i] + section + s[j+len(endMarker):]
	case i < 0 && j < 0:
		s = strings.TrimRight(s, "\n") + "\n\n" + section + "\n"
	default:
		return fmt.Errorf("%s: one of %s and %s without the other, or out of order", path, startMarker, endMarker)
	}
	return os.WriteFile(path, []byte(s), 0o644)
}

// viaMake says which make target runs the command, when one does.
func viaMake() string {
	if commandLine() == makeCommand {
		return ", which `make loadtest-hostile` runs"
	}
	return " (`make loadtest-hostile` runs `" + makeCommand + "`)"
}

// makeCommand is what make loadtest-hostile runs.
const makeCommand = "bin/exprd-hostile --exprd bin/exprd --benchmarks BENCHMARKS.md"

// clip shortens s to n bytes, on one line.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return strings.ReplaceAll(s, "`", "'")
}

// ms is d in milliseconds, or in seconds from one second up.
func ms(d time.Duration) string {
	if d >= time.Second {
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
}

func nonEmpty(ss []string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// commandLine is how this process was started, paths under the working
// directory made relative.
func commandLine() string {
	args := append([]string{filepath.Join("bin", filepath.Base(os.Args[0]))}, os.Args[1:]...)
	if wd, err := os.Getwd(); err == nil {
		for i, a := range args {
			args[i] = strings.ReplaceAll(a, wd+string(filepath.Separator), "")
		}
	}
	return strings.Join(args, " ")
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
