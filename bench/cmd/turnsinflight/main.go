// Command turnsinflight measures what many AgentLoop turns in flight at
// once cost a real exprd, each waiting on a model that streams, against
// the same turns run by the npm package xsai's generateText in one Node
// process.
//
// The turn: the model calls get_weather, which the client runs (exprd's
// Go client answers exprd's request for it on the stream; xsai's loop
// runs it in node), then answers in a second request with 50 text
// deltas. The model server (model.go, in this process on loopback)
// streams as a hosted model does: the first delta 300 ms after the
// request, then one every 20 ms, each delta carrying the time it was
// written.
//
// For each N (--n, default 100,1000,10000), three phases, each against a
// fresh model server (its own port, so that no TIME_WAIT of one phase's
// connections is in another's way):
//
//   - direct: one Go client process reads N answers at once straight from
//     the model server (SSE, no exprd): the floor of a delta's latency.
//   - exprd: a fresh exprd process (built from this repository, its model
//     the server above, streamed) and one Go client process running N
//     AgentLoop.Run turns at once over N/200 gRPC connections (exprd's
//     --max-streams-per-connection is 256).
//   - xsai: one node process (bench/xsai/inflight.mjs) running N
//     generateText turns at once. generateText does not stream: the model
//     server sends each answer whole, when its stream would have ended.
//   - xsai streamText: the same with streamText, whose requests stream
//     as exprd's do; node reads each delta's stamp on arrival.
//
// The model server holds every turn's first request until all N have
// arrived (the gate), so that all N turns are in flight at once; then,
// after a second to settle, the harness reads the resident set (VmRSS)
// of the process holding the turns (exprd, or node) and, for exprd, its
// goroutines, its heap and stack in use and a heap profile (served by
// --debug-pprof-addr); then it lets the model answer. Memory per turn is
// that resident set less the one read before the turns started, over N.
// CPU per turn is the process's utime+stime (/proc/<pid>/stat) from just
// before the turns start to when the last has ended, over N. A delta's
// latency is its arrival at the Go client less its write time at the
// model server; exprd's added latency is its quantile less the direct
// phase's.
//
//	go run ./cmd/turnsinflight --module .. --n 100,1000,10000 --json results/turnsinflight.json --plot ../benchmarks-inflight.png
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/exprd/exprd/internal/procs"
	"github.com/exprd/exprd/internal/testkit/exprdproc"
	"github.com/exprd/exprd/model/openaicompat"
)

// wantNoFile is the limit of open files the harness and its children ask
// for.
const wantNoFile = 1 << 16

// runAsClient runs this program (or its test binary) as a phase's Go
// client, and exits, when the environment says so.
func runAsClient() {
	if os.Getenv(clientEnv) != "1" {
		return
	}
	if err := clientMain(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "turnsinflight client:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func main() {
	runAsClient()
	var o Options
	flag.StringVar(&o.ModuleDir, "module", "..", "the exprd module's root")
	flag.StringVar(&o.ExprdBin, "exprd-bin", "", "an exprd binary (default: built from --module)")
	ns := flag.String("n", "100,1000,10000", "turns in flight at once, comma-separated")
	flag.StringVar(&o.Profile, "profile-dir", "", "write exprd's heap profiles (before the turns, at the gate, once they ended) here (default: not kept)")
	flag.BoolVar(&o.CPUProfile, "cpu-profile", false, "with --profile-dir, also write exprd's CPU profile over the first 2 s of the answers' streaming (it costs exprd a little CPU)")
	flag.DurationVar(&o.PhaseTimeout, "phase-timeout", 3*time.Minute, "bound on each phase")
	flag.Func("exprd-flag", "a flag to start exprd with, after the harness's (repeat it: --exprd-flag=--adapt-procs=false)", func(v string) error {
		o.ExprdFlags = append(o.ExprdFlags, v)
		return nil
	})
	jsonOut := flag.String("json", "", "write the JSON report to this file (default: stdout)")
	plotOut := flag.String("plot", "", "draw memory per turn and a delta's latency against N into this PNG")
	flag.Parse()
	for f := range strings.SplitSeq(*ns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "turnsinflight: --n %q: want positive integers\n", *ns)
			os.Exit(2)
		}
		o.N = append(o.N, n)
	}
	o.Log = os.Stderr
	rep, err := Run(context.Background(), o)
	if err == nil && *plotOut != "" {
		err = rep.plot(*plotOut)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "turnsinflight:", err)
		os.Exit(1)
	}
	rep.WriteTable(os.Stderr)
	out, _ := json.MarshalIndent(rep, "", "  ")
	out = append(out, '\n')
	if *jsonOut != "" {
		err = os.WriteFile(*jsonOut, out, 0o644)
	} else {
		_, err = os.Stdout.Write(out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "turnsinflight:", err)
		os.Exit(1)
	}
}

// Options configure a run.
type Options struct {
	N            []int
	ModuleDir    string
	ExprdBin     string
	Profile      string // a directory for exprd's profiles ("" : none kept)
	CPUProfile   bool   // and its CPU profile while the answers stream
	PhaseTimeout time.Duration
	// ExprdFlags are added to exprd's command line, after the harness's.
	ExprdFlags []string
	Log        io.Writer
}

// Report is the run's result.
type Report struct {
	Benchmark   string   `json:"benchmark"`
	ExprdFlags  []string `json:"exprd_flags,omitempty"`
	Turn        string   `json:"turn"`
	Method      string   `json:"method"`
	GoVersion   string   `json:"go_version"`
	NodeVersion string   `json:"node_version"`
	XSAIVersion string   `json:"xsai_version"`
	CPUs        int      `json:"cpus"`
	Rows        []Row    `json:"rows"`
	Goals       []Goal   `json:"goals"`
	ElapsedS    float64  `json:"elapsed_s"`
}

// Row is one N's three phases.
type Row struct {
	N      int   `json:"n"`
	Direct Phase `json:"direct"`
	Exprd  Phase `json:"exprd"`
	// XSAI runs generateText; XSAIStream streamText (its requests
	// streamed, as exprd's are).
	XSAI       Phase `json:"xsai"`
	XSAIStream Phase `json:"xsai_stream"`
	// Added is exprd's latency quantiles less direct's; XSAIAdded
	// streamText's less direct's.
	Added     Quantiles `json:"exprd_added_latency_ns"`
	XSAIAdded Quantiles `json:"xsai_stream_added_latency_ns"`
	// MemRatio and CPURatio are exprd's per turn over generateText's;
	// the Stream ones over streamText's.
	MemRatio       float64 `json:"mem_ratio"`
	CPURatio       float64 `json:"cpu_ratio"`
	MemRatioStream float64 `json:"mem_ratio_stream"`
	CPURatioStream float64 `json:"cpu_ratio_stream"`
	// Heap is what exprd's heap in use grew by from before the turns to
	// the gate, in KiB per turn, by where the bytes were allocated
	// (heap.go); HeapSites the same by the function that allocated them;
	// Goroutines exprd's goroutines per turn by the function they run.
	Heap       []Share `json:"exprd_heap_kib"`
	HeapSites  []Share `json:"exprd_heap_sites_kib"`
	Goroutines []Share `json:"exprd_goroutines"`
	// HeapEnded is exprd's heap in use once every turn has ended (after a
	// GC), less before, per turn: what ended turns keep (their events, for
	// --turn-retention), by where.
	HeapEnded           []Share `json:"exprd_heap_ended_kib"`
	HeapEndedKiBPerTurn float64 `json:"exprd_heap_ended_kib_per_turn"`
}

// Phase is one process's figures for N turns.
type Phase struct {
	// BaseRSSMiB is the process's resident set before the turns; GateRSSMiB
	// with all N in flight (at the gate); PeakRSSMiB its high-water mark.
	BaseRSSMiB float64 `json:"base_rss_mib,omitempty"`
	GateRSSMiB float64 `json:"gate_rss_mib,omitempty"`
	PeakRSSMiB float64 `json:"peak_rss_mib,omitempty"`
	// KiBPerTurn is (gate - base) / N; PeakKiBPerTurn (peak - base) / N.
	KiBPerTurn     float64 `json:"kib_per_turn,omitempty"`
	PeakKiBPerTurn float64 `json:"peak_kib_per_turn,omitempty"`
	// CPUPerTurnNS is the process's CPU over the turns / N (10 ms ticks).
	CPUPerTurnNS int64 `json:"cpu_per_turn_ns,omitempty"`
	// At the gate, exprd only: goroutines, heap and stacks in use (the
	// runtime's MemStats after a GC, with the heap profile), per turn as
	// the growth over before the turns.
	Goroutines           int     `json:"goroutines,omitempty"`
	GoroutinesPerTurn    float64 `json:"goroutines_per_turn,omitempty"`
	HeapInuseKiBPerTurn  float64 `json:"heap_inuse_kib_per_turn,omitempty"`
	StackInuseKiBPerTurn float64 `json:"stack_inuse_kib_per_turn,omitempty"`
	// NoFile is the soft RLIMIT_NOFILE of the process holding the turns.
	NoFile int64 `json:"nofile,omitempty"`
	// ModelConns is how many connections the model server accepted in the
	// phase; ModelConnsMax the most open at once.
	ModelConns    int64 `json:"model_conns"`
	ModelConnsMax int64 `json:"model_conns_max"`
	// GateS is how long the N turns took to all reach the model; TurnsS
	// from the start to the last turn's end.
	GateS  float64 `json:"gate_s"`
	TurnsS float64 `json:"turns_s"`
	// ModelServerCPUNS is this process's CPU over the turns (the model
	// server's, mostly); LoadAvg the machine's 1-minute load average at the
	// phase's start and end (other work on the machine shows there).
	ModelServerCPUNS int64        `json:"model_server_cpu_ns"`
	LoadAvg          [2]float64   `json:"load_avg"`
	Client           clientResult `json:"client"`
}

// Goal is one of the goals, judged from what was measured.
type Goal struct {
	What     string  `json:"what"`
	Measured float64 `json:"measured"`
	Limit    float64 `json:"limit"`
	Met      bool    `json:"met"`
}

const method = "Per N, three phases, each with a fresh model server and a fresh process holding the turns: direct (a Go client reads N answers from the model server), " +
	"exprd (a fresh exprd, its provider streamed, and a Go client running N AgentLoop.Run turns over N/200 gRPC connections), xsai (one node process running N generateText turns, answered whole), " +
	"xsai streamText (the same with streamText, streamed). " +
	"The model server holds each turn's first request until all N have arrived; a second later the harness reads the VmRSS of the process holding the turns (exprd or node), then lets the model answer. " +
	"Memory per turn = (that RSS - the RSS before the turns) / N; CPU per turn = the process's utime+stime (/proc/<pid>/stat, 10 ms ticks) from just before the turns to the last turn's end / N; " +
	"a delta's latency = arrival at the Go client (node for streamText) - the model server's write time (wall clock, one machine); the added latency = a quantile - the direct phase's. " +
	"Model server, exprd and clients share the machine's cores."

// Run runs the benchmark.
func Run(ctx context.Context, o Options) (*Report, error) {
	began := time.Now()
	logf := func(format string, args ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, "turnsinflight: "+format+"\n", args...)
		}
	}
	if o.PhaseTimeout <= 0 {
		o.PhaseTimeout = 3 * time.Minute
	}
	module, err := filepath.Abs(o.ModuleDir)
	if err != nil {
		return nil, err
	}
	xsaiDir := filepath.Join(module, "bench", "xsai")
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	nodeVersion, err := exec.CommandContext(ctx, node, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("node --version: %w", err)
	}
	var xsaiPkg struct{ Version string }
	if b, err := os.ReadFile(filepath.Join(xsaiDir, "node_modules", "xsai", "package.json")); err != nil || json.Unmarshal(b, &xsaiPkg) != nil {
		return nil, fmt.Errorf("xsai is not installed in %s: run npm ci there (%v)", xsaiDir, err)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	// 10,000 turns hold 10,000 model connections in exprd and in the model
	// server, twice that in node (its fetch opens a second connection for
	// a turn's second request), a few at once: the limit of open files
	// goes up for this process and its children.
	nofile, err := raiseNoFile(wantNoFile)
	if err != nil {
		return nil, err
	}
	if need := uint64(slices.Max(o.N))*2 + 1000; nofile < need {
		logf("the limit of open files is %d, under the %d that %d turns may need in node and in the model server", nofile, need, slices.Max(o.N))
	}
	tmp, err := os.MkdirTemp("", "turnsinflight-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bin := o.ExprdBin
	if bin == "" {
		logf("building exprd from %s", module)
		if bin, err = exprdproc.Build(ctx, module, tmp); err != nil {
			return nil, err
		}
	}
	// The environment must not send exprd's telemetry anywhere.
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") {
			os.Unsetenv(k)
		}
	}
	rep := &Report{Benchmark: "turns-in-flight", Method: method, ExprdFlags: o.ExprdFlags,
		Turn: fmt.Sprintf("two model requests: the model calls %s (run by the client) %v after the request, then answers with %d text deltas, the first %v after the request, one every %v",
			toolName, firstDelta, textDeltas, firstDelta, deltaPeriod),
		GoVersion: runtime.Version(), NodeVersion: strings.TrimSpace(string(nodeVersion)), XSAIVersion: xsaiPkg.Version, CPUs: runtime.NumCPU()}
	h := &harness{o: o, logf: logf, self: self, node: node, xsaiDir: xsaiDir, exprdBin: bin, tmp: tmp}
	for _, n := range o.N {
		row := Row{N: n}
		if row.Direct, err = h.direct(ctx, n); err != nil {
			return nil, fmt.Errorf("n=%d, direct: %w", n, err)
		}
		if row.Exprd, err = h.exprd(ctx, n, &row); err != nil {
			return nil, fmt.Errorf("n=%d, exprd: %w", n, err)
		}
		if row.XSAI, err = h.xsai(ctx, n, false); err != nil {
			return nil, fmt.Errorf("n=%d, xsai: %w", n, err)
		}
		if row.XSAIStream, err = h.xsai(ctx, n, true); err != nil {
			return nil, fmt.Errorf("n=%d, xsai streamText: %w", n, err)
		}
		d, e := row.Direct.Client.Latency, row.Exprd.Client.Latency
		row.Added, row.XSAIAdded = e.less(d), row.XSAIStream.Client.Latency.less(d)
		row.MemRatio = ratio(row.Exprd.KiBPerTurn, row.XSAI.KiBPerTurn)
		row.CPURatio = ratio(float64(row.Exprd.CPUPerTurnNS), float64(row.XSAI.CPUPerTurnNS))
		row.MemRatioStream = ratio(row.Exprd.KiBPerTurn, row.XSAIStream.KiBPerTurn)
		row.CPURatioStream = ratio(float64(row.Exprd.CPUPerTurnNS), float64(row.XSAIStream.CPUPerTurnNS))
		rep.Rows = append(rep.Rows, row)
		logf("N=%d: exprd %.1f KiB and %s CPU a turn, generateText %.1f KiB and %s, streamText %.1f KiB and %s; a delta's p50/p99 (ms) direct %s, through exprd %s, streamText %s",
			n, row.Exprd.KiBPerTurn, ms(row.Exprd.CPUPerTurnNS), row.XSAI.KiBPerTurn, ms(row.XSAI.CPUPerTurnNS),
			row.XSAIStream.KiBPerTurn, ms(row.XSAIStream.CPUPerTurnNS), d.p50p99(), e.p50p99(), row.XSAIStream.Client.Latency.p50p99())
	}
	rep.Goals = rep.judge()
	rep.ElapsedS = round(time.Since(began).Seconds(), 2)
	return rep, nil
}

// judge reports each goal against the rows measured: at the largest N
// (10,000 when run) for memory, at 1,000 for the latency, at every N for
// the CPU ratio (the worst).
func (r *Report) judge() []Goal {
	var goals []Goal
	row := func(n int) *Row {
		for i := range r.Rows {
			if r.Rows[i].N == n {
				return &r.Rows[i]
			}
		}
		return nil
	}
	if big := row(10000); big != nil {
		goals = append(goals,
			Goal{What: "exprd's memory per turn at 10,000 turns in flight (KiB; 10,000 within 1 GiB)", Measured: round(big.Exprd.KiBPerTurn, 1), Limit: 100},
			Goal{What: "exprd's memory per turn over xsai's at 10,000 turns", Measured: big.MemRatio, Limit: 0.5})
	}
	if k := row(1000); k != nil {
		goals = append(goals, Goal{What: "a text delta's added latency through exprd, p99, at 1,000 turns (ms)", Measured: round(float64(k.Added.P99)/1e6, 3), Limit: 2})
	}
	for _, rw := range r.Rows {
		goals = append(goals, Goal{What: fmt.Sprintf("exprd's CPU per turn over xsai's at %d turns", rw.N), Measured: rw.CPURatio, Limit: 0.5})
	}
	for i := range goals {
		goals[i].Met = goals[i].Measured <= goals[i].Limit
	}
	return goals
}

type harness struct {
	o                        Options
	logf                     func(string, ...any)
	self, node, xsaiDir, tmp string
	exprdBin                 string
}

// gated is what a phase's gate saw: the model server, the time the N
// turns took to reach it, and a function the phase runs there (the
// readings) before the model answers.
type gated struct {
	model *modelServer
	kind  int
	n     int
	// before runs once the client is ready, before its turns start;
	// atGate once all n have reached the model, before it answers;
	// released right after.
	before, atGate func() error
	released       func()
}

// runPhase runs a client process through a phase: ready, the turns (held
// at the gate while g.atGate runs), done; then its report.
func (h *harness) runPhase(ctx context.Context, cmd *exec.Cmd, g gated, after func() error) (*Phase, error) {
	ctx, cancel := context.WithTimeout(ctx, h.o.PhaseTimeout)
	defer cancel()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer cmd.Process.Kill()
	lines := bufio.NewReader(stdout)
	expect := func(want string) error {
		line, err := lines.ReadString('\n')
		if err != nil || line != want+"\n" {
			return fmt.Errorf("the client said %q (%v), want %q", line, err, want)
		}
		return nil
	}
	p := &Phase{}
	p.LoadAvg[0] = loadAvg()
	opened0 := g.model.opened.Load()
	err = func() error {
		if err := expect(readyLine); err != nil {
			return err
		}
		if g.before != nil {
			if err := g.before(); err != nil {
				return err
			}
		}
		all, release := g.model.arm(g.kind, g.n)
		defer release()
		t0, cpu0 := time.Now(), selfCPU()
		if _, err := io.WriteString(stdin, "\n"); err != nil {
			return err
		}
		select {
		case <-all:
		case <-ctx.Done():
			return fmt.Errorf("%d of %d turns reached the model within the phase's bound", g.model.seq.Load(), g.n)
		}
		p.GateS = round(time.Since(t0).Seconds(), 2)
		time.Sleep(time.Second) // let what the turns set up settle
		if g.atGate != nil {
			if err := g.atGate(); err != nil {
				return err
			}
		}
		release()
		if g.released != nil {
			g.released()
		}
		done := make(chan error, 1)
		go func() { done <- expect(doneLine) }()
		select {
		case err := <-done:
			if err != nil {
				return err
			}
		case <-ctx.Done():
			return errors.New("the turns did not end within the phase's bound")
		}
		p.TurnsS = round(time.Since(t0).Seconds(), 2)
		p.ModelServerCPUNS = (selfCPU() - cpu0).Nanoseconds()
		p.LoadAvg[1] = loadAvg()
		if after != nil {
			if err := after(); err != nil {
				return err
			}
		}
		_, err := io.WriteString(stdin, "\n")
		return err
	}()
	var out []byte
	if err == nil {
		out, err = io.ReadAll(lines)
	}
	if werr := cmd.Wait(); err == nil {
		err = werr
	}
	if err != nil {
		return nil, fmt.Errorf("%v\n%s", err, tail(stderr.String()))
	}
	if err := json.Unmarshal(out, &p.Client); err != nil {
		return nil, fmt.Errorf("the client's report: %v\n%s", err, out)
	}
	if p.Client.Errors > 0 || p.Client.Verified != g.n {
		return nil, fmt.Errorf("%d of %d turns verified, %d failed; the first: %s", p.Client.Verified, g.n, p.Client.Errors, p.Client.FirstError)
	}
	if msg := g.model.problem(); msg != "" {
		return nil, errors.New(msg)
	}
	p.ModelConns, p.ModelConnsMax = g.model.opened.Load()-opened0, g.model.maxOpen.Load()
	return p, nil
}

func (h *harness) goClient(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, h.self, args...)
	cmd.Env = append(os.Environ(), clientEnv+"=1")
	return cmd
}

// direct reads N answers straight from the model server.
func (h *harness) direct(ctx context.Context, n int) (Phase, error) {
	model, err := startModel()
	if err != nil {
		return Phase{}, err
	}
	defer model.close()
	h.logf("N=%d direct", n)
	p, err := h.runPhase(ctx, h.goClient(ctx, "-mode", "direct", "-n", fmt.Sprint(n), "-model-url", model.baseURL()),
		gated{model: model, kind: kindAnswer, n: n}, nil)
	if err != nil {
		return Phase{}, err
	}
	if p.Client.Deltas != n*textDeltas {
		return Phase{}, fmt.Errorf("%d deltas read, want %d", p.Client.Deltas, n*textDeltas)
	}
	return *p, nil
}

// exprd runs N AgentLoop turns at once on a fresh exprd; it sets row's
// breakdowns of exprd's heap and goroutines.
func (h *harness) exprd(ctx context.Context, n int, row *Row) (Phase, error) {
	model, err := startModel()
	if err != nil {
		return Phase{}, err
	}
	defer model.close()
	dir, err := os.MkdirTemp(h.tmp, "exprd-")
	if err != nil {
		return Phase{}, err
	}
	cfgPath := filepath.Join(dir, "models.json")
	stream, noRetries := true, 0
	cfg, _ := json.Marshal(openaicompat.Config{Default: "inflight", Providers: map[string]openaicompat.ProviderConfig{
		"inflight": {BaseURL: model.baseURL(), Model: "inflight-model", Stream: &stream, MaxRetries: &noRetries},
	}})
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		return Phase{}, err
	}
	pprofAddr, err := freeAddr()
	if err != nil {
		return Phase{}, err
	}
	log := &tailWriter{}
	// Rate limits raised: one caller starts every turn at once.
	srv, err := exprdproc.Start(h.exprdBin, log, append([]string{"--models-config", cfgPath, "--debug-pprof-addr", pprofAddr,
		"--rate-limit", "1000000", "--rate-burst", "1000000"}, h.o.ExprdFlags...)...)
	if err != nil {
		return Phase{}, err
	}
	defer srv.Stop()
	pid := srv.Pid()
	var (
		baseRSS int64
		cpu0    time.Duration
		heap0   *heapSnapshot
		gs0     map[string]float64
	)
	p := Phase{}
	g := gated{model: model, kind: kindFirst, n: n}
	g.before = func() (err error) {
		baseRSS = statusKiB(pid, "VmRSS")
		if heap0, err = readHeap(pprofAddr, h.o.Profile, fmt.Sprintf("exprd-heap-%d-before", n)); err != nil {
			return err
		}
		if gs0, err = readGoroutines(pprofAddr); err != nil {
			return err
		}
		cpu0, err = procs.ProcessCPU(pid)
		return err
	}
	g.atGate = func() error {
		p.GateRSSMiB = mib(statusKiB(pid, "VmRSS"))
		heap1, err := readHeap(pprofAddr, h.o.Profile, fmt.Sprintf("exprd-heap-%d-gate", n))
		if err != nil {
			return err
		}
		gs1, err := readGoroutines(pprofAddr)
		if err != nil {
			return err
		}
		row.Heap, row.HeapSites = shares(heap0.where, heap1.where, n, 12, 1024), shares(heap0.site, heap1.site, n, 16, 1024)
		row.Goroutines = shares(gs0, gs1, n, 10, 1)
		p.Goroutines = int(sum(gs1))
		p.GoroutinesPerTurn = round((sum(gs1)-sum(gs0))/float64(n), 2)
		perTurn := func(stat string) float64 {
			return round((heap1.memStats[stat]-heap0.memStats[stat])/1024/float64(n), 2)
		}
		p.HeapInuseKiBPerTurn, p.StackInuseKiBPerTurn = perTurn("HeapInuse"), perTurn("Stack")
		return nil
	}
	var cpuProfile sync.WaitGroup
	var cpuProfileErr error
	if h.o.CPUProfile && h.o.Profile != "" {
		g.released = func() {
			cpuProfile.Go(func() {
				cpuProfileErr = fetch("http://"+pprofAddr+"/debug/pprof/profile?seconds=2", filepath.Join(h.o.Profile, fmt.Sprintf("exprd-cpu-%d.pb.gz", n)))
			})
		}
	}
	h.logf("N=%d exprd", n)
	phase, err := h.runPhase(ctx, h.goClient(ctx, "-mode", "exprd", "-n", fmt.Sprint(n), "-addr", srv.Addr), g, func() error {
		cpu1, err := procs.ProcessCPU(pid)
		if err != nil {
			return err
		}
		p.CPUPerTurnNS = (cpu1 - cpu0).Nanoseconds() / int64(n)
		p.PeakRSSMiB = mib(peakRSSKiB(pid))
		if cpuProfile.Wait(); cpuProfileErr != nil {
			return cpuProfileErr
		}
		ended, err := readHeap(pprofAddr, h.o.Profile, fmt.Sprintf("exprd-heap-%d-ended", n))
		if err != nil {
			return err
		}
		row.HeapEnded = shares(heap0.where, ended.where, n, 6, 1024)
		row.HeapEndedKiBPerTurn = round((sum(ended.where)-sum(heap0.where))/1024/float64(n), 2)
		return nil
	})
	if err != nil {
		return Phase{}, fmt.Errorf("%v\nexprd's log:\n%s", err, log)
	}
	phase.GateRSSMiB, phase.PeakRSSMiB, phase.CPUPerTurnNS = p.GateRSSMiB, p.PeakRSSMiB, p.CPUPerTurnNS
	phase.Goroutines, phase.GoroutinesPerTurn, phase.HeapInuseKiBPerTurn, phase.StackInuseKiBPerTurn =
		p.Goroutines, p.GoroutinesPerTurn, p.HeapInuseKiBPerTurn, p.StackInuseKiBPerTurn
	phase.NoFile = limitNoFile(pid)
	phase.setMemory(mib(baseRSS), n)
	if phase.Client.Deltas != n*textDeltas {
		return Phase{}, fmt.Errorf("%d deltas came, want %d", phase.Client.Deltas, n*textDeltas)
	}
	return *phase, nil
}

// xsai runs N generateText turns (streamText's with stream) at once in
// one node process.
func (h *harness) xsai(ctx context.Context, n int, stream bool) (Phase, error) {
	model, err := startModel()
	if err != nil {
		return Phase{}, err
	}
	defer model.close()
	args := []string{"inflight.mjs", "--base-url", model.baseURL(), "--n", fmt.Sprint(n)}
	name := "xsai"
	if stream {
		args, name = append(args, "--stream"), "xsai streamText"
	}
	cmd := exec.CommandContext(ctx, h.node, args...)
	cmd.Dir = h.xsaiDir
	var (
		pid     int
		baseRSS int64
		cpu0    time.Duration
		p       Phase
	)
	g := gated{model: model, kind: kindFirst, n: n}
	g.before = func() (err error) {
		pid = cmd.Process.Pid
		baseRSS = statusKiB(pid, "VmRSS")
		cpu0, err = procs.ProcessCPU(pid)
		return err
	}
	g.atGate = func() error {
		p.GateRSSMiB = mib(statusKiB(pid, "VmRSS"))
		return nil
	}
	h.logf("N=%d %s", n, name)
	phase, err := h.runPhase(ctx, cmd, g, func() error {
		cpu1, err := procs.ProcessCPU(pid)
		p.CPUPerTurnNS = (cpu1 - cpu0).Nanoseconds() / int64(n)
		p.PeakRSSMiB = mib(peakRSSKiB(pid))
		p.NoFile = limitNoFile(pid)
		return err
	})
	if err != nil {
		return Phase{}, err
	}
	phase.GateRSSMiB, phase.PeakRSSMiB, phase.CPUPerTurnNS, phase.NoFile = p.GateRSSMiB, p.PeakRSSMiB, p.CPUPerTurnNS, p.NoFile
	phase.setMemory(mib(baseRSS), n)
	if stream && phase.Client.Deltas != n*textDeltas {
		return Phase{}, fmt.Errorf("%d deltas came, want %d", phase.Client.Deltas, n*textDeltas)
	}
	return *phase, nil
}

func (p *Phase) setMemory(base float64, n int) {
	p.BaseRSSMiB = round(base, 2)
	p.KiBPerTurn = round((p.GateRSSMiB-base)*1024/float64(n), 2)
	p.PeakKiBPerTurn = round((p.PeakRSSMiB-base)*1024/float64(n), 2)
	p.GateRSSMiB, p.PeakRSSMiB = round(p.GateRSSMiB, 2), round(p.PeakRSSMiB, 2)
}

// freeAddr is a loopback address free a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// loadAvg is the machine's 1-minute load average.
func loadAvg() float64 {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

func selfCPU() time.Duration {
	d, _ := procs.CPUTime()
	return d
}

// limitNoFile is a process's soft limit of open files (0 when unread).
func limitNoFile(pid int) int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "Max open files"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				v, _ := strconv.ParseInt(f[0], 10, 64)
				return v
			}
		}
	}
	return 0
}

func mib(kib int64) float64 { return float64(kib) / 1024 }

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return round(a/b, 3)
}

func round(f float64, digits int) float64 {
	p := 1.0
	for range digits {
		p *= 10
	}
	if f < 0 {
		return -float64(int64(-f*p+0.5)) / p
	}
	return float64(int64(f*p+0.5)) / p
}

// less is q's quantiles less base's: the latency q adds.
func (q Quantiles) less(base Quantiles) Quantiles {
	return Quantiles{N: q.N, P50: q.P50 - base.P50, P90: q.P90 - base.P90, P99: q.P99 - base.P99, Max: q.Max - base.Max, Mean: q.Mean - base.Mean}
}

func (q Quantiles) p50p99() string {
	return fmt.Sprintf("%.2f/%.2f", float64(q.P50)/1e6, float64(q.P99)/1e6)
}

func ms(ns int64) string { return fmt.Sprintf("%.3f ms", float64(ns)/1e6) }

// tailWriter keeps the last 16 KiB written to it (exprd's log).
type tailWriter struct{ b []byte }

func (t *tailWriter) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 16<<10 {
		t.b = slices.Clone(t.b[len(t.b)-16<<10:])
	}
	return len(p), nil
}

func (t *tailWriter) String() string { return string(t.b) }

func tail(s string) string {
	if len(s) > 4000 {
		return "..." + s[len(s)-4000:]
	}
	return s
}

// WriteTable writes the report for people.
func (r *Report) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "\nTurns in flight: exprd vs xsai %s (node %s, %s, %d CPUs)\n%s\n\n", r.XSAIVersion, r.NodeVersion, r.GoVersion, r.CPUs, r.Turn)
	fmt.Fprintf(w, "%7s | %-42s | %-38s | %s\n", "N", "memory per turn (KiB): exprd, gen, stream", "CPU per turn (ms): exprd, gen, stream",
		"delta latency p50/p99 (ms): direct, exprd, streamText; added: exprd, streamText")
	for _, row := range r.Rows {
		d, e, x := row.Direct.Client.Latency, row.Exprd.Client.Latency, row.XSAIStream.Client.Latency
		fmt.Fprintf(w, "%7d | %7.1f %7.1f %7.1f (%.2fx, %.2fx) | %6.3f %6.3f %6.3f (%.2fx, %.2fx) | %s %s %s; %s %s\n", row.N,
			row.Exprd.KiBPerTurn, row.XSAI.KiBPerTurn, row.XSAIStream.KiBPerTurn, row.MemRatio, row.MemRatioStream,
			float64(row.Exprd.CPUPerTurnNS)/1e6, float64(row.XSAI.CPUPerTurnNS)/1e6, float64(row.XSAIStream.CPUPerTurnNS)/1e6, row.CPURatio, row.CPURatioStream,
			d.p50p99(), e.p50p99(), x.p50p99(), row.Added.p50p99(), row.XSAIAdded.p50p99())
		fmt.Fprintf(w, "        exprd: %d goroutines (%.2f a turn), heap %.1f KiB and stacks %.1f KiB a turn; model connections %d (most open %d); peak %.1f KiB a turn\n",
			row.Exprd.Goroutines, row.Exprd.GoroutinesPerTurn, row.Exprd.HeapInuseKiBPerTurn, row.Exprd.StackInuseKiBPerTurn,
			row.Exprd.ModelConns, row.Exprd.ModelConnsMax, row.Exprd.PeakKiBPerTurn)
		for _, s := range row.Heap {
			fmt.Fprintf(w, "          %-60s %8.2f KiB a turn (%4.1f%%)\n", s.Where, s.PerTurn, s.Percent)
		}
		fmt.Fprintf(w, "        exprd's heap once the turns ended (after a GC): %.1f KiB an ended turn more than before\n", row.HeapEndedKiBPerTurn)
		for _, s := range row.Goroutines {
			fmt.Fprintf(w, "          goroutines in %-60s %5.2f a turn\n", s.Where, s.PerTurn)
		}
	}
	fmt.Fprintln(w)
	for _, g := range r.Goals {
		verdict := "met"
		if !g.Met {
			verdict = "NOT met"
		}
		fmt.Fprintf(w, "%-75s %10.3f (goal <= %g): %s\n", g.What, g.Measured, g.Limit, verdict)
	}
	fmt.Fprintf(w, "%.1f s\n\n", r.ElapsedS)
}
