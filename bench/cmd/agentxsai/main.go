// Command agentxsai benchmarks exprd's AgentLoop against the npm package
// xsai's generateText on the same two-step turn: the model calls a tool,
// gets its result, then answers with fixed text. Three workloads
// (workload.go) differ in the tool and in what exprd streams:
//
//   - http-tool (the default): the math provider's add over HTTP, which
//     gives {"result": 5}. exprd runs it with its UTCP executor; its client
//     is this program run again as a worker (a process of its own) that
//     drives exprd.v1.AgentLoop/Run through the Go SDK (client package).
//     The xsai side is bench/xsai/turn.mjs, whose tool's execute makes the
//     same GET the UTCP executor makes.
//   - client-tool: get_weather, which runs in the calling node process on
//     both sides. exprd's client is bench/xsai/agentloop.mjs over
//     @grpc/grpc-js, the tool declared client-run (EXECUTOR_CLIENT) and
//     answered on the AgentLoop stream; the xsai side is turn.mjs with
//     the tool's execute in process.
//   - client-tool-answer: the same turn, exprd's Start naming every
//     informational event in omit_events, so that exprd sends only the
//     tool request and done: the answer without the play-by-play.
//
// Both sides talk to the same scripted OpenAI-compatible server
// (model/scripted, a loop script without any delay), served by this
// process on loopback with the math provider (demo/providers). The
// exprd side is a real exprd binary, built from this repository and
// started as a child with --models-config naming the scripted server and
// --manuals-dir registering the math manual, the same for both workloads.
//
// Fairness: exprd's turn crosses gRPC to another process (client → exprd
// → model and tool, and every event streamed back), where xsai runs the
// loop inside the calling process; that hop is part of what exprd's
// number measures. Both make the same two model requests per turn over
// keep-alive HTTP/1.1 to the same server. By default exprd's provider is
// configured non-streamed (stream: false) as generateText always is, so
// both get the same reply bodies; --stream measures exprd with SSE
// replies instead. The scripted server adds no delay. Rounds alternate
// the two sides (and which goes first) so that the load of a shared
// machine falls on both alike; each round starts a fresh client process
// of each side and warms it up before measuring. exprd itself runs once
// for all rounds, as a server does.
//
// CPU: exprd's CPU per turn is its process's utime+stime from
// /proc/<pid>/stat (10 ms ticks), read when the round's client has
// finished its warm-up (the client waits for the harness there) and again
// when the client has exited, summed over the rounds and divided by their
// measured turns: warm-up excluded. Each client reports its own CPU over
// the measured turns (process.cpuUsage in node, getrusage in Go).
//
// Usage (from bench/):
//
//	go run ./cmd/agentxsai [--workload http-tool|client-tool|client-tool-answer] [--rounds 5] [--turns 300] [--warmup 1000] [--json out.json]
//
// It prints a table on stderr and the report as JSON on stdout (or into
// --json). It runs `npm ci` in bench/xsai when node_modules does not hold
// the packages package-lock.json pins.
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/exprd/exprd/demo/providers"
	"github.com/exprd/exprd/internal/procs"
	"github.com/exprd/exprd/internal/testkit/exprdproc"
	"github.com/exprd/exprd/model/openaicompat"
	"github.com/exprd/exprd/model/scripted"
)

// runAsChild runs this program (or its test binary) as the child the
// environment names, the Go client worker or the gRPC floor, and exits;
// it returns when the environment names none.
func runAsChild() {
	var err error
	switch name := os.Getenv(floorEnv); {
	case os.Getenv(workerEnv) == "1":
		err = workerMain(os.Args[1:])
	case name != "":
		err = floorMain(name)
	default:
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentxsai:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func main() {
	runAsChild()
	var o Options
	fs := flag.NewFlagSet("agentxsai", flag.ExitOnError)
	fs.StringVar(&o.Workload, "workload", workloads[0].name, "the turn to measure: http-tool, client-tool or client-tool-answer")
	fs.IntVar(&o.Rounds, "rounds", 5, "rounds, each running both sides")
	fs.IntVar(&o.Turns, "turns", 300, "measured turns per side per round")
	// Node's JIT takes hundreds of turns to settle: xsai's turn took 4.8 ms
	// after 10 warm-up turns and 1.2 ms after 1,000, the node client's
	// AgentLoop turn 2.6 ms and 1.7 ms. Measuring before that compares
	// cold code on both sides.
	fs.IntVar(&o.Warmup, "warmup", 1000, "turns per side per round before measuring (node's JIT needs hundreds)")
	fs.BoolVar(&o.Stream, "stream", false, "configure exprd's provider streamed (SSE); xsai's generateText never streams")
	fs.StringVar(&o.ModuleDir, "module", "", "the exprd module's root (default: found above the working directory)")
	fs.StringVar(&o.ExprdBin, "exprd-bin", "", "an exprd binary to run (default: built from --module)")
	fs.StringVar(&o.XSAIDir, "xsai-dir", "", "the xsai side's directory (default: <module>/bench/xsai)")
	jsonOut := fs.String("json", "", "write the JSON report to this file instead of stdout")
	verbose := fs.Bool("v", false, "copy exprd's log to stderr")
	_ = fs.Parse(os.Args[1:])
	o.Log = os.Stderr
	if *verbose {
		o.ExprdLog = os.Stderr
	}
	ctx := context.Background()
	rep, err := Run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentxsai:", err)
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
		fmt.Fprintln(os.Stderr, "agentxsai:", err)
		os.Exit(1)
	}
}

// Options configure a run.
type Options struct {
	Workload              string // empty: the first of workloads
	Rounds, Turns, Warmup int
	Stream                bool
	ModuleDir             string
	ExprdBin              string
	XSAIDir               string
	// Log receives progress lines (nil: none); ExprdLog exprd's log.
	Log, ExprdLog io.Writer
}

// Report is the run's result, as JSON for the report generator.
type Report struct {
	Benchmark     string `json:"benchmark"`
	Workload      string `json:"workload"`
	Turn          string `json:"turn"`
	ExprdClient   string `json:"exprd_client"`
	Rounds        int    `json:"rounds"`
	TurnsPerRound int    `json:"turns_per_round"`
	WarmupPerRnd  int    `json:"warmup_per_round"`
	ExprdStream   bool   `json:"exprd_stream"`
	GoVersion     string `json:"go_version"`
	NodeVersion   string `json:"node_version"`
	XSAIVersion   string `json:"xsai_version"`
	// NodeModules are the versions of bench/xsai's dependencies.
	NodeModules map[string]string `json:"node_modules"`
	CPUs        int               `json:"cpus"`
	Exprd       Side              `json:"exprd"`
	XSAI        Side              `json:"xsai"`
	// Floor is the exprd side's client against the gRPC floor (floor.go),
	// for the node-client workloads; FloorRatio its median over xsai's.
	Floor      *Side   `json:"grpc_floor,omitempty"`
	FloorRatio float64 `json:"floor_ratio,omitempty"`
	// Share is exprd's own share of its side's turn, the median's time
	// over the floor's, as a part of xsai's whole turn; RoundShares the
	// same a round (that round's medians); ShareGoal its goal.
	Share        float64   `json:"share,omitempty"`
	RoundShares  []float64 `json:"round_shares,omitempty"`
	ShareMin     float64   `json:"share_min,omitempty"`
	ShareMax     float64   `json:"share_max,omitempty"`
	ShareGoal    float64   `json:"share_goal,omitempty"`
	ShareGoalMet bool      `json:"share_goal_met"`
	Ratio        float64   `json:"ratio"`
	RoundRatios  []float64 `json:"round_ratios"`
	RatioMin     float64   `json:"ratio_min"`
	RatioMax     float64   `json:"ratio_max"`
	Goal         float64   `json:"goal"`
	GoalMet      bool      `json:"goal_met"`
	// CPUGoalNS is exprd's CPU per turn to stay under (0: none);
	// CPURatio is the exprd side's CPU per turn, exprd's and its client's,
	// over the xsai side's.
	CPUGoalNS  int64   `json:"cpu_goal_ns,omitempty"`
	CPUGoalMet bool    `json:"cpu_goal_met"`
	CPURatio   float64 `json:"cpu_ratio"`
	CPUWindow  string  `json:"cpu_window"`
	// ScriptedRequests is how many chat requests the scripted server
	// answered, every one checked (2 per turn, warm-up included).
	ScriptedRequests int `json:"scripted_requests"`
	// HarnessPeakRSSMiB is this process's: the scripted server, the math
	// provider and the bookkeeping.
	HarnessPeakRSSMiB float64 `json:"harness_peak_rss_mib"`
	ElapsedS          float64 `json:"elapsed_s"`
	Fairness          string  `json:"fairness"`
}

// Side is one side's numbers over all rounds. Times are per turn, in
// nanoseconds, over all measured turns; the spread is the lowest and the
// highest of the rounds' medians.
type Side struct {
	MedianNS         int64   `json:"median_ns"`
	P10NS            int64   `json:"p10_ns"`
	P90NS            int64   `json:"p90_ns"`
	RoundMediansNS   []int64 `json:"round_medians_ns"`
	MinRoundMedianNS int64   `json:"min_round_median_ns"`
	MaxRoundMedianNS int64   `json:"max_round_median_ns"`
	Turns            int     `json:"turns"`
	VerifiedTurns    int     `json:"verified_turns"`
	ToolCalls        int     `json:"tool_calls"`
	// ClosedEarly counts the side's model requests (warm-up included)
	// whose connection the client closed before the scripted server's
	// last write returned: complete replies, but connections not kept.
	ClosedEarly int `json:"closed_early_requests"`
	// ClientPeakRSSMiB is the peak RSS (VmHWM) of the process running the
	// turns, the highest over the rounds: node for xsai, the Go client for
	// exprd.
	ClientPeakRSSMiB float64 `json:"client_peak_rss_mib"`
	// ServerPeakRSSMiB is the exprd process's VmHWM (exprd side only).
	ServerPeakRSSMiB float64 `json:"server_peak_rss_mib,omitempty"`
	// TotalPeakRSSMiB adds them up: what the side costs in memory.
	TotalPeakRSSMiB float64 `json:"total_peak_rss_mib"`
	// ClientCPUPerTurnNS is the client process's CPU per measured turn;
	// ServerCPUPerTurnNS exprd's (exprd side only), also per round.
	ClientCPUPerTurnNS      int64   `json:"client_cpu_per_turn_ns"`
	ServerCPUPerTurnNS      int64   `json:"server_cpu_per_turn_ns,omitempty"`
	RoundServerCPUPerTurnNS []int64 `json:"round_server_cpu_per_turn_ns,omitempty"`
	// TotalCPUPerTurnNS adds them up: what the side costs in CPU.
	TotalCPUPerTurnNS int64 `json:"total_cpu_per_turn_ns"`

	durations            []int64
	clientCPU, serverCPU time.Duration
}

const cpuWindow = "exprd: utime+stime of its process (/proc/<pid>/stat, 10 ms ticks) from the end of the round client's warm-up to the client's exit, " +
	"over the measured turns (warm-up excluded); clients: their own user+system CPU over the measured turns"

// Run runs the benchmark.
func Run(ctx context.Context, o Options) (*Report, error) {
	began := time.Now()
	if o.Rounds <= 0 || o.Turns <= 0 || o.Warmup < 0 {
		return nil, errors.New("rounds and turns must be positive, warmup not negative")
	}
	if o.Workload == "" {
		o.Workload = workloads[0].name
	}
	w, err := findWorkload(o.Workload)
	if err != nil {
		return nil, err
	}
	logf := func(format string, args ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, "agentxsai: "+format+"\n", args...)
		}
	}
	if o.ModuleDir == "" {
		dir, err := findModule()
		if err != nil {
			return nil, err
		}
		o.ModuleDir = dir
	}
	if o.XSAIDir == "" {
		o.XSAIDir = filepath.Join(o.ModuleDir, "bench", "xsai")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	nodeVersion, err := exec.CommandContext(ctx, node, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("node --version: %w", err)
	}
	modules, err := ensureNodeModules(ctx, o.XSAIDir, logf)
	if err != nil {
		return nil, err
	}
	xsaiVersion := modules["xsai"]
	if xsaiVersion == "" {
		return nil, fmt.Errorf("%s/package-lock.json pins no xsai", o.XSAIDir)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}

	tmp, err := os.MkdirTemp("", "agentxsai-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bin := o.ExprdBin
	if bin == "" {
		logf("building exprd from %s", o.ModuleDir)
		if bin, err = exprdproc.Build(ctx, o.ModuleDir, tmp); err != nil {
			return nil, err
		}
	}

	model, err := scripted.Start(script(w))
	if err != nil {
		return nil, err
	}
	defer model.Close()
	math, err := providers.StartMath()
	if err != nil {
		return nil, err
	}
	defer math.Close()

	// exprd's configuration, the same for every workload: the scripted
	// server as its only provider, the math manual from a directory.
	cfgPath, manuals := filepath.Join(tmp, "models.json"), filepath.Join(tmp, "manuals")
	noRetries := 0
	stream := o.Stream
	cfg, _ := json.Marshal(openaicompat.Config{Default: "scripted", Providers: map[string]openaicompat.ProviderConfig{
		"scripted": {BaseURL: model.BaseURL(), Model: "scripted-model", Stream: &stream, MaxRetries: &noRetries},
	}})
	tmpl, _ := json.Marshal(map[string]any{"name": "math", "call_template_type": "http", "http_method": "GET", "url": math.URL() + "/utcp"})
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		return nil, err
	}
	if err := os.Mkdir(manuals, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(manuals, "math.json"), tmpl, 0o600); err != nil {
		return nil, err
	}
	// The environment must not send exprd's telemetry anywhere.
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") {
			os.Unsetenv(k)
		}
	}
	exprdLog := &tailBuffer{max: 16 << 10}
	var logTo io.Writer = exprdLog
	if o.ExprdLog != nil {
		logTo = io.MultiWriter(exprdLog, o.ExprdLog)
	}
	srv, err := exprdproc.Start(bin, logTo, "--models-config", cfgPath, "--manuals-dir", manuals, "--egress-allow", "loopback")
	if err != nil {
		return nil, err
	}
	defer srv.Stop()

	rep := &Report{
		Benchmark: "agentloop-vs-xsai", Workload: w.name, Turn: w.turn, ExprdClient: w.exprdClient,
		Rounds: o.Rounds, TurnsPerRound: o.Turns, WarmupPerRnd: o.Warmup, ExprdStream: o.Stream,
		GoVersion: runtime.Version(), NodeVersion: strings.TrimSpace(string(nodeVersion)), XSAIVersion: xsaiVersion,
		NodeModules: modules, CPUs: runtime.NumCPU(), Goal: 1.0, CPUGoalNS: w.cpuGoalNS, CPUWindow: cpuWindow,
		Fairness: w.fairness,
	}
	e := &env{node: node, self: self, moduleDir: o.ModuleDir, xsaiDir: o.XSAIDir, exprdAddr: srv.Addr,
		modelURL: model.BaseURL(), mathURL: math.URL(),
		counts: []string{"--warmup", fmt.Sprint(o.Warmup), "--turns", fmt.Sprint(o.Turns)}}
	// exprdSide runs a round of the exprd side and measures exprd's CPU
	// over its measured turns: from the client's end of warm-up to its exit.
	exprdSide := func() (*sideResult, time.Duration, error) {
		var cpu0 time.Duration
		res, err := runSide(w.exprdCmd(ctx, e), "exprd ("+w.exprdClient+")", func() (err error) {
			cpu0, err = procs.ProcessCPU(srv.Pid())
			return err
		}, exprdLog)
		if err != nil {
			return nil, 0, err
		}
		cpu1, err := procs.ProcessCPU(srv.Pid())
		return res, cpu1 - cpu0, err
	}
	var floorEnv *env
	if w.floor {
		addr, stop, err := startFloor(self, w)
		if err != nil {
			return nil, err
		}
		defer stop()
		fe := *e
		fe.exprdAddr = addr
		floorEnv = &fe
		rep.Floor = &Side{}
	}
	seen := 0
	for r := range o.Rounds {
		var events []string // the exprd side's, for the floor's to match
		order := []string{"exprd", "xsai"}
		if r%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		var med [2]int64
		for _, name := range order {
			var res *sideResult
			var serverCPU time.Duration
			side := &rep.Exprd
			if name == "exprd" {
				res, serverCPU, err = exprdSide()
			} else {
				side = &rep.XSAI
				res, err = runSide(w.xsaiCmd(ctx, e), "xsai (node)", nil, nil)
			}
			if err != nil {
				return nil, fmt.Errorf("round %d: %w", r+1, err)
			}
			if res.Verified != o.Turns || len(res.DurationsNS) != o.Turns || res.ToolCalls != o.Turns+o.Warmup {
				return nil, fmt.Errorf("round %d: %s verified %d of %d turns, ran the tool %d times", r+1, name, res.Verified, o.Turns, res.ToolCalls)
			}
			// The scripted server saw the side's two requests per turn, the
			// second carrying the tool's answer.
			n, aborted, err := checkRequests(model, seen, 2*(o.Turns+o.Warmup), w.result)
			if err != nil {
				return nil, fmt.Errorf("round %d: %s: %w", r+1, name, err)
			}
			seen += n
			side.add(res)
			side.ClosedEarly += aborted
			if name == "exprd" {
				events = res.Events
				med[0] = res.MedianNS
				side.serverCPU += serverCPU
				side.RoundServerCPUPerTurnNS = append(side.RoundServerCPUPerTurnNS, serverCPU.Nanoseconds()/int64(o.Turns))
			} else {
				med[1] = res.MedianNS
				if res.XSAI != xsaiVersion {
					return nil, fmt.Errorf("node ran xsai %s, want %s", res.XSAI, xsaiVersion)
				}
			}
			logf("round %d/%d %-5s median %s (%d turns verified)", r+1, o.Rounds, name, ms(res.MedianNS), res.Verified)
		}
		rep.RoundRatios = append(rep.RoundRatios, float64(med[0])/float64(med[1]))
		if floorEnv != nil {
			res, err := runSide(w.exprdCmd(ctx, floorEnv), "gRPC floor ("+w.exprdClient+")", func() error { return nil }, nil)
			if err != nil {
				return nil, fmt.Errorf("round %d: %w", r+1, err)
			}
			if res.Verified != o.Turns || res.ToolCalls != o.Turns+o.Warmup {
				return nil, fmt.Errorf("round %d: the floor verified %d of %d turns, ran the tool %d times", r+1, res.Verified, o.Turns, res.ToolCalls)
			}
			if !slices.Equal(res.Events, events) || len(events) == 0 {
				return nil, fmt.Errorf("round %d: the floor's turn sent %v, exprd's %v", r+1, res.Events, events)
			}
			rep.Floor.add(res)
			rep.RoundShares = append(rep.RoundShares, round3(float64(med[0]-res.MedianNS)/float64(med[1])))
			logf("round %d/%d floor median %s (%d turns verified)", r+1, o.Rounds, ms(res.MedianNS), res.Verified)
		}
	}
	peak, err := exprdproc.PeakRSSMiB(srv.Pid())
	if err != nil {
		return nil, err
	}
	rep.Exprd.ServerPeakRSSMiB = round2(peak)
	rep.Exprd.finish()
	rep.XSAI.finish()
	if rep.Floor != nil {
		rep.Floor.finish()
		rep.FloorRatio = round3(float64(rep.Floor.MedianNS) / float64(rep.XSAI.MedianNS))
		rep.Share = round3(float64(rep.Exprd.MedianNS-rep.Floor.MedianNS) / float64(rep.XSAI.MedianNS))
		rep.ShareMin, rep.ShareMax = slices.Min(rep.RoundShares), slices.Max(rep.RoundShares)
		rep.ShareGoal = shareGoal
		rep.ShareGoalMet = rep.Share <= shareGoal
	}
	rep.Ratio = float64(rep.Exprd.MedianNS) / float64(rep.XSAI.MedianNS)
	rep.RatioMin, rep.RatioMax = slices.Min(rep.RoundRatios), slices.Max(rep.RoundRatios)
	rep.Ratio, rep.RatioMin, rep.RatioMax = round3(rep.Ratio), round3(rep.RatioMin), round3(rep.RatioMax)
	for i := range rep.RoundRatios {
		rep.RoundRatios[i] = round3(rep.RoundRatios[i])
	}
	rep.GoalMet = rep.Ratio <= rep.Goal
	rep.CPUGoalMet = rep.CPUGoalNS > 0 && rep.Exprd.ServerCPUPerTurnNS <= rep.CPUGoalNS
	if rep.XSAI.TotalCPUPerTurnNS > 0 {
		rep.CPURatio = round3(float64(rep.Exprd.TotalCPUPerTurnNS) / float64(rep.XSAI.TotalCPUPerTurnNS))
	}
	rep.ScriptedRequests = seen
	hp, _ := selfRSS()
	rep.HarnessPeakRSSMiB = round2(float64(hp) / 1024)
	rep.ElapsedS = round2(time.Since(began).Seconds())
	return rep, nil
}

// checkRequests checks the scripted server's requests from index from on:
// want of them, each answered by a turn of the script, none aborted, and
// every tool message carrying the tool's answer.
//
// A request marked aborted is counted, not failed: the side's own check
// saw the whole reply, and the mark means the client closed the
// connection (rather than keeping it for the next request) before the
// server's last write returned, as exprd's streamed provider may do right
// after [DONE].
func checkRequests(s *scripted.Server, from, want int, result string) (n, aborted int, err error) {
	reqs := s.Requests()
	if len(reqs)-from != want {
		return 0, 0, fmt.Errorf("the scripted server got %d requests, want %d", len(reqs)-from, want)
	}
	tools := 0
	for _, r := range reqs[from:] {
		if r.Turn < 0 {
			return 0, 0, fmt.Errorf("request %d: not answered as scripted: %s", r.N, r.Body)
		}
		if r.Aborted {
			aborted++
		}
		msgs := r.Chat.Messages
		if last := msgs[len(msgs)-1]; last.Role == "tool" {
			if !jsonEqual(last.Content, result) {
				return 0, 0, fmt.Errorf("request %d: the tool message is %q, want %s", r.N, last.Content, result)
			}
			tools++
		}
	}
	if tools != want/2 {
		return 0, 0, fmt.Errorf("%d of %d requests carried a tool result, want %d", tools, want, want/2)
	}
	return want, aborted, nil
}

// warmLine is what a side's process prints on stdout when its warm-up
// is over, when it runs with --sync; it then waits for a line on stdin.
const warmLine = "warm"

// runSide runs one side's process for a round and decodes its report.
// With atWarm, the process runs with --sync: atWarm runs when its warm-up
// is over, then the process is let go on.
func runSide(cmd *exec.Cmd, name string, atWarm func() error, extra *tailBuffer) (*sideResult, error) {
	var stdout, stderr bytes.Buffer
	cmd.Stderr = &stderr
	fail := func(err error) (*sideResult, error) {
		msg := fmt.Sprintf("%s: %v\n%s", name, err, stderr.String())
		if extra != nil {
			msg += "\nexprd's log:\n" + extra.String()
		}
		return nil, errors.New(msg)
	}
	if atWarm == nil {
		cmd.Stdout = &stdout
		if err := cmd.Run(); err != nil {
			return fail(err)
		}
	} else {
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return fail(err)
		}
		lines := bufio.NewReader(out)
		syncErr := func() error {
			// Closing stdin lets a process that never gets the go-ahead end.
			defer stdin.Close()
			line, err := lines.ReadString('\n')
			if err != nil {
				return fmt.Errorf("the process ended before its warm-up did: %v", err)
			}
			if line != warmLine+"\n" {
				return fmt.Errorf("after the warm-up it printed %q, want %q", line, warmLine)
			}
			if err := atWarm(); err != nil {
				return err
			}
			_, err = io.WriteString(stdin, "\n")
			return err
		}()
		_, copyErr := io.Copy(&stdout, lines)
		// How the process exited says more than what the harness saw of it.
		if err := cmp.Or(cmd.Wait(), syncErr, copyErr); err != nil {
			return fail(err)
		}
	}
	var r sideResult
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		return nil, fmt.Errorf("%s: its report: %v\n%s", name, err, stdout.String())
	}
	return &r, nil
}

func (s *Side) add(r *sideResult) {
	s.durations = append(s.durations, r.DurationsNS...)
	s.RoundMediansNS = append(s.RoundMediansNS, r.MedianNS)
	s.Turns += r.Turns
	s.VerifiedTurns += r.Verified
	s.ToolCalls += r.ToolCalls
	s.ClientPeakRSSMiB = max(s.ClientPeakRSSMiB, round2(float64(r.PeakRSSKiB)/1024))
	s.clientCPU += time.Duration(r.CPUNS)
}

func (s *Side) finish() {
	s.MedianNS, s.P10NS, s.P90NS = quantiles(s.durations)
	s.MinRoundMedianNS, s.MaxRoundMedianNS = slices.Min(s.RoundMediansNS), slices.Max(s.RoundMediansNS)
	s.TotalPeakRSSMiB = round2(s.ClientPeakRSSMiB + s.ServerPeakRSSMiB)
	if s.Turns > 0 {
		s.ClientCPUPerTurnNS = s.clientCPU.Nanoseconds() / int64(s.Turns)
		s.ServerCPUPerTurnNS = s.serverCPU.Nanoseconds() / int64(s.Turns)
	}
	s.TotalCPUPerTurnNS = s.ClientCPUPerTurnNS + s.ServerCPUPerTurnNS
}

// WriteTable writes the report for people.
func (r *Report) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "\nAgentLoop vs xsai %s, workload %s (node %s, %s): %s\n", r.XSAIVersion, r.Workload, r.NodeVersion, r.GoVersion, r.Turn)
	fmt.Fprintf(w, "%d rounds x %d turns per side (+%d warm-up each), exprd provider streamed: %v\n\n", r.Rounds, r.TurnsPerRound, r.WarmupPerRnd, r.ExprdStream)
	fmt.Fprintf(w, "%-7s %10s %10s %10s %21s %9s  %s\n", "side", "median", "p10", "p90", "round medians", "verified", "peak RSS")
	row := func(name string, s Side, mem string) {
		fmt.Fprintf(w, "%-7s %10s %10s %10s %21s %9s  %s\n", name, ms(s.MedianNS), ms(s.P10NS), ms(s.P90NS),
			ms(s.MinRoundMedianNS)+" - "+ms(s.MaxRoundMedianNS), fmt.Sprintf("%d/%d", s.VerifiedTurns, s.Turns), mem)
	}
	row("exprd", r.Exprd, fmt.Sprintf("exprd %.1f MiB + %s %.1f MiB = %.1f MiB", r.Exprd.ServerPeakRSSMiB, r.ExprdClient, r.Exprd.ClientPeakRSSMiB, r.Exprd.TotalPeakRSSMiB))
	row("xsai", r.XSAI, fmt.Sprintf("node %.1f MiB", r.XSAI.ClientPeakRSSMiB))
	if r.Floor != nil {
		row("floor", *r.Floor, fmt.Sprintf("%s %.1f MiB; CPU per turn %s", r.ExprdClient, r.Floor.ClientPeakRSSMiB, ms(r.Floor.ClientCPUPerTurnNS)))
	}
	verdict := "met"
	if !r.GoalMet {
		verdict = "NOT met"
	}
	fmt.Fprintf(w, "\nexprd/xsai per-turn wall time: %.3fx (rounds %.3fx - %.3fx); goal <= %.1fx: %s\n", r.Ratio, r.RatioMin, r.RatioMax, r.Goal, verdict)
	if r.Floor != nil {
		fmt.Fprintf(w, "gRPC floor/xsai: %.3fx (the %s against a stub that does no work)\n", r.FloorRatio, r.ExprdClient)
		verdict := "met"
		if !r.ShareGoalMet {
			verdict = "NOT met"
		}
		fmt.Fprintf(w, "exprd's share (its median over the floor's)/xsai: %.3fx (rounds %.3fx - %.3fx); goal <= %.1fx: %s\n", r.Share, r.ShareMin, r.ShareMax, r.ShareGoal, verdict)
	}
	rounds := make([]string, len(r.Exprd.RoundServerCPUPerTurnNS))
	for i, ns := range r.Exprd.RoundServerCPUPerTurnNS {
		rounds[i] = ms(ns)
	}
	fmt.Fprintf(w, "CPU per measured turn: exprd %s (rounds %s) + %s %s = %s; xsai (node) %s; exprd/xsai %.3fx\n",
		ms(r.Exprd.ServerCPUPerTurnNS), strings.Join(rounds, ", "), r.ExprdClient, ms(r.Exprd.ClientCPUPerTurnNS), ms(r.Exprd.TotalCPUPerTurnNS),
		ms(r.XSAI.TotalCPUPerTurnNS), r.CPURatio)
	if r.CPUGoalNS > 0 {
		verdict := "met"
		if !r.CPUGoalMet {
			verdict = "NOT met"
		}
		fmt.Fprintf(w, "exprd CPU per turn goal <= %s: %s\n", ms(r.CPUGoalNS), verdict)
	}
	if r.Exprd.ClosedEarly+r.XSAI.ClosedEarly > 0 {
		fmt.Fprintf(w, "model requests whose connection the client closed at the end of the reply: exprd %d, xsai %d\n",
			r.Exprd.ClosedEarly, r.XSAI.ClosedEarly)
	}
	fmt.Fprintf(w, "%d scripted requests checked; harness (scripted server + math provider) peak RSS %.1f MiB; %.1f s\n\n",
		r.ScriptedRequests, r.HarnessPeakRSSMiB, r.ElapsedS)
}

func ms(ns int64) string { return fmt.Sprintf("%.3f ms", float64(ns)/1e6) }

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }
func round3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }

// findModule walks up from the working directory to exprd's module root.
func findModule() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(b, []byte("module github.com/exprd/exprd\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("exprd's module root not found above the working directory: pass --module")
		}
		dir = parent
	}
}

// ensureNodeModules runs `npm ci` unless node_modules holds every
// dependency of package.json at the version package-lock.json pins, and
// returns those versions.
func ensureNodeModules(ctx context.Context, dir string, logf func(string, ...any)) (map[string]string, error) {
	pinned, stale, err := nodeModules(dir)
	if err != nil || len(stale) == 0 {
		return pinned, err
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return nil, fmt.Errorf("npm: %w", err)
	}
	logf("npm ci in %s (%s not as locked)", dir, strings.Join(stale, ", "))
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("npm ci: %v\n%s", err, out)
	}
	if pinned, stale, err = nodeModules(dir); err == nil && len(stale) > 0 {
		err = fmt.Errorf("after npm ci node_modules still lacks %s as locked", strings.Join(stale, ", "))
	}
	return pinned, err
}

// nodeModules reads the version package-lock.json pins for each of the
// package's own dependencies, and which of them node_modules lacks or
// holds at another version.
func nodeModules(dir string) (pinned map[string]string, stale []string, err error) {
	var lock struct {
		Packages map[string]struct {
			Version      string
			Dependencies map[string]string
		} `json:"packages"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return nil, nil, err
	}
	if err := json.Unmarshal(b, &lock); err != nil {
		return nil, nil, fmt.Errorf("%s/package-lock.json: %v", dir, err)
	}
	pinned = map[string]string{}
	for name := range lock.Packages[""].Dependencies {
		want := lock.Packages["node_modules/"+name].Version
		if want == "" {
			return nil, nil, fmt.Errorf("%s/package-lock.json pins no %s", dir, name)
		}
		pinned[name] = want
		var pkg struct{ Version string }
		b, err := os.ReadFile(filepath.Join(dir, "node_modules", name, "package.json"))
		if err != nil || json.Unmarshal(b, &pkg) != nil || pkg.Version != want {
			stale = append(stale, name)
		}
	}
	if len(pinned) == 0 {
		return nil, nil, fmt.Errorf("%s/package-lock.json lists no dependencies", dir)
	}
	slices.Sort(stale)
	return pinned, stale, nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
