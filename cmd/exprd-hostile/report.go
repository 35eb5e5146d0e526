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
	panics       float64
}

const (
	startMarker = "<!-- hostile:start -->"
	endMarker   = "<!-- hostile:end -->"
)

// bounds is the honest line on what exprd bounds and what it does not yet.
const bounds = "Bounded now: a state's bytes, containers and depth, a set address, a search query (refused on its bytes before any search runs), the rate limiter's callers (an LRU), what CodeMode reads of a tool's answer, " +
	"and a server-wide memory budget (--memory-budget: here 70% of GOMEMLIMIT) that states and tools' answers reserve from before they allocate, a sixteenth of it kept for small reservations. " +
	"The gRPC messages being received are in it too: a message longer than a stream's flow-control window reserves twice its length before more than the window of it may arrive (the gate holds back the stream's WINDOW_UPDATEs until then), from the budget within its wait or else, first come, first served, from an overdraft, a quarter of the budget kept for it; so what streams receive at once is within the budget plus a window a stream, not a largest message a stream (rows 1 and mix). " +
	"At most --max-running-programs ExprTool programs run at once (as many as the cores), the others waiting their turn with their time budget not yet counting: so what programs allocate at once is what those can in their time budget, and a program's time budget is not spent waiting for a core (row 7). " +
	"What a stream's outbound queue holds past 256 KiB reserves from the budget too: a client that does not read while the budget is spent has its stream ended RESOURCE_EXHAUSTED (memory_budget) rather than pin its queue (row 6)."

func (r *report) markdown() string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("## Hostile load (issue 14)\n\n")
	w("Latest run: %s on %d × %s, %s, %s/%s, a machine shared with other work (load average %s at the end); the run took %s.\n",
		time.Now().Format("2006-01-02"), runtime.NumCPU(), cpuModel(), runtime.Version(), runtime.GOOS, runtime.GOARCH, loadAvg(), (time.Duration(r.seconds) * time.Second).String())
	w("Command: `make loadtest-hostile`, which runs `%s`; exprd ran with `--demo --egress-allow loopback --manuals-dir <tmp>` (the manual of a loopback HTTP provider whose tool `%s` answers %.0f MiB) and GOMEMLIMIT=%s in its environment.\n",
		commandLine(), bigTool, float64(r.cfg.bigToolBytes)/(1<<20), r.memLimitNote)
	w("Each case sends for %v (case 5 for up to %v, the mix %v), each client finishing at least one round and every answer it waits for; one steady client makes exprd-load's seed call with the unary `ExprTool/Call`, one at a time, throughout; then %v of quiet. Peak VmRSS is the largest sample of VmRSS taken every 50 ms during the phase; **over** marks a peak past GOMEMLIMIT × 1.25 (%.0f MiB), a steady p99 past %.0f× the baseline's, or more than %.1f CPU s in the second half of the quiet period (the first half holds the teardown of what the clients left): these are reported, not failures. Failures are an exprd crash, an untyped error (UNKNOWN, or not a gRPC status) and a request with no answer by its deadline (%v; the steady client's %v).\n\n",
		r.cfg.caseDuration, r.cfg.callersDuration, r.cfg.mixDuration, r.cfg.quiet, r.cfg.rssOverMiB, r.cfg.p99Factor, r.cfg.quietCPUOver, r.cfg.deadline, r.cfg.steadyDeadline)
	w("%s\n\n", bounds)
	if f := r.failures(); len(f) > 0 {
		w("**Result: FAIL** — %s.\n\n", strings.Join(f, "; "))
	} else {
		w("**Result: pass** — no crash, no untyped error, every request answered by its deadline; recovered panics: %.0f.\n\n", r.panics)
	}

	var base time.Duration
	if len(r.phases) > 0 {
		base = percentile(r.phases[0].steady.lat, 99)
	}
	w("| phase | requests | typed answers (wrong kind) | untyped | no answer by deadline | hostile answer p50 / p99 | peak VmRSS | VmRSS after the quiet | steady calls | steady p50 / p99 | steady p99 vs. baseline | exprd CPU during / in the quiet after (its second half) | goroutines before → after |\n")
	w("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range r.phases {
		t, s := p.total, p.steady
		typed := t.requests - t.untyped - t.late - t.unread
		requests := fmt.Sprint(t.requests)
		if t.unread > 0 {
			requests = fmt.Sprintf("%d (%d of them calls sent and never read)", t.requests, t.unread)
		}
		rss := fmt.Sprintf("%.0f MiB", p.peakMiB)
		if p.peakMiB > r.cfg.rssOverMiB {
			rss += " **over**"
		}
		if p.aborted {
			rss += fmt.Sprintf(" (stopped at the %.0f MiB safety cap)", r.cfg.rssAbortMiB)
		}
		p99 := percentile(s.lat, 99)
		vs := "—"
		if p != r.phases[0] && base > 0 {
			vs = fmt.Sprintf("%.1f×", float64(p99)/float64(base))
			if float64(p99) > r.cfg.p99Factor*float64(base) {
				vs += " **over**"
			}
		}
		quiet := fmt.Sprintf("%.2f s (%.2f s)", p.cpuQuiet, p.cpuLinger)
		if p.cpuLinger > r.cfg.quietCPUOver {
			quiet += " **over**"
		}
		hostileLat := "—"
		if len(t.lat) > 0 {
			hostileLat = ms(percentile(t.lat, 50)) + " / " + ms(percentile(t.lat, 99))
		}
		steadyErr := ""
		if bad := s.requests - len(s.lat) + s.wrongKind; bad > 0 {
			steadyErr = fmt.Sprintf(" (%d not {\"value\":5})", bad)
		}
		w("| %s | %s | %d (%d) | %d | %d | %s | %s | %.0f MiB | %d%s | %s / %s | %s | %.2f s / %s | %.0f → %.0f |\n",
			p.name, requests, typed, t.wrongKind, t.untyped, t.late, hostileLat, rss, p.rssAfter,
			s.requests, steadyErr, ms(percentile(s.lat, 50)), ms(p99), vs, p.cpuDuring, quiet, p.goroBefore, p.goroAfter)
	}
	w("\nWhat each phase's clients did and got back (a request is one answer waited for: a stream's Open, a state and the call that reads it back, a call, a unary RPC):\n\n")
	w("| phase | load | answers by kind |\n|---|---|---|\n")
	for _, p := range r.phases {
		load := strings.Join(nonEmpty(p.loads), "; ")
		if load == "" {
			load = "none"
		}
		kinds := p.total.kindsString()
		if kinds == "" {
			kinds = "—"
		}
		w("| %s | %s | %s |\n", p.name, load, kinds)
	}
	seen := map[string]bool{}
	var samples []string
	for _, p := range r.phases {
		for _, k := range slices.Sorted(maps.Keys(p.total.samples)) {
			if !seen[k] {
				seen[k] = true
				samples = append(samples, fmt.Sprintf("%s — `%s`", k, clip(p.total.samples[k], 200)))
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
		for _, n := range p.steady.notes {
			notes = append(notes, p.name+": steady client: "+n)
		}
		for _, e := range p.setupErrs {
			notes = append(notes, p.name+": harness: "+e)
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

// failures lists what makes the run fail.
func (r *report) failures() []string {
	var out []string
	if r.crashed {
		out = append(out, "exprd crashed")
	}
	for _, p := range r.phases {
		for _, t := range []struct {
			who string
			t   *tally
		}{{"hostile requests", p.total}, {"the steady client", p.steady}} {
			if t.t.untyped > 0 {
				out = append(out, fmt.Sprintf("%s: %d untyped errors from %s", p.name, t.t.untyped, t.who))
			}
			if t.t.late > 0 {
				out = append(out, fmt.Sprintf("%s: %d of %s had no answer by the deadline", p.name, t.t.late, t.who))
			}
		}
		for _, e := range p.setupErrs {
			out = append(out, p.name+": harness: "+e)
		}
	}
	return out
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
