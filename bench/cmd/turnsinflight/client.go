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
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
)

// clientEnv, set to 1, makes this program (or its test binary) the Go
// client of a phase: the harness runs itself again in this mode, so that
// the client has a process of its own, apart from the model server.
const clientEnv = "EXPRD_TURNSINFLIGHT_CLIENT"

// The lines a client (this one, and bench/xsai/inflight.mjs) and the
// harness exchange: the client says "ready" once set up and waits for a
// line; runs its turns, says "done" and waits for a line; then prints its
// report and exits. The harness reads the memory and CPU of the process
// holding the turns in between.
const (
	readyLine = "ready"
	doneLine  = "done"
)

// clientResult is what a client prints at its end; inflight.mjs prints
// the same fields.
type clientResult struct {
	Runtime  string `json:"runtime"`
	Mode     string `json:"mode"`
	Turns    int    `json:"turns"`
	Verified int    `json:"verified"`
	// Errors counts the turns that failed; FirstError says how the first did.
	Errors     int    `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
	// Deltas is how many stamped text deltas arrived; Latency is their
	// arrival less the model server's write time (exprd and direct only).
	Deltas  int       `json:"deltas"`
	Latency Quantiles `json:"latency_ns"`
	// Connections is the gRPC connections the turns were spread over.
	Connections int `json:"connections,omitempty"`
	// NoFile is the client's RLIMIT_NOFILE soft limit, as raised.
	NoFile     uint64 `json:"nofile"`
	CPUNS      int64  `json:"cpu_ns"`
	PeakRSSKiB int64  `json:"peak_rss_kib"`
	// XSAI is the xsai version (inflight.mjs only).
	XSAI string `json:"xsai,omitempty"`
}

// Quantiles of a set of durations, in nanoseconds, by nearest rank.
type Quantiles struct {
	N    int   `json:"n"`
	P50  int64 `json:"p50"`
	P90  int64 `json:"p90"`
	P99  int64 `json:"p99"`
	Max  int64 `json:"max"`
	Mean int64 `json:"mean"`
}

func quantilesOf(d []int64) Quantiles {
	if len(d) == 0 {
		return Quantiles{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	at := func(q float64) int64 { return s[min(int(q*float64(len(s)-1)+0.5), len(s)-1)] }
	var sum int64
	for _, v := range s {
		sum += v
	}
	return Quantiles{N: len(s), P50: at(0.5), P90: at(0.9), P99: at(0.99), Max: s[len(s)-1], Mean: sum / int64(len(s))}
}

// clientMain runs a phase's Go client: n turns at once, through exprd
// (AgentLoop.Run over conns connections) or straight from the model
// server (one SSE request each, the answer's), per -mode.
func clientMain(args []string) error {
	fs := flag.NewFlagSet("turnsinflight client", flag.ContinueOnError)
	mode := fs.String("mode", "exprd", "exprd or direct")
	n := fs.Int("n", 100, "turns at once")
	addr := fs.String("addr", "", "exprd's gRPC address (-mode exprd)")
	perConn := fs.Int("streams-per-conn", 200, "turns per gRPC connection, under exprd's --max-streams-per-connection")
	modelURL := fs.String("model-url", "", "the model server's base URL (-mode direct)")
	timeout := fs.Duration("timeout", 3*time.Minute, "bound on the whole phase")
	if err := fs.Parse(args); err != nil {
		return err
	}
	nofile, err := raiseNoFile(wantNoFile)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	r := clientResult{Runtime: runtime.Version(), Mode: *mode, Turns: *n, NoFile: nofile}
	var turn func(ctx context.Context, i int, lat []int64) (int, error)
	switch *mode {
	case "exprd":
		conns, err := dialReady(ctx, *addr, (*n+*perConn-1) / *perConn)
		if err != nil {
			return err
		}
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		r.Connections = len(conns)
		turn = func(ctx context.Context, i int, lat []int64) (int, error) {
			return exprdTurn(ctx, exprdv1.NewAgentLoopClient(conns[i%len(conns)]), lat)
		}
	case "direct":
		tr := &http.Transport{MaxIdleConnsPerHost: *n, DisableCompression: true}
		defer tr.CloseIdleConnections()
		hc := &http.Client{Transport: tr}
		turn = func(ctx context.Context, _ int, lat []int64) (int, error) {
			return directRead(ctx, hc, *modelURL, lat)
		}
	default:
		return fmt.Errorf("-mode %q: want exprd or direct", *mode)
	}

	lines := bufio.NewReader(os.Stdin)
	if err := handshake(lines, readyLine); err != nil {
		return err
	}
	cpu0 := selfCPU()
	lat := make([]int64, *n*textDeltas)
	counts := make([]int, *n)
	errs := make([]error, *n)
	var wg sync.WaitGroup
	for i := range *n {
		wg.Go(func() {
			counts[i], errs[i] = turn(ctx, i, lat[i*textDeltas:(i+1)*textDeltas])
		})
	}
	wg.Wait()
	r.CPUNS = (selfCPU() - cpu0).Nanoseconds()
	var all []int64
	for i, err := range errs {
		if err != nil {
			r.Errors++
			if r.FirstError == "" {
				r.FirstError = fmt.Sprintf("turn %d: %v", i, err)
			}
			continue
		}
		r.Verified++
		r.Deltas += counts[i]
		all = append(all, lat[i*textDeltas:i*textDeltas+counts[i]]...)
	}
	r.Latency = quantilesOf(all)
	if err := handshake(lines, doneLine); err != nil {
		return err
	}
	r.PeakRSSKiB = peakRSSKiB(os.Getpid())
	return json.NewEncoder(os.Stdout).Encode(r)
}

// handshake says line and waits for the harness's go-ahead.
func handshake(in *bufio.Reader, line string) error {
	if _, err := os.Stdout.WriteString(line + "\n"); err != nil {
		return err
	}
	if _, err := in.ReadString('\n'); err != nil {
		return fmt.Errorf("waiting for the harness after %q: %w", line, err)
	}
	return nil
}

// raiseNoFile raises this process's limit of open files: the hard limit
// to want when it is lower and the process may (root may), then the soft
// limit to the hard one. Go raises the soft limit at start already (since
// 1.19); the children started after this inherit both. It returns the
// soft limit.
func raiseNoFile(want uint64) (uint64, error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, err
	}
	if l.Max < want {
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: want, Max: want}) == nil {
			l.Max = want
		}
	}
	if l.Cur < l.Max {
		l.Cur = l.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
			return 0, err
		}
	}
	return l.Cur, nil
}

// dialReady opens n connections to addr and waits until each is ready, so
// that no turn pays for a handshake.
func dialReady(ctx context.Context, addr string, n int) ([]*grpc.ClientConn, error) {
	conns := make([]*grpc.ClientConn, n)
	for i := range conns {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, err
		}
		conns[i] = c
		c.Connect()
		for st := c.GetState(); st != connectivity.Ready; st = c.GetState() {
			if !c.WaitForStateChange(ctx, st) {
				return nil, fmt.Errorf("connection %d to %s: %v", i, addr, ctx.Err())
			}
		}
	}
	return conns, nil
}

// start is every exprd turn's first message: the user's question and
// get_weather, run by this client.
var start = &exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_Start{Start: &exprdv1.AgentStart{
	Messages: []*exprdv1.AgentMessage{{Role: exprdv1.AgentMessage_ROLE_USER, Content: prompt}},
	Tools: []*exprdv1.AgentTool{{Name: toolName, Description: "The current weather in a city.",
		ParametersJson: `{"type":"object","required":["city"],"properties":{"city":{"type":"string"}},"additionalProperties":false}`,
		Executor:       exprdv1.AgentTool_EXECUTOR_CLIENT}},
	Stop: &exprdv1.StopCondition{Cond: &exprdv1.StopCondition_MaxSteps{MaxSteps: 10}},
}}}

// exprdTurn runs one AgentLoop turn: it answers the tool's request, reads
// every text delta's stamp on arrival into lat, and checks the turn
// against done. It returns how many deltas came.
func exprdTurn(ctx context.Context, al exprdv1.AgentLoopClient, lat []int64) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := al.Run(ctx)
	if err != nil {
		return 0, err
	}
	if err := stream.Send(start); err != nil {
		return 0, err
	}
	var (
		n, asked int
		text     strings.Builder
		done     *exprdv1.AgentDone
	)
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return n, err
		}
		switch e := m.GetEvent().(type) {
		case *exprdv1.AgentLoopRunResponse_TextDelta:
			now := time.Now().UnixNano()
			if err := parseStamps(e.TextDelta.GetText(), func(ns int64) {
				if n < len(lat) {
					lat[n] = now - ns
				}
				n++
			}); err != nil {
				return n, err
			}
			text.WriteString(e.TextDelta.GetText())
		case *exprdv1.AgentLoopRunResponse_ToolCallRequested:
			c := e.ToolCallRequested.GetCall()
			if !e.ToolCallRequested.GetRunOnClient() {
				continue // the announcement
			}
			asked++
			if c.GetName() != toolName || !jsonEqual(c.GetArgumentsJson(), toolArgs) {
				return n, fmt.Errorf("asked to run %s(%s)", c.GetName(), c.GetArgumentsJson())
			}
			if err := stream.Send(&exprdv1.AgentLoopRunRequest{Msg: &exprdv1.AgentLoopRunRequest_ToolOutput{
				ToolOutput: &exprdv1.ToolOutput{CallId: c.GetId(), OutputJson: toolResult}}}); err != nil {
				return n, err
			}
		case *exprdv1.AgentLoopRunResponse_Done:
			done = e.Done
		}
	}
	switch {
	case done == nil:
		return n, errors.New("the stream ended without done")
	case asked != 1:
		return n, fmt.Errorf("asked to run the tool %d times, want 1", asked)
	case len(done.GetSteps()) != 2 || done.GetText() != text.String() || n != textDeltas:
		return n, fmt.Errorf("done after %d steps with %d bytes of text; %d deltas (%d bytes) came, want 2 steps and %d deltas",
			len(done.GetSteps()), len(done.GetText()), n, text.Len(), textDeltas)
	}
	return n, nil
}

// answerRequest is the model request of a turn's second step, as exprd
// sends it: the model server answers it with the stamped deltas.
var answerRequest = func() []byte {
	b, _ := json.Marshal(map[string]any{
		"model": "inflight-model", "stream": true,
		"messages": []map[string]any{
			{"role": "user", "content": prompt},
			{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{"id": "call_0", "type": "function",
				"function": map[string]string{"name": toolName, "arguments": toolArgs}}}},
			{"role": "tool", "tool_call_id": "call_0", "content": toolResult},
		},
	})
	return b
}()

// directRead reads the answer's deltas straight from the model server
// (SSE over HTTP/1.1, no exprd) and records each stamp's latency in lat.
func directRead(ctx context.Context, hc *http.Client, baseURL string, lat []int64) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/chat/completions", bytes.NewReader(answerRequest))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		return 0, fmt.Errorf("%s: %s", res.Status, b)
	}
	n := 0
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok {
			continue
		}
		now := time.Now().UnixNano()
		if string(data) == "[DONE]" {
			break
		}
		var c struct {
			Choices []struct {
				Delta struct{ Content string }
			}
		}
		if err := json.Unmarshal(data, &c); err != nil {
			return n, err
		}
		if len(c.Choices) == 0 || c.Choices[0].Delta.Content == "" {
			continue
		}
		if err := parseStamps(c.Choices[0].Delta.Content, func(ns int64) {
			if n < len(lat) {
				lat[n] = now - ns
			}
			n++
		}); err != nil {
			return n, err
		}
	}
	if err := sc.Err(); err != nil {
		return n, err
	}
	if n != textDeltas {
		return n, fmt.Errorf("%d deltas came, want %d", n, textDeltas)
	}
	return n, nil
}

// peakRSSKiB is a process's VmHWM ("self" or a pid), 0 when unread.
func peakRSSKiB(pid int) int64 { return statusKiB(pid, "VmHWM") }

// statusKiB reads a field of /proc/<pid>/status in kB.
func statusKiB(pid int, field string) int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			return kb
		}
	}
	return 0
}
