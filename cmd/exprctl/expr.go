package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/exprd/exprd/client"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
)

// callFlags are the flags expr and call share.
type callFlags struct {
	settingsFlags
	state     string
	call      string
	timeoutMs uint
}

func (f *callFlags) register(fs *flag.FlagSet, clientFnUsage string) {
	f.settingsFlags.register(fs, clientFnUsage)
	fs.StringVar(&f.state, "state", "", "a file holding the state (scopes.root) as a JSON object")
	fs.StringVar(&f.call, "call", "", "the tool input as the model sends it: JSON, or @FILE")
	fs.UintVar(&f.timeoutMs, "timeout-ms", 0, "the call's evaluation time budget in milliseconds (0: the server's maximum)")
}

// inputs checks and reads what the flags name.
func (f *callFlags) inputs() (input, state []byte, budgets *exprdv1.Budgets, err error) {
	timeout, err := uint32Flag("timeout-ms", f.timeoutMs)
	if err != nil {
		return nil, nil, nil, err
	}
	if timeout > 0 {
		budgets = &exprdv1.Budgets{TimeoutMs: timeout}
	}
	if input, err = callInput(f.call); err != nil {
		return nil, nil, nil, err
	}
	if state, err = stateFile(f.state); err != nil {
		return nil, nil, nil, err
	}
	return input, state, budgets, nil
}

// exprCmd runs one call on a Session stream, printing each write as it
// happens and then the answer.
func exprCmd(e *env, args []string) error {
	fs := e.newFlagSet("expr")
	var f callFlags
	f.register(fs, "client-run functions to declare; exprctl runs downloadCsv")
	yes := fs.Bool("yes", false, "accept every confirm without asking")
	no := fs.Bool("no", false, "decline every confirm without asking")
	csvOut := fs.String("csv-out", "", "write downloadCsv's CSV to this file instead of stdout")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *yes && *no {
		return usagef("--yes and --no contradict each other")
	}
	for _, name := range f.clientFn {
		if _, ok := builtinClientFunctions[name]; !ok {
			return usagef("--client-fn %s: exprctl runs only %s", name, strings.Join(slices.Sorted(maps.Keys(builtinClientFunctions)), ", "))
		}
	}
	input, state, budgets, err := f.inputs()
	if err != nil {
		return err
	}

	out := &lockedWriter{w: e.stdout}
	var mu sync.Mutex
	var rejected []string
	h := client.Handlers{
		OnWrite:   func(_ string, w *exprdv1.StepWrite) { out.print(writeLine(w)) },
		OnConfirm: e.confirmer(*yes, *no),
		Functions: map[string]client.Function{"downloadCsv": downloadCsv(out, *csvOut, e.stderr)},
		OnRejected: func(r *exprdv1.Rejected) {
			mu.Lock()
			rejected = append(rejected, rejectedText(r))
			mu.Unlock()
		},
	}
	c, err := e.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	s, err := c.OpenSession(e.ctx, f.settings(), budgets, h)
	if err != nil {
		return err
	}
	if state != nil {
		if err := s.SetState(e.ctx, state); err != nil {
			_ = s.Close()
			return err
		}
	}
	res, callErr := s.Call(e.ctx, input)
	closeErr := s.Close()
	if res != nil {
		out.print(fmt.Sprintf("answer %s\n", res.Answer.GetAnswerJson()))
	}
	mu.Lock()
	defer mu.Unlock()
	// A refused state is told before the answer: the call ran on the
	// session's old state.
	if len(rejected) > 0 {
		return errors.New(strings.Join(rejected, "; "))
	}
	if callErr != nil {
		return callErr
	}
	return closeErr
}

// callCmd runs one call through the unary Call: confirms are declined and
// client-run functions refused by the server.
func callCmd(e *env, args []string) error {
	fs := e.newFlagSet("call")
	var f callFlags
	f.register(fs, "client-run functions to declare (a unary call cannot run them)")
	if err := parse(fs, args); err != nil {
		return err
	}
	input, state, budgets, err := f.inputs()
	if err != nil {
		return err
	}
	c, err := e.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	resp, err := c.Call(e.ctx, &exprdv1.CallRequest{Settings: f.settings(), Budgets: budgets, StateJson: string(state), InputJson: string(input)})
	if err != nil {
		return err
	}
	for _, w := range resp.GetWrites() {
		fmt.Fprint(e.stdout, writeLine(w))
	}
	fmt.Fprintf(e.stdout, "answer %s\n", resp.GetAnswerJson())
	return nil
}

func writeLine(w *exprdv1.StepWrite) string {
	return fmt.Sprintf("write step=%d path=%s value=%s\n", w.GetStep(), w.GetPath(), w.GetValueJson())
}

// confirmer answers confirms on the terminal, or from --yes or --no.
func (e *env) confirmer(yes, no bool) func(ctx context.Context, callID string, step int, text string) (bool, error) {
	t := newTerminal(e.stdin, e.stderr, yes, no)
	return func(ctx context.Context, _ string, _ int, text string) (bool, error) {
		return t.ask(ctx, "confirm: "+text)
	}
}

// lockedWriter lets the writes, the CSV and the answer share stdout.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) print(s string) { _, _ = io.WriteString(l, s) }
