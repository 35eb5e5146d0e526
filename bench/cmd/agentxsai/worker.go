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
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/exprd/exprd/client"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
)

// workerEnv, set to 1, makes this program (or its test binary) the Go
// client's side of a round: the harness runs itself again in this mode so
// that the client has a process of its own, as node has, whose peak RSS is
// the client's alone (the harness process also hosts the scripted model
// and the math provider).
const workerEnv = "EXPRD_AGENTXSAI_WORKER"

// sideResult is what a side's process prints after a round: the Go worker
// below and bench/xsai's turn.mjs and agentloop.mjs print the same fields.
type sideResult struct {
	Runtime     string  `json:"runtime"`
	Warmup      int     `json:"warmup"`
	Turns       int     `json:"turns"`
	Verified    int     `json:"verified"`
	ToolCalls   int     `json:"tool_calls"`
	DurationsNS []int64 `json:"durations_ns"`
	MedianNS    int64   `json:"median_ns"`
	P10NS       int64   `json:"p10_ns"`
	P90NS       int64   `json:"p90_ns"`
	// CPUNS is the process's user+system CPU over the measured turns.
	CPUNS      int64 `json:"cpu_ns"`
	PeakRSSKiB int64 `json:"peak_rss_kib"`
	RSSBytes   int64 `json:"rss_bytes"`
	// XSAI is the xsai version (turn.mjs only).
	XSAI string `json:"xsai,omitempty"`
	// Events are the last turn's events, in order (agentloop.mjs only).
	Events []string `json:"events,omitempty"`
}

// workerMain runs the Go client's round: warm-up turns, then measured ones,
// each one AgentLoop.Run stream on one connection kept for the round.
func workerMain(args []string) error {
	fs := flag.NewFlagSet("agentxsai worker", flag.ContinueOnError)
	addr := fs.String("addr", "", "exprd's gRPC address")
	warmup := fs.Int("warmup", 10, "turns before measuring")
	turns := fs.Int("turns", 50, "measured turns")
	syncFlag := fs.Bool("sync", false, `after the warm-up, print "warm" and wait for a line on stdin`)
	var sc scenario
	sc.flags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *addr == "" {
		return errors.New("worker: -addr is required")
	}
	c, err := client.Dial(*addr)
	if err != nil {
		return err
	}
	defer c.Close()
	al := c.AgentLoop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// The tool as exprd's own UTCP executor runs it: the server calls the
	// math provider; its description and schema come from the manual.
	start := &exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: &exprdv1.AgentStart{
		Messages: []*exprdv1.AgentMessage{{Role: exprdv1.AgentMessage_ROLE_USER, Content: sc.Prompt}},
		Tools: []*exprdv1.AgentTool{{Name: "add", Executor: exprdv1.AgentTool_EXECUTOR_UTCP,
			UtcpTool: "math.add"}},
		Stop: &exprdv1.StopCondition{Cond: &exprdv1.StopCondition_MaxSteps{MaxSteps: 10}},
	}}}

	r := sideResult{Runtime: runtime.Version(), Warmup: *warmup, Turns: *turns}
	for range *warmup {
		ev, err := exprdTurn(ctx, al, start)
		if err == nil {
			err = sc.verify(ev)
		}
		if err != nil {
			return fmt.Errorf("warm-up turn: %w", err)
		}
		r.ToolCalls += ev.toolResults
	}
	if *syncFlag {
		if err := waitForHarness(); err != nil {
			return err
		}
	}
	cpu0 := selfCPU()
	for i := range *turns {
		t0 := time.Now()
		ev, err := exprdTurn(ctx, al, start)
		d := time.Since(t0)
		if err == nil {
			err = sc.verify(ev)
		}
		if err != nil {
			return fmt.Errorf("turn %d: %w", i, err)
		}
		r.ToolCalls += ev.toolResults
		r.Verified++
		r.DurationsNS = append(r.DurationsNS, d.Nanoseconds())
	}
	r.CPUNS = (selfCPU() - cpu0).Nanoseconds()
	r.MedianNS, r.P10NS, r.P90NS = quantiles(r.DurationsNS)
	peak, rss := selfRSS()
	r.PeakRSSKiB, r.RSSBytes = peak, rss*1024
	return json.NewEncoder(os.Stdout).Encode(r)
}

// waitForHarness tells the harness the warm-up is over and waits for its
// go-ahead: it reads exprd's CPU time in between.
func waitForHarness() error {
	if _, err := os.Stdout.WriteString(warmLine + "\n"); err != nil {
		return err
	}
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return fmt.Errorf("waiting for the harness after the warm-up: %w", err)
	}
	return nil
}

// turnEvents is what one turn's stream carried, for verify.
type turnEvents struct {
	calls       []*exprdv1.ToolCallRequested
	results     []*exprdv1.ToolResult
	toolResults int
	done        *exprdv1.AgentDone
}

// exprdTurn runs one turn: Start, then every event until the server ends
// the stream (the timed span ends there, after Done).
func exprdTurn(ctx context.Context, al exprdv1.AgentLoopClient, start *exprdv1.AgentLoopRunRequest) (*turnEvents, error) {
	stream, err := al.Run(ctx)
	if err != nil {
		return nil, err
	}
	if err := stream.Send(start); err != nil {
		return nil, err
	}
	ev := &turnEvents{}
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			return ev, nil
		}
		if err != nil {
			return ev, err
		}
		switch e := m.GetEvent().(type) {
		case *exprdv1.AgentLoopRunResponse_ToolCallRequested:
			ev.calls = append(ev.calls, e.ToolCallRequested)
		case *exprdv1.AgentLoopRunResponse_ToolResult:
			ev.results = append(ev.results, e.ToolResult)
			if !e.ToolResult.GetIsError() {
				ev.toolResults++
			}
		case *exprdv1.AgentLoopRunResponse_Done:
			ev.done = e.Done
		}
	}
}

// scenario is the turn both sides run: the prompt, the add tool's
// arguments the scripted model sends, and its final text.
type scenario struct {
	Prompt   string
	A, B     float64
	WantText string
}

func (s *scenario) flags(fs *flag.FlagSet) {
	fs.StringVar(&s.Prompt, "prompt", "What is 2 + 3?", "the user's message")
	fs.Float64Var(&s.A, "a", 2, "add's first argument, as the scripted model sends it")
	fs.Float64Var(&s.B, "b", 3, "add's second argument")
	fs.StringVar(&s.WantText, "want-text", "2 + 3 = 5.", "the scripted final answer")
}

func (s *scenario) args() []string {
	return []string{"--prompt", s.Prompt, "--a", num(s.A), "--b", num(s.B), "--want-text", s.WantText}
}

// wantResult is the math provider's answer, as both sides pass it on.
func (s *scenario) wantResult() string { return `{"result":` + num(s.A+s.B) + `}` }

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// verify checks that the turn went as scripted: add called once with the
// scripted arguments and run by exprd (not the client), its result the
// provider's, then the scripted answer after two steps.
func (s *scenario) verify(ev *turnEvents) error {
	if ev.done == nil {
		return errors.New("the stream ended without Done")
	}
	if len(ev.calls) != 1 || ev.calls[0].GetCall().GetName() != "add" || ev.calls[0].GetRunOnClient() {
		return fmt.Errorf("want one server-run call of add, got %v", ev.calls)
	}
	var args struct{ A, B float64 }
	if err := json.Unmarshal([]byte(ev.calls[0].GetCall().GetArgumentsJson()), &args); err != nil || args.A != s.A || args.B != s.B {
		return fmt.Errorf("add called with %s", ev.calls[0].GetCall().GetArgumentsJson())
	}
	if len(ev.results) != 1 || ev.results[0].GetIsError() || !jsonEqual(ev.results[0].GetOutputJson(), s.wantResult()) {
		return fmt.Errorf("want add's result %s, got %v", s.wantResult(), ev.results)
	}
	if len(ev.done.GetSteps()) != 2 || ev.done.GetText() != s.WantText {
		return fmt.Errorf("done after %d steps with %q, want 2 steps and %q", len(ev.done.GetSteps()), ev.done.GetText(), s.WantText)
	}
	return nil
}

func jsonEqual(got, want string) bool {
	var a, b bytes.Buffer
	return json.Compact(&a, []byte(got)) == nil && json.Compact(&b, []byte(want)) == nil && a.String() == b.String()
}

// quantiles are the median, p10 and p90 by nearest rank, as turn.mjs
// computes them.
func quantiles(d []int64) (median, p10, p90 int64) {
	s := slices.Clone(d)
	slices.Sort(s)
	return quantile(s, 0.5), quantile(s, 0.1), quantile(s, 0.9)
}

func quantile(sorted []int64, q float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted)-1) + 0.5)
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// selfRSS reads this process's VmHWM and VmRSS in KiB.
func selfRSS() (peak, rss int64) {
	b, _ := os.ReadFile("/proc/self/status")
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmHWM":
			peak = n
		case "VmRSS":
			rss = n
		}
	}
	return peak, rss
}
