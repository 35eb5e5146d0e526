// Command exprctl is a command-line client of exprd: its ExprTool,
// AgentLoop, CodeMode and ToolRegistry services.
//
//	exprctl [CONN] describe [--read] [--server-fn A,B] [--client-fn C] [--note TEXT] [--part PART]
//	exprctl [CONN] expr --call JSON [--state FILE] [--read] [--server-fn A,B] [--client-fn downloadCsv] [--yes|--no] [--timeout-ms N] [--csv-out FILE]
//	exprctl [CONN] call --call JSON [--state FILE] [--read] [--server-fn A,B] [--timeout-ms N]
//	exprctl [CONN] agent --prompt TEXT [--provider P] [--expr] [--utcp NAME=TOOL] [--codemode A,B] [--client-tool downloadCsv] [--needs-approval A,B] [--yes|--no] [--tool-choice auto|none|required|TOOL] ...
//	exprctl [CONN] agent --resume TURN_ID[:SEQ] [--yes|--no] [--csv-out FILE]
//	exprctl [CONN] codemode run (FILE | - | --code CODE | --prompt TEXT [--provider P]) [--tools A,B] [--needs-approval A,B] [--yes|--no] [--timeout-ms N] [--json]
//	exprctl [CONN] tools list [--manual M] [--full] [--json]
//	exprctl [CONN] tools search QUERY [--limit N] [--full] [--json]
//	exprctl [CONN] tools register NAME (--file PATH | --url URL | --grpc-target HOST:PORT [--grpc-security tls|plaintext]) [--replace] [--json]
//	exprctl [CONN] tools deregister NAME [--json]
//
// CONN, the connection flags, may also follow the command:
//
//	--addr HOST:PORT  exprd's address: $EXPRCTL_ADDR, else localhost:50051
//	--token TOKEN     a bearer token, sent as "authorization: Bearer TOKEN"
//	                  on every RPC: $EXPRCTL_TOKEN by default, which keeps it
//	                  out of ps. Registry writes need one with the
//	                  registry.write scope when the server has auth on.
//	--tls             TLS, the server's certificate checked against the
//	                  system's roots (default: plaintext, as exprd serves on
//	                  loopback or behind a mesh; a token is then sent in
//	                  the clear)
//	--tls-ca FILE     TLS, checked against the CA certificates in FILE
//
// expr runs the call on a Session stream: each write is printed as it
// happens ("write step=N path=P value=JSON"), then "answer JSON". call does
// the same through the unary Call. --call takes the tool input as JSON, or
// @FILE to read it from a file.
//
// agent runs an AgentLoop turn and prints it as it streams, its first line
// "turn TURN_ID"; --resume TURN_ID[:SEQ] follows a turn started earlier
// (its events after SEQ, default 0, all; a negative SEQ counts back from
// the latest), printed the same way. Either answers what the turn asks: a
// call of a tool --needs-approval lists on the terminal (or --yes, --no),
// a call of the client-run downloadCsv (--client-tool) by writing its CSV.
// A turn is started detached, and a dropped connection is told on stderr
// and resumed after the last event printed, at most --reconnect (8)
// failed attempts in a row; Ctrl-C cancels the turn.
//
// codemode run runs a program on a CodeMode Run stream: from FILE, from
// stdin (-) or --code, calling only the tools --tools lists; or a plan a
// model makes of --prompt. It prints each event as it arrives: the plan,
// each tool call's start and end, each chunk of a streaming tool, then the
// value. A call of a tool --needs-approval lists waits for a y/N answer on
// the terminal (the question on stderr, the answer a line of stdin), or
// --yes / --no answers every one. Ctrl-C cancels the run (RunCancel) and
// waits briefly for the server to say what it had done.
//
// tools manages and queries the UTCP tool registry. list prints every
// tool, a page of ListTools at a time; search prints the --limit best
// (at most 100). --full asks for each tool's JSON Schemas too, which --json
// does by default (--full=false leaves them out). register sends --file
// as manual_json: a UTCP manual, or an OpenAPI document the server
// converts; it prints the tools registered and those left out, or
// registered without their output schema, with why.
//
// codemode and tools print for people by default, and with --json one
// JSON object per line: per event for codemode run ({"event": "chunk",
// ...}, named as the proto's RunResponse fields, JSON fields inlined as
// JSON), per tool for list and search, one for the answer of register and
// deregister. A message the server rejected is told with its status's code
// and message: "the server rejected the state: InvalidArgument: ...".
// Errors go to stderr in both modes.
//
// The exit code is 0 when the request was answered, even with an error
// answer for the model (expr, call); 1 when the server refused the request
// or could not be reached, or a CodeMode program failed; 2 for a usage
// error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
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
	name   string // the command's, "tools register", for messages
	conn   connFlags
	watch  connWatch
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
	"codemode": group(map[string]func(*env, []string) error{"run": codemodeRunCmd}),
	"tools": group(map[string]func(*env, []string) error{
		"list": toolsListCmd, "search": toolsSearchCmd, "register": toolsRegisterCmd, "deregister": toolsDeregisterCmd,
	}),
}

const usage = `usage: exprctl [connection flags] COMMAND [flags]

commands:
  describe           print the tool's description, schemas and prompt partials
  expr               run a call on a Session stream (confirms, client-run downloadCsv)
  call               run a call through the unary Call
  agent              run an AgentLoop turn (or --resume one) and print it as it streams
  codemode run       run a CodeMode program, or a model's plan for a prompt, printing its events as they happen
  tools list         list the registered UTCP tools
  tools search       rank the registered tools for a query
  tools register     register a UTCP manual (or an OpenAPI document) under a name
  tools deregister   remove a manual and its tools

connection flags, before or after the command:
  --addr HOST:PORT   exprd's address (env EXPRCTL_ADDR; default localhost:50051)
  --token TOKEN      a bearer token for every RPC (env EXPRCTL_TOKEN)
  --tls              connect over TLS, checked against the system's roots
  --tls-ca FILE      connect over TLS, checked against the CA certificates in FILE

codemode and tools print for people, or with --json one JSON object a line.
Run exprctl COMMAND --help for a command's flags.
`

func runContext(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{ctx: ctx, conn: connFromEnv(), stdin: stdin, stdout: stdout, stderr: stderr}
	fs := flag.NewFlagSet("exprctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	e.conn.register(fs)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
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
	e.name = fs.Arg(0)
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
		fmt.Fprintf(stderr, "exprctl %s: %v\n", e.name, err)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "exprctl %s: %s\n", e.name, e.errorText(err))
		return exitError
	}
}

// group is a command made of subcommands: "tools list".
func group(subs map[string]func(*env, []string) error) func(*env, []string) error {
	return func(e *env, args []string) error {
		names := strings.Join(slices.Sorted(maps.Keys(subs)), ", ")
		if len(args) == 0 {
			return usagef("want a subcommand: %s", names)
		}
		switch args[0] {
		case "-h", "-help", "--help":
			fmt.Fprintf(e.stderr, "usage: exprctl %s SUBCOMMAND [flags]\n\nsubcommands: %s\nRun exprctl %s SUBCOMMAND --help for its flags.\n", e.name, names, e.name)
			return flag.ErrHelp
		}
		sub, ok := subs[args[0]]
		if !ok {
			return usagef("unknown subcommand %q: want one of %s", args[0], names)
		}
		e.name += " " + args[0]
		return sub(e, args[1:])
	}
}
