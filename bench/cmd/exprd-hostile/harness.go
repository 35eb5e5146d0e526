package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/internal/testkit/exprdproc"
)

// env is what the loads share: exprd's address, the settings, the
// tokens, the servers the harness runs and the payloads, built once.
type env struct {
	addr    string
	cfg     *config
	tokens  *tokens
	model   *hostileModel
	openAPI *openAPIServer

	hostileState, legalState string
	legalItems               int
	deepAddress              string
	deepCall                 string
	allocCall                string
	searchQuery              string
	silentCall               string
	gzipBody                 []byte
	gzipInflated             int
	legitState               string
	legitItems               int
	// legitConn is case 8d's legitimate caller's connection, made and
	// proven (a call with its token) before the phase, as a caller's
	// connection is before a flood: exprd never closes a connection that
	// has carried an admitted call for a new one, while one made during
	// case 5's flood of new connections from 100,000 addresses was
	// closed for theirs before the busy server read its first call.
	legitConn    *grpc.ClientConn
	megabyteJSON string
	foreverJSON  string
}

// A load is one kind of hostile client: run sends until ctx ends (each
// client finishing at least one round and every answer it waits for),
// tallies what came back, and describes what it did.
type load struct {
	id   string // "3", or "8a" for a case of several loads
	name string
	run  func(ctx context.Context, e *env, t *tally) (string, error)
}

// A hostileCase is one class of hostile client: its loads run at once.
type hostileCase struct {
	n     int
	name  string
	loads []load
}

// The cases, in the order they run alone; the mix runs them all.
func cases() []hostileCase {
	one := func(n int, name string, run func(context.Context, *env, *tally) (string, error)) hostileCase {
		return hostileCase{n, name, []load{{strconv.Itoa(n), name, run}}}
	}
	some := func(n int, name string, loads ...load) hostileCase {
		for i := range loads {
			loads[i].id = strconv.Itoa(n) + string(rune('a'+i))
		}
		return hostileCase{n, name, loads}
	}
	return []hostileCase{
		one(1, "big states", stateFlood),
		one(2, "CodeMode, 5 MiB tool", bigAnswers),
		one(3, "deep addresses", deepAddresses),
		one(4, "search flood", searchFlood),
		one(5, "distinct callers", manyCallers(0)),
		one(6, "clients that never read", silentReaders),
		one(7, "allocating programs", allocatingPrograms),
		some(8, "before a token",
			load{name: "HPACK-indexed -bin headers", run: hpackFlood},
			load{name: "unfinished windows", run: windowFlood},
			load{name: "gzip bombs", run: gzipFlood},
			load{name: "squatting prefixes", run: squatters},
			load{name: "rapid reset", run: rapidResets},
			load{name: "health streams", run: healthStreams}),
		one(9, "CodeMode strings", codemodeStrings),
		some(10, "ExprTool strings",
			load{name: "over Call", run: exprtoolStringsUnary},
			load{name: "over Session", run: exprtoolStringsSession}),
		some(11, "host functions",
			load{name: "client-run, 1 MB answers", run: clientFunctions},
			load{name: "server-run UTCP tool", run: serverFunctions}),
		one(12, "slow builtins", slowBuiltins),
		some(13, "hostile model",
			load{name: "600 calls of a missing tool", run: modelFlood},
			load{name: "a tool call every step", run: modelForever}),
		some(14, "hostile OpenAPI",
			load{name: "a schema of 3,000 $refs", run: openAPIWide},
			load{name: "a chain of 3,000 $refs", run: openAPIDeep}),
	}
}

// allCases is --cases' default: every case, then the mix.
func allCases() string {
	var ids []string
	for _, c := range cases() {
		ids = append(ids, strconv.Itoa(c.n))
	}
	return strings.Join(append(ids, "mix"), ",")
}

// A phaseSpec is a phase to run: its name, and the case it runs (all of
// them for the mix), or one load of it.
type phaseSpec struct {
	name  string
	c     *hostileCase // nil: the mix
	loads []load
}

// selectPhases parses --cases.
func selectPhases(only string) ([]phaseSpec, error) {
	var out []phaseSpec
	all := cases()
	for _, p := range strings.Split(only, ",") {
		p = strings.TrimSpace(p)
		if p == "mix" {
			out = append(out, phaseSpec{name: "mix: all at once"})
			continue
		}
		found := false
		for i := range all {
			c := &all[i]
			if p == strconv.Itoa(c.n) {
				out = append(out, phaseSpec{name: fmt.Sprintf("%d %s", c.n, c.name), c: c, loads: c.loads})
				found = true
			}
			for _, l := range c.loads {
				if len(c.loads) > 1 && p == l.id {
					out = append(out, phaseSpec{name: fmt.Sprintf("%s %s: %s", l.id, c.name, l.name), c: c, loads: []load{l}})
					found = true
				}
			}
		}
		if !found {
			return nil, fmt.Errorf("%q is neither a case (1 to %d), a case's load (8a), nor mix", p, len(all))
		}
	}
	return out, nil
}

type harness struct {
	ctx          context.Context // the run's: an interrupt ends it
	cfg          *config
	argv         []string // exprd's flags
	env          *env
	log          *tailLog
	memLimitNote string
	args         []string // exprd's flags, as the report gives them

	// The exprd of the current phase, its watch and the steady client's
	// process calling it.
	srv       *exprdproc.Proc
	watch     *watch
	stopWatch context.CancelFunc
	steady    *steadyProc
	crashes   int
}

func startHarness(parent context.Context, cfg *config, dir string, provider *bigProvider, model *hostileModel, docs *openAPIServer) (*harness, error) {
	manuals := filepath.Join(dir, "manuals")
	if err := os.Mkdir(manuals, 0o700); err != nil {
		return nil, err
	}
	if err := writeManual(manuals, provider.url); err != nil {
		return nil, err
	}
	toks := newTokens(len(cases()))
	tokFile, err := toks.write(dir)
	if err != nil {
		return nil, err
	}
	models, err := writeModelsConfig(dir, model.url)
	if err != nil {
		return nil, err
	}
	// exprdproc starts exprd with this process's environment (exec.Cmd
	// with a nil Env), so GOMEMLIMIT set (or unset) here reaches exprd
	// alone: this process's runtime read its own at start.
	setenv := func() error { return os.Setenv("GOMEMLIMIT", cfg.memLimit) }
	if cfg.memLimit == "" {
		setenv = func() error { return os.Unsetenv("GOMEMLIMIT") }
	}
	if err := setenv(); err != nil {
		return nil, err
	}
	log := &tailLog{max: 32 << 10}
	budget := strconv.FormatInt(int64(cfg.memoryBudgetMiB*(1<<20)), 10)
	h := &harness{ctx: parent, cfg: cfg, log: log,
		argv: []string{"--demo", "--egress-allow", "loopback", "--manuals-dir", manuals, "--memory-budget", budget,
			"--auth-tokens-file", tokFile, "--models-config", models},
		args: []string{"--demo", "--egress-allow", "loopback", "--manuals-dir", "<tmp>", "--memory-budget", budget,
			"--auth-tokens-file", "<tmp>", "--models-config", "<tmp>"},
	}
	h.env = buildEnv("", cfg)
	h.env.tokens, h.env.model, h.env.openAPI = toks, model, docs
	if err := h.start(); err != nil {
		return nil, err
	}
	h.memLimitNote = memLimitOf(h.srv.Pid())
	return h, nil
}

// start starts an exprd, its watch and the steady client's connection,
// and warms the steady call up (its program compiled, its connection
// made), so that each phase starts from a fresh process: what one case
// leaves resident is not the next one's.
func (h *harness) start() error {
	var logTo io.Writer = h.log
	if h.cfg.showLog {
		logTo = io.MultiWriter(h.log, prefixed{os.Stderr})
	}
	srv, err := exprdproc.Start(h.cfg.exprd, logTo, h.argv...)
	if err != nil {
		return err
	}
	h.srv = srv
	wctx, stop := context.WithCancel(h.ctx)
	h.watch, h.stopWatch = startWatch(wctx, srv.Pid(), h.cfg.rssAbortMiB, func() { _ = srv.Signal(syscall.SIGKILL) }), stop
	h.env.addr = srv.Addr
	if h.steady, err = startSteady(h.cfg, srv.Addr, h.env.tokens.steady); err != nil {
		h.stop()
		return err
	}
	wctx2, cancel := context.WithTimeout(h.ctx, 2*time.Second)
	defer cancel()
	if h.env.legitConn, err = dialFrom(srv.Addr, preSource(20), withToken(h.env.tokens.legit)); err != nil {
		h.stop()
		return err
	}
	// Any answer proves it: the tap admitted a call with its token.
	_, _ = exprdv1.NewExprToolClient(h.env.legitConn).Describe(wctx2, &exprdv1.DescribeRequest{})
	return nil
}

// stop ends the current exprd.
func (h *harness) stop() {
	if h.steady != nil {
		h.steady.close()
		h.steady = nil
	}
	if h.env.legitConn != nil {
		h.env.legitConn.Close()
		h.env.legitConn = nil
	}
	if h.stopWatch != nil {
		h.stopWatch()
	}
	if h.srv != nil {
		h.srv.Stop()
		h.srv = nil
	}
}

func (h *harness) close() { h.stop() }

// runAll runs the baseline, each phase --cases names, then the mix, each
// on an exprd of its own.
func (h *harness) runAll() []*phaseResult {
	type step struct {
		name  string
		dur   time.Duration
		loads []load
	}
	steps := []step{{baselineName, h.cfg.baseline, nil}}
	specs, _ := selectPhases(h.cfg.only) // parseFlags checked it
	for _, p := range specs {
		if p.c == nil {
			var mix []load
			for _, c := range cases() {
				if c.n == 5 {
					mix = append(mix, load{"5", c.name, manyCallers(h.cfg.callers)}) // callers not seen yet
					continue
				}
				mix = append(mix, c.loads...)
			}
			steps = append(steps, step{p.name, h.cfg.mixDuration, mix})
			continue
		}
		d := h.cfg.caseDuration
		if p.c.n == 5 {
			d = h.cfg.callersDuration
		}
		steps = append(steps, step{p.name, d, p.loads})
	}

	var out []*phaseResult
	for i, s := range steps {
		if i > 0 {
			t0 := time.Now()
			h.stop()
			if err := h.start(); err != nil {
				fmt.Fprintln(os.Stderr, "exprd-hostile: exprd did not start again:", err)
				break
			}
			fmt.Fprintf(os.Stderr, "exprd-hostile: a fresh exprd in %.1f s\n", time.Since(t0).Seconds())
		}
		fmt.Fprintf(os.Stderr, "exprd-hostile: %s (%v)…\n", s.name, s.dur)
		r := h.phase(s.name, s.dur, s.loads)
		out = append(out, r)
		fmt.Fprintf(os.Stderr, "exprd-hostile:   %s\n", r.summary())
		if r.crashed {
			h.crashes++
		}
		if h.ctx.Err() != nil {
			break
		}
	}
	return out
}

// baselineName names the first phase, the steady client alone.
const baselineName = "baseline (steady client alone)"

// phaseResult is one row of the table.
type phaseResult struct {
	name       string
	loads      []string // what each load did, its id first
	seconds    float64
	total      *tally // every hostile request of the phase
	steady     *tally
	legit      *tally // the well-behaved clients inside the cases (8d)
	peakMiB    float64
	aborted    bool // the safety cap stopped it
	crashed    bool // exprd died during it
	cpuDuring  float64
	cpuQuiet   float64 // the whole quiet period: teardown included
	cpuLinger  float64 // from its first second on: work still going on
	lingerSecs float64 // how long that part of the quiet period was
	rssAfter   float64 // VmRSS at the end of the quiet period
	goroBefore float64
	goroAfter  float64
	counted    map[string]float64 // what exprd's counters added during the phase
	setupErrs  []string
}

// lingerAfter is when, into the quiet period, the CPU that counts
// begins: a request's deadline and a second.
const lingerAfter = time.Second

// phase runs loads for dur with the steady client going, then measures
// exprd's CPU in the quiet period that follows.
func (h *harness) phase(name string, dur time.Duration, loads []load) *phaseResult {
	r := &phaseResult{name: name, total: newTally()}
	if g, err := h.srv.Gauges(); err == nil {
		r.goroBefore = g.Goroutines
	}
	before := h.counters()
	ctx, cancel := context.WithTimeout(h.ctx, dur)
	defer cancel()
	h.watch.begin(cancel)
	defer func() { r.crashed = h.watch.crashed.Load() }()
	cpu0, _ := cpuSeconds(h.srv.Pid())
	t0 := time.Now()

	if err := h.steady.begin(); err != nil {
		r.setupErrs = append(r.setupErrs, "the steady client: "+err.Error())
	}

	tallies := make([]*tally, len(loads))
	r.loads = make([]string, len(loads))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, l := range loads {
		tallies[i] = newTally()
		wg.Go(func() {
			what, err := l.run(ctx, h.env, tallies[i])
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				r.setupErrs = append(r.setupErrs, l.id+" "+l.name+": "+err.Error())
			}
			if what != "" {
				r.loads[i] = l.id + " " + l.name + ": " + what
			}
		})
	}
	if len(loads) == 0 {
		<-ctx.Done()
	}
	wg.Wait()
	var err error
	if r.steady, err = h.steady.end(); err != nil {
		r.setupErrs = append(r.setupErrs, err.Error())
		r.steady = newTally()
	}
	r.seconds = time.Since(t0).Seconds()
	cpu1, _ := cpuSeconds(h.srv.Pid())
	r.peakMiB, r.aborted = h.watch.end()
	for _, t := range tallies {
		r.total.merge(t)
	}
	r.legit = r.total.legit
	r.cpuDuring = cpu1 - cpu0

	// Quiet: nothing sends. The first second holds the teardown of what
	// the clients left (their streams, the garbage); whatever exprd still
	// burns after it is work it kept doing for requests that are gone.
	time.Sleep(lingerAfter)
	cpuAt, _ := cpuSeconds(h.srv.Pid())
	tAt := time.Now()
	time.Sleep(max(h.cfg.quiet-lingerAfter, 100*time.Millisecond))
	cpu2, _ := cpuSeconds(h.srv.Pid())
	r.cpuQuiet, r.cpuLinger, r.lingerSecs = cpu2-cpu1, cpu2-cpuAt, time.Since(tAt).Seconds()
	r.rssAfter, _ = vmRSSMiB(h.srv.Pid())
	if g, err := h.srv.Gauges(); err == nil {
		r.goroAfter = g.Goroutines
	}
	r.counted = map[string]float64{}
	for k, v := range h.counters() {
		if d := v - before[k]; d > 0 {
			r.counted[k] = d
		}
	}
	return r
}

func (r *phaseResult) summary() string {
	return fmt.Sprintf("%.1f s; hostile requests %d (untyped %d, no answer %d, not as wanted %d); peak VmRSS %.0f MiB; steady %d calls p50 %s p99 %s (%d not right); legitimate %d (%d not right); CPU %.2f s during, %.2f s in the quiet after (%.2f s from its first second on); VmRSS after %.0f MiB; goroutines %.0f → %.0f",
		r.seconds, r.total.requests, r.total.untyped, r.total.late, r.total.wrongKind, r.peakMiB,
		r.steady.requests, ms(percentile(r.steady.lat, 50)), ms(percentile(r.steady.lat, 99)), r.steady.wrong(), r.legit.requests, r.legit.wrong(),
		r.cpuDuring, r.cpuQuiet, r.cpuLinger, r.rssAfter, r.goroBefore, r.goroAfter)
}

// counters reads exprd's counters that say what bounded a phase: budget
// hits by kind, the memory budget's refusals, the overload manager's
// refusals and cancels, recovered panics, connections the limits closed.
func (h *harness) counters() map[string]float64 {
	out := map[string]float64{}
	resp, err := http.Get("http://" + h.srv.Metrics + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, rest, _ := strings.Cut(line, "{")
		if !strings.Contains(line, "{") {
			name, rest, _ = strings.Cut(line, " ")
		}
		label := ""
		switch name {
		case "exprd_budget_hits_total":
			label = "budget " + labelValue(rest, "kind")
		case "exprd_memory_budget_refusals_total":
			label = "memory-budget refusals"
		case "exprd_overload_refusals_total":
			label = "overload refusals"
		case "exprd_overload_shed_total":
			label = "overload cancels"
		case "exprd_overload_preempted_total":
			label = "overload cancels for a caller within its share"
		case "exprd_panics_total":
			label = "panics"
		case "exprd_connections_closed_total":
			label = "connections closed, " + labelValue(rest, "why")
		default:
			continue
		}
		f := strings.Fields(line)
		v, _ := strconv.ParseFloat(f[len(f)-1], 64)
		out[label] += v
	}
	return out
}

// labelValue is the value of label in a Prometheus sample's labels.
func labelValue(labels, label string) string {
	i := strings.Index(labels, label+`="`)
	if i < 0 {
		return "?"
	}
	v := labels[i+len(label)+2:]
	if j := strings.IndexByte(v, '"'); j >= 0 {
		v = v[:j]
	}
	return v
}

// memLimitOf says what GOMEMLIMIT exprd's environment holds, as the
// report words it.
func memLimitOf(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return "GOMEMLIMIT unknown (" + err.Error() + ")"
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := strings.CutPrefix(string(kv), "GOMEMLIMIT="); ok {
			return "GOMEMLIMIT=" + v + " in its environment"
		}
	}
	return "no GOMEMLIMIT: exprd set the runtime's soft memory limit from its budget, 85% of the budget and a quarter, and its overload line at 90% of that"
}

// tailLog keeps the last max bytes of exprd's log, and counts its lines.
type tailLog struct {
	mu    sync.Mutex
	max   int
	buf   []byte
	lines int
}

func (l *tailLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines += bytes.Count(p, []byte{'\n'})
	l.buf = append(l.buf, p...)
	if len(l.buf) > l.max {
		l.buf = append([]byte(nil), l.buf[len(l.buf)-l.max:]...)
	}
	return len(p), nil
}

func (l *tailLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.buf)
}
