// Command benchreport runs every benchmark of exprd and its peers in one
// go, on one machine, and writes the results: the tables between the
// generated markers of BENCHMARKS.md, the raw outputs under bench/results/,
// and the scale plot beside BENCHMARKS.md. `make bench` runs it.
//
//	cd bench && go run ./cmd/benchreport --module ..
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// mainPackages are the main module's packages with benchmarks.
var mainPackages = []string{"./evaluator/...", "./server/...", "./utcp/...", "./model/...", "./codemode/...", "./agent/..."}

type options struct {
	module    string // the exprd module's root
	count     int
	benchtime string
	turns     int // AgentLoop vs xsai, HTTP tool: turns per round
	rounds    int
	warmup    int // AgentLoop vs xsai, every workload: warm-up turns per round and side
	sessions  int
	// AgentLoop vs xsai, client-run tool: more turns, for exprd's CPU
	// per turn out of 10 ms ticks.
	clientToolTurns, clientToolRounds int
}

func main() {
	var o options
	flag.StringVar(&o.module, "module", "..", "the exprd module's root")
	flag.IntVar(&o.count, "count", 5, "runs of each Go benchmark")
	flag.StringVar(&o.benchtime, "benchtime", "1s", "go test -benchtime")
	flag.IntVar(&o.rounds, "xsai-rounds", 5, "AgentLoop vs xsai: alternating rounds")
	flag.IntVar(&o.warmup, "xsai-warmup", 1000, "AgentLoop vs xsai: warm-up turns per round and side, every workload (node's JIT needs hundreds)")
	flag.IntVar(&o.turns, "xsai-turns", 300, "AgentLoop vs xsai: turns per round and side")
	flag.IntVar(&o.clientToolRounds, "client-tool-rounds", 6, "AgentLoop vs xsai with a client-run tool: alternating rounds")
	flag.IntVar(&o.clientToolTurns, "client-tool-turns", 500, "AgentLoop vs xsai with a client-run tool: turns per round and side")
	flag.IntVar(&o.sessions, "sessions", 2000, "sessions of each kind for the RSS figures")
	intervalsFrom := flag.String("intervals", "", "only print the interval-judged pairs' table for this file of `go test -bench` output (- for stdin), and run nothing")
	flag.Parse()
	if *intervalsFrom != "" {
		if err := printIntervals(*intervalsFrom, o); err != nil {
			fmt.Fprintln(os.Stderr, "benchreport:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	module, err := filepath.Abs(o.module)
	if err != nil {
		return err
	}
	benchDir := filepath.Join(module, "bench")
	resultsDir := filepath.Join(benchDir, "results")
	if err := os.MkdirAll(resultsDir, 0o755); err != nil {
		return err
	}
	m := machine()
	start := time.Now()

	goBench := []string{"test", "-run", "^$", "-bench", ".", "-benchmem", "-count", fmt.Sprint(o.count), "-benchtime", o.benchtime}
	var raw bytes.Buffer
	step := func(name, dir string, args ...string) ([]byte, error) {
		fmt.Fprintf(os.Stderr, "benchreport: %s: go %s\n", name, strings.Join(args, " "))
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = dir
		var out bytes.Buffer
		cmd.Stdout = io.MultiWriter(&out, os.Stderr)
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return out.Bytes(), nil
	}
	out, err := step("exprd's benchmarks", module, append(append(goBench, "-skip", intervalBenchmarks), mainPackages...)...)
	if err != nil {
		return err
	}
	raw.Write(out)
	intervalBench := []string{"test", "-run", "^$", "-bench", intervalBenchmarks, "-benchmem", "-count", fmt.Sprint(max(o.count, intervalCount)), "-benchtime", o.benchtime}
	if out, err = step("exprd's benchmarks judged by their interval", module, append(intervalBench, intervalPackages...)...); err != nil {
		return err
	}
	raw.Write(out)
	if out, err = step("peer and scale benchmarks", benchDir, append(goBench, ".")...); err != nil {
		return err
	}
	raw.Write(out)
	xsaiFile := filepath.Join(resultsDir, "agentxsai.json")
	if _, err = step("AgentLoop vs xsai", benchDir, "run", "./cmd/agentxsai", "--rounds", fmt.Sprint(o.rounds), "--turns", fmt.Sprint(o.turns),
		"--warmup", fmt.Sprint(o.warmup), "--json", xsaiFile); err != nil {
		return err
	}
	clientToolFile := filepath.Join(resultsDir, "agentxsai-clienttool.json")
	if _, err = step("AgentLoop vs xsai, client-run tool", benchDir, "run", "./cmd/agentxsai", "--workload", "client-tool",
		"--rounds", fmt.Sprint(o.clientToolRounds), "--turns", fmt.Sprint(o.clientToolTurns), "--warmup", fmt.Sprint(o.warmup), "--json", clientToolFile); err != nil {
		return err
	}
	answerFile := filepath.Join(resultsDir, "agentxsai-clienttool-answer.json")
	if _, err = step("AgentLoop vs xsai, client-run tool, answer only", benchDir, "run", "./cmd/agentxsai", "--workload", "client-tool-answer",
		"--rounds", fmt.Sprint(o.clientToolRounds), "--turns", fmt.Sprint(o.clientToolTurns), "--warmup", fmt.Sprint(o.warmup), "--json", answerFile); err != nil {
		return err
	}
	sessionsOut, err := step("RSS per session", benchDir, "run", "./cmd/sessions", "--module", module, "--sessions", fmt.Sprint(o.sessions))
	if err != nil {
		return err
	}
	m.Took = time.Since(start).Round(time.Second)
	m.LoadAfter = loadAverage()

	if err := os.WriteFile(filepath.Join(resultsDir, "bench.txt"), raw.Bytes(), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(resultsDir, "sessions.json"), sessionsOut, 0o644); err != nil {
		return err
	}
	rep := report{machine: m, results: results{}, options: o}
	if err := rep.results.parse(bytes.NewReader(raw.Bytes())); err != nil {
		return err
	}
	if err := readJSON(xsaiFile, &rep.xsai); err != nil {
		return err
	}
	if err := readJSON(clientToolFile, &rep.xsaiClientTool); err != nil {
		return err
	}
	if err := readJSON(answerFile, &rep.xsaiClientToolAnswer); err != nil {
		return err
	}
	if err := json.Unmarshal(sessionsOut, &rep.sessions); err != nil {
		return fmt.Errorf("sessions' report: %w", err)
	}
	if err := rep.plot(filepath.Join(module, "benchmarks-scale.png")); err != nil {
		return err
	}
	return rewrite(filepath.Join(module, "BENCHMARKS.md"), rep.markdown())
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// The generated part of BENCHMARKS.md sits between these lines.
const (
	beginMarker = "<!-- benchreport:begin -->"
	endMarker   = "<!-- benchreport:end -->"
)

// rewrite replaces the generated part of the file at path.
func rewrite(path, generated string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	i, j := strings.Index(s, beginMarker), strings.Index(s, endMarker)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %s … %s section", path, beginMarker, endMarker)
	}
	s = s[:i+len(beginMarker)] + "\n" + generated + s[j:]
	return os.WriteFile(path, []byte(s), 0o644)
}

// machineInfo says where and how the figures were taken.
type machineInfo struct {
	Date, CPU, Go, OS     string
	CPUs                  int
	LoadBefore, LoadAfter string
	Took                  time.Duration
}

func machine() machineInfo {
	m := machineInfo{Date: time.Now().UTC().Format("2006-01-02"), CPUs: runtime.NumCPU(), OS: runtime.GOOS + "/" + runtime.GOARCH, LoadBefore: loadAverage()}
	if out, err := exec.Command("go", "env", "GOVERSION").Output(); err == nil {
		m.Go = strings.TrimSpace(string(out))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	return m
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// printIntervals prints the interval-judged pairs' table for the benchmark
// output in file ("-": stdin), as make bench-mcp does.
func printIntervals(file string, o options) error {
	in := io.Reader(os.Stdin)
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	rep := report{results: results{}, options: o}
	if err := rep.results.parse(in); err != nil {
		return err
	}
	fmt.Print(rep.intervalSection(true))
	return nil
}
