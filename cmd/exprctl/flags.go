package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"strings"
	"unicode/utf8"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
)

// errFlagParse is a flag error the flag package has already printed.
var errFlagParse = errors.New("bad flags")

// errNotUTF8 is a request's JSON or manual that is not UTF-8 text, which
// the proto's string fields must hold.
var errNotUTF8 = errors.New("not UTF-8 text")

// listFlag collects names given as A,B or by repeating the flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for _, name := range strings.Split(v, ",") {
		if name = strings.TrimSpace(name); name != "" {
			*l = append(*l, name)
		}
	}
	return nil
}

// settingsFlags are the flags that make a request's Settings.
type settingsFlags struct {
	read     bool
	serverFn listFlag
	clientFn listFlag
	note     string
}

func (s *settingsFlags) register(fs *flag.FlagSet, clientFnUsage string) {
	fs.BoolVar(&s.read, "read", false, `allow the call's "read"`)
	fs.Var(&s.serverFn, "server-fn", "server-run functions to declare, by the server's names (A,B or repeated); NAME=TOOL calls the UTCP tool TOOL as NAME (add=math.add)")
	if clientFnUsage != "" {
		fs.Var(&s.clientFn, "client-fn", clientFnUsage)
	}
}

func (s *settingsFlags) settings() *exprdv1.Settings {
	out := &exprdv1.Settings{Read: s.read, Note: s.note}
	for _, name := range s.serverFn {
		// The server fills in the description and schemas of its own.
		name, serverName, _ := strings.Cut(name, "=")
		out.Functions = append(out.Functions, &exprdv1.Function{Name: name, Runner: exprdv1.Function_RUNNER_SERVER, ServerName: serverName})
	}
	for _, name := range s.clientFn {
		if f, ok := builtinClientFunctions[name]; ok {
			out.Functions = append(out.Functions, f)
			continue
		}
		out.Functions = append(out.Functions, &exprdv1.Function{Name: name, Runner: exprdv1.Function_RUNNER_CLIENT})
	}
	return out
}

// newFlagSet is a command's flag set; the connection flags may follow the
// command too.
func (e *env) newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("exprctl "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	e.conn.register(fs)
	return fs
}

// withUsage gives fs a usage line naming its arguments ("NAME (--file PATH
// | --url URL)") above the flags.
func withUsage(fs *flag.FlagSet, synopsis string) {
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s %s\n\nflags:\n", fs.Name(), synopsis)
		fs.PrintDefaults()
	}
}

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errFlagParse
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// parseArgs parses flags and arguments in any order (`tools register
// NAME --file F` and `tools register --file F NAME`); after "--" all are
// arguments. It wants between min and max arguments (max < 0: any number).
func parseArgs(fs *flag.FlagSet, args []string, minArgs, maxArgs int) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, errFlagParse
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	switch {
	case len(pos) < minArgs:
		return nil, usagef("too few arguments: see --help")
	case maxArgs >= 0 && len(pos) > maxArgs:
		return nil, usagef("unexpected argument %q", pos[maxArgs])
	}
	return pos, nil
}

// uint32Flag checks that a count flag fits its uint32 field.
func uint32Flag(name string, v uint) (uint32, error) {
	if v > math.MaxUint32 {
		return 0, usagef("--%s %d is too large", name, v)
	}
	return uint32(v), nil
}

// callInput reads --call: JSON, or @FILE. It must be JSON: a call that is
// not is a typo on the command line, not something to send the server.
func callInput(v string) ([]byte, error) {
	if v == "" {
		return nil, usagef("--call is required: the tool input as JSON, or @FILE")
	}
	in := []byte(v)
	if name, ok := strings.CutPrefix(v, "@"); ok {
		var err error
		if in, err = os.ReadFile(name); err != nil {
			return nil, usagef("--call: %v", err)
		}
	}
	if err := checkJSON(in); err != nil {
		return nil, usagef("--call is not valid JSON: %v", err)
	}
	return in, nil
}

// stateFile reads --state: a file holding a JSON object.
func stateFile(name string) ([]byte, error) {
	if name == "" {
		return nil, nil
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, usagef("--state: %v", err)
	}
	if err := checkJSON(b); err != nil {
		return nil, usagef("--state %s is not valid JSON: %v", name, err)
	}
	if b = bytes.TrimSpace(b); len(b) == 0 || b[0] != '{' {
		return nil, usagef("--state %s must hold a JSON object", name)
	}
	return b, nil
}

// checkJSON is json.Valid with the decoder's message for what is wrong,
// and UTF-8: JSON travels in proto strings.
func checkJSON(b []byte) error {
	if !utf8.Valid(b) {
		return errNotUTF8
	}
	if json.Valid(b) {
		return nil
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	return fmt.Errorf("invalid JSON")
}
