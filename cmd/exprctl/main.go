// Command exprctl is a command-line client of exprd's ExprTool service.
//
//	exprctl [--addr HOST:PORT] describe [--read] [--server-fn A,B] [--client-fn C] [--note TEXT] [--part PART]
//	exprctl [--addr HOST:PORT] expr --call JSON [--state FILE] [--read] [--server-fn A,B] [--client-fn downloadCsv] [--yes|--no] [--timeout-ms N] [--csv-out FILE]
//	exprctl [--addr HOST:PORT] call --call JSON [--state FILE] [--read] [--server-fn A,B] [--timeout-ms N]
//
// --addr defaults to $EXPRCTL_ADDR, else localhost:50051; it may also follow
// the command. expr runs the call on a Session stream: each write is printed
// as it happens ("write step=N path=P value=JSON"), then "answer JSON".
// call does the same through the unary Call. --call takes the tool input
// as JSON, or @FILE to read it from a file.
//
// The exit code is 0 when the call was answered, even with an error answer
// for the model; 1 when the server refused the request or could not be
// reached; 2 for a usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"google.golang.org/grpc/status"

	"github.com/exprd/exprd/client"
)

// defaultAddr is where exprd listens by default (exprd --listen :50051).
const defaultAddr = "localhost:50051"

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runContext(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is exprctl's whole logic, for tests to call in-process.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdin, stdout, stderr)
}

// env is what a command runs with.
type env struct {
	ctx    context.Context
	addr   string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

// usageError is a bad command line: exit 2, with the usage hint.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

var commands = map[string]func(e *env, args []string) error{
	"describe": describeCmd,
	"expr":     exprCmd,
	"call":     callCmd,
	"agent":    agentCmd,
}

func runContext(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	addr := defaultAddr
	if v := os.Getenv("EXPRCTL_ADDR"); v != "" {
		addr = v
	}
	fs := flag.NewFlagSet("exprctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&addr, "addr", addr, "exprd's address (env EXPRCTL_ADDR)")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: exprctl [--addr HOST:PORT] COMMAND [flags]

commands:
  describe   print the tool's description, schemas and prompt partials
  expr       run a call on a Session stream (confirms, client-run downloadCsv)
  call       run a call through the unary Call
  agent      run an AgentLoop turn and print it as it streams

Run exprctl COMMAND --help for a command's flags.
`)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return exitUsage
	}
	cmd, ok := commands[fs.Arg(0)]
	if !ok {
		fmt.Fprintf(stderr, "exprctl: unknown command %q\n", fs.Arg(0))
		fs.Usage()
		return exitUsage
	}
	e := &env{ctx: ctx, addr: addr, stdin: stdin, stdout: stdout, stderr: stderr}
	err := cmd(e, fs.Args()[1:])
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errFlagParse):
		return exitUsage // the flag package has said what was wrong
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "exprctl %s: %v\n", fs.Arg(0), err)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "exprctl %s: %s\n", fs.Arg(0), errorText(err))
		return exitError
	}
}

// errorText puts a gRPC error as "Code: message", without grpc's prefix.
func errorText(err error) string {
	if st, ok := status.FromError(err); ok {
		return fmt.Sprintf("%s: %s", st.Code(), st.Message())
	}
	return err.Error()
}

// dial connects to e.addr (plaintext: exprd serves without TLS behind a
// mesh or on loopback).
func (e *env) dial() (*client.Client, error) {
	return client.Dial(e.addr)
}
