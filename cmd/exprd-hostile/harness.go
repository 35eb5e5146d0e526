package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/exprd/exprd/internal/exprdproc"
)

// env is what the loads share: exprd's address, the settings and the
// payloads, built once.
type env struct {
	addr string
	cfg  *config

	hostileState, legalState string
	legalItems               int
	deepAddress              string
	deepCall                 string
	allocCall                string
	searchQuery              string
	silentCall               string
}

// A load is one hostile case's clients: run sends until ctx ends (each
// client finishing at least one round and every answer it waits for),
// tallies what came back, and describes what it did.
type load struct {
	name string
	run  func(ctx context.Context, e *env, t *tally) (string, error)
}

// The cases, in the order they run alone; the mix runs them all.
func cases() []load {
	return []load{
		{"1 big states", stateFlood},
		{"2 CodeMode, 5 MiB tool", bigAnswers},
		{"3 deep addresses", deepAddresses},
		{"4 search flood", searchFlood},
		{"5 distinct callers", manyCallers(0)},
		{"6 clients that never read", silentReaders},
		{"7 allocating programs", allocatingPrograms},
	}
}

type harness struct {
	ctx          context.Context
	cancel       context.CancelFunc
	cfg          *config
	srv          *exprdproc.Proc
	watch        *watch
	env          *env
	steadyConn   *grpc.ClientConn
	log          *tailLog
	memLimitNote string
}

func startHarness(parent context.Context, cfg *config, manuals string) (*harness, error) {
	// exprdproc starts exprd with this process's environment (exec.Cmd
	// with a nil Env), so GOMEMLIMIT set here reaches exprd alone: this
	// process's runtime read its own at start.
	if err := os.Setenv("GOMEMLIMIT", cfg.memLimit); err != nil {
		return nil, err
	}
	log := &tailLog{max: 32 << 10}
	var logTo io.Writer = log
	if cfg.showLog {
		logTo = io.MultiWriter(log, prefixed{os.Stderr})
	}
	srv, err := exprdproc.Start(cfg.exprd, logTo, "--demo", "--egress-allow", "loopback", "--manuals-dir", manuals)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(parent)
	h := &harness{ctx: ctx, cancel: cancel, cfg: cfg, srv: srv, log: log}
	h.memLimitNote = memLimitOf(srv.Pid())
	h.watch = startWatch(ctx, srv.Pid(), cfg.rssAbortMiB, cancel)
	h.env = buildEnv(srv.Addr, cfg)
	h.steadyConn, err = dialFrom(srv.Addr, steadySource)
	if err != nil {
		h.close()
		return nil, err
	}
	return h, nil
}

func (h *harness) close() {
	if h.steadyConn != nil {
		h.steadyConn.Close()
	}
	h.cancel()
	h.srv.Stop()
}

// runAll runs the baseline, each case alone, then the mix, stopping after
// the phase in which exprd died.
func (h *harness) runAll() []*phaseResult {
	type step struct {
		name  string
		dur   time.Duration
		loads []load
	}
	steps := []step{{"baseline (steady client alone)", h.cfg.baseline, nil}}
	all := cases()
	for _, c := range strings.Split(h.cfg.only, ",") {
		c = strings.TrimSpace(c)
		if c == "mix" {
			mix := cases()
			mix[4] = load{"5 distinct callers", manyCallers(h.cfg.callers)} // callers not seen yet
			steps = append(steps, step{"mix: all at once", h.cfg.mixDuration, mix})
			continue
		}
		i, err := strconv.Atoi(c)
		if err != nil || i < 1 || i > len(all) {
			continue // parseFlags refused it
		}
		d := h.cfg.caseDuration
		if i == 5 {
			d = h.cfg.callersDuration
		}
		steps = append(steps, step{all[i-1].name, d, []load{all[i-1]}})
	}

	var out []*phaseResult
	for _, s := range steps {
		fmt.Fprintf(os.Stderr, "exprd-hostile: %s (%v)…\n", s.name, s.dur)
		r := h.phase(s.name, s.dur, s.loads)
		out = append(out, r)
		fmt.Fprintf(os.Stderr, "exprd-hostile:   %s\n", r.summary())
		if h.watch.crashed.Load() || h.ctx.Err() != nil {
			break
		}
	}
	return out
}

// phaseResult is one row of the table.
type phaseResult struct {
	name       string
	loads      []string // what each load did
	seconds    float64
	total      *tally // every hostile request of the phase
	steady     *tally
	peakMiB    float64
	aborted    bool
	cpuDuring  float64
	cpuQuiet   float64 // the whole quiet period: teardown included
	cpuLinger  float64 // its second half: work still going on
	rssAfter   float64 // VmRSS at the end of the quiet period
	goroBefore float64
	goroAfter  float64
	setupErrs  []string
}

// phase runs loads for dur with the steady client going, then measures
// exprd's CPU in the quiet period that follows.
func (h *harness) phase(name string, dur time.Duration, loads []load) *phaseResult {
	r := &phaseResult{name: name, total: newTally()}
	if g, err := h.srv.Gauges(); err == nil {
		r.goroBefore = g.Goroutines
	}
	ctx, cancel := context.WithTimeout(h.ctx, dur)
	defer cancel()
	h.watch.begin(cancel)
	cpu0, _ := cpuSeconds(h.srv.Pid())
	t0 := time.Now()

	steadyCtx, stopSteady := context.WithCancel(h.ctx)
	steadyDone := make(chan *tally, 1)
	go func() { steadyDone <- steady(steadyCtx, h.steadyConn, h.cfg.steadyDeadline, h.cfg.steadyRate) }()

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
				r.setupErrs = append(r.setupErrs, l.name+": "+err.Error())
			}
			r.loads[i] = what
		})
	}
	if len(loads) == 0 {
		<-ctx.Done()
	}
	wg.Wait()
	stopSteady()
	r.steady = <-steadyDone
	r.seconds = time.Since(t0).Seconds()
	cpu1, _ := cpuSeconds(h.srv.Pid())
	r.peakMiB, r.aborted = h.watch.end()
	for _, t := range tallies {
		r.total.merge(t)
	}
	r.cpuDuring = cpu1 - cpu0

	// Quiet: nothing sends. The first half holds the teardown of what
	// the clients left (their streams, the garbage); whatever exprd still
	// burns in the second half is work it kept doing for requests that
	// are gone.
	time.Sleep(h.cfg.quiet / 2)
	cpuHalf, _ := cpuSeconds(h.srv.Pid())
	time.Sleep(h.cfg.quiet - h.cfg.quiet/2)
	cpu2, _ := cpuSeconds(h.srv.Pid())
	r.cpuQuiet, r.cpuLinger = cpu2-cpu1, cpu2-cpuHalf
	r.rssAfter, _ = vmRSSMiB(h.srv.Pid())
	if g, err := h.srv.Gauges(); err == nil {
		r.goroAfter = g.Goroutines
	}
	return r
}

func (r *phaseResult) summary() string {
	return fmt.Sprintf("%.1f s; hostile requests %d (untyped %d, no answer %d, wrong kind %d); peak VmRSS %.0f MiB; steady %d calls p50 %s p99 %s; CPU %.2f s during, %.2f s quiet after (%.2f s in its second half); VmRSS after %.0f MiB; goroutines %.0f → %.0f",
		r.seconds, r.total.requests, r.total.untyped, r.total.late, r.total.wrongKind, r.peakMiB,
		r.steady.requests, ms(percentile(r.steady.lat, 50)), ms(percentile(r.steady.lat, 99)), r.cpuDuring, r.cpuQuiet, r.cpuLinger, r.rssAfter, r.goroBefore, r.goroAfter)
}

// panics reads exprd_panics_total from /metrics: panics exprd recovered.
func (h *harness) panics() float64 {
	resp, err := http.Get("http://" + h.srv.Metrics + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var n float64
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "exprd_panics_total") {
			f := strings.Fields(sc.Text())
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			n += v
		}
	}
	return n
}

// memLimitOf says what GOMEMLIMIT exprd's environment holds.
func memLimitOf(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := strings.CutPrefix(string(kv), "GOMEMLIMIT="); ok {
			return v
		}
	}
	return "unset"
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
