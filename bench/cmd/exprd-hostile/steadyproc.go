package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"
)

// The steady client runs in a process of its own: a client of exprd's
// is not in the process of the clients attacking it, and in one process
// the Go scheduler ran its call's goroutines behind the hundreds of the
// hostile clients' that were runnable, so that its p99 measured the
// harness as much as exprd. The harness starts one a phase (steadyProc),
// after the exprd it calls:
//
//	exprd-hostile steady-client --addr A --token T --deadline D --rate R
//
// It warms up (warmUpCalls calls, the program compiled and the
// connection made) and writes "ready"; then, at each line "go" on its
// standard input, it calls until the next line (or the input's end) and
// writes the tally of those calls as one JSON line.
const steadyClientCmd = "steady-client"

// warmUpCalls are the steady client's calls before a phase, not counted.
const warmUpCalls = 20

// tallyJSON is a tally as the steady client's process writes it.
type tallyJSON struct {
	Requests  int               `json:"requests"`
	Kinds     map[string]int    `json:"kinds"`
	WrongKind int               `json:"wrong_kind"`
	Untyped   int               `json:"untyped"`
	Late      int               `json:"late"`
	Lat       []time.Duration   `json:"lat"`
	Notes     []string          `json:"notes"`
	Samples   map[string]string `json:"samples"`
}

func (t *tally) toJSON() tallyJSON {
	t.mu.Lock()
	defer t.mu.Unlock()
	return tallyJSON{Requests: t.requests, Kinds: t.kinds, WrongKind: t.wrongKind, Untyped: t.untyped, Late: t.late,
		Lat: t.lat, Notes: t.notes, Samples: t.samples}
}

func (j tallyJSON) tally() *tally {
	t := newTally()
	t.requests, t.wrongKind, t.untyped, t.late, t.lat, t.notes = j.Requests, j.WrongKind, j.Untyped, j.Late, j.Lat, j.Notes
	for k, n := range j.Kinds {
		t.kinds[k] = n
	}
	for k, s := range j.Samples {
		t.samples[k] = s
	}
	return t
}

// steadyClientMain is the steady client's process.
func steadyClientMain(args []string) error {
	fs := flag.NewFlagSet(steadyClientCmd, flag.ContinueOnError)
	addr := fs.String("addr", "", "exprd's gRPC address")
	token := fs.String("token", "", "the steady client's bearer token")
	deadline := fs.Duration("deadline", 10*time.Second, "each call's deadline")
	rate := fs.Float64("rate", 200, "calls per second, at most (one at a time)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	conn, err := dialFrom(*addr, steadySource, withToken(*token))
	if err != nil {
		return err
	}
	defer conn.Close()
	wctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	steady(wctx, conn, *deadline, *rate, warmUpCalls)
	cancel()
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(out, "ready")
	if err := out.Flush(); err != nil {
		return err
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() != "go" {
			return fmt.Errorf("steady client: %q on its input, not go", in.Text())
		}
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan *tally, 1)
		go func() { done <- steady(ctx, conn, *deadline, *rate, 0) }()
		in.Scan() // the next line, or the input's end, stops it
		stop()
		if err := json.NewEncoder(out).Encode((<-done).toJSON()); err != nil {
			return err
		}
		if err := out.Flush(); err != nil {
			return err
		}
	}
	return in.Err()
}

// steadyProc is a steady client's process, started by the harness.
type steadyProc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

// startSteady starts a steady client against addr and waits for its
// warm-up to end.
func startSteady(cfg *config, addr, token string) (*steadyProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, steadyClientCmd, "--addr", addr, "--token", token,
		"--deadline", cfg.steadyDeadline.String(), "--rate", fmt.Sprint(cfg.steadyRate))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &steadyProc{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	p.out.Buffer(nil, 64<<20) // a tally's latencies: a few MB at most
	if !p.out.Scan() || p.out.Text() != "ready" {
		p.close()
		return nil, fmt.Errorf("the steady client did not get ready: %q, %v", p.out.Text(), p.out.Err())
	}
	return p, nil
}

// begin starts the steady client's calls.
func (p *steadyProc) begin() error {
	_, err := io.WriteString(p.in, "go\n")
	return err
}

// end stops them and reads their tally.
func (p *steadyProc) end() (*tally, error) {
	if _, err := io.WriteString(p.in, "stop\n"); err != nil {
		return nil, err
	}
	if !p.out.Scan() {
		return nil, errors.Join(errors.New("the steady client wrote no tally"), p.out.Err())
	}
	var j tallyJSON
	if err := json.Unmarshal(p.out.Bytes(), &j); err != nil {
		return nil, fmt.Errorf("the steady client's tally: %w", err)
	}
	return j.tally(), nil
}

// close ends the process.
func (p *steadyProc) close() {
	p.in.Close()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}
