package evaluator

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/expr-lang/expr/builtin"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Runner says who runs a host function.
type Runner int

const (
	// RunClient functions run on the client: the Host is asked.
	RunClient Runner = iota + 1
	// RunServer functions run in the server: Function.Impl is called.
	RunServer
)

// Func is the implementation of a server-run host function. args is the
// call's one object argument, already valid against the input schema; it
// may share the session's state, so a Func must not modify it.
type Func func(ctx context.Context, args map[string]any) (any, error)

// Function is a host function. It takes one object argument.
type Function struct {
	Name        string
	Description string
	// InputSchema and OutputSchema are JSON Schemas; empty means any object
	// and any value.
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage
	Runner       Runner
	// Impl runs a RunServer function.
	Impl Func
}

// Settings fix what a session's calls may do.
type Settings struct {
	// Read allows the call's "read".
	Read bool
	// Functions are the session's host functions.
	Functions []Function
	// ToolFunctions, when HasToolFunctions, replaces Functions for tool
	// calls. An entry with only a name refers to the session's function.
	ToolFunctions    []Function
	HasToolFunctions bool
	// Note is appended to the tool's description.
	Note string
}

// Tool is a checked Settings with its budgets: what one session's calls may
// do. It is immutable and safe to share.
type Tool struct {
	settings Settings
	budgets  Budgets
	// funcs are the functions tool calls may call, by name.
	funcs map[string]*function
	names []string
	// refused names functions tool calls may not call here, and why.
	refused map[string]string
	input   *jsonschema.Schema
	// key is what, besides the source, changes how an expression compiles.
	key string
	// now is the clock of the time budget; nil: the thread's CPU time
	// (meter).
	now func() time.Time
}

type function struct {
	Function
	input, output *jsonschema.Schema
}

// ToolOption changes how NewTool builds a Tool.
type ToolOption func(*Tool)

// ClientUnreachable refuses client-run functions with unknown-reference: no
// client can be asked (a unary call).
func ClientUnreachable() ToolOption {
	return func(t *Tool) {
		for name, f := range t.funcs {
			if f.Runner == RunClient {
				delete(t.funcs, name)
				t.refused[name] = "it runs on the client, and a unary Call has no client to ask; use a Session"
			}
		}
	}
}

// WithClock sets the clock the time budget reads (default: the CPU time
// of the thread a program runs on, where the system tells it, else
// time.Now): a test gives calls a clock that does not depend on the
// machine's load.
// now must be safe for concurrent use when the tool's calls run at once.
func WithClock(now func() time.Time) ToolOption {
	return func(t *Tool) { t.now = now }
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// NewTool checks settings and budgets. Its errors say which function or
// schema is wrong; they are the caller's, not the model's.
func NewTool(s Settings, b Budgets, opts ...ToolOption) (*Tool, error) {
	t := &Tool{settings: s, budgets: b, funcs: map[string]*function{}, refused: map[string]string{}}
	session := map[string]*function{}
	for i, f := range s.Functions {
		cf, err := checkFunction(f, fmt.Sprintf("functions[%d]", i))
		if err != nil {
			return nil, err
		}
		if session[f.Name] != nil {
			return nil, fmt.Errorf("functions[%d]: function %q is declared twice", i, f.Name)
		}
		session[f.Name] = cf
	}
	if !s.HasToolFunctions {
		t.funcs = session
	} else {
		for i, f := range s.ToolFunctions {
			where := fmt.Sprintf("tool_functions[%d]", i)
			cf := session[f.Name]
			if !f.isReference() || cf == nil {
				var err error
				if cf, err = checkFunction(f, where); err != nil {
					if f.isReference() {
						return nil, fmt.Errorf("%s: %q is not a session function, and an entry with only a name must name one", where, f.Name)
					}
					return nil, err
				}
			}
			if t.funcs[f.Name] != nil {
				return nil, fmt.Errorf("%s: function %q is declared twice", where, f.Name)
			}
			t.funcs[f.Name] = cf
		}
		for name := range session {
			if t.funcs[name] == nil {
				t.refused[name] = "the tool's own functions replace the session's, and this is not one of them"
			}
		}
	}
	for _, o := range opts {
		o(t)
	}
	t.names = sortedKeys(t.funcs)
	in, err := inputSchema(s.Read, b.MaxSteps)
	if err != nil {
		return nil, err
	}
	t.input = in
	// The bounded operations compiled into a program capture the string and
	// value limits.
	t.key = strings.Join(t.names, ",") + "|" + strconv.Itoa(b.MaxNodes) + "|" + strconv.Itoa(b.MaxStringLength) + "|" + strconv.Itoa(b.MaxValueBytes)
	return t, nil
}

// Budgets returns the tool's budgets.
func (t *Tool) Budgets() Budgets { return t.budgets }

// Settings returns the settings the tool was built from.
func (t *Tool) Settings() Settings { return t.settings }

func (f Function) isReference() bool {
	return f.Description == "" && len(f.InputSchema) == 0 && len(f.OutputSchema) == 0 && f.Runner == 0 && f.Impl == nil
}

func checkFunction(f Function, where string) (*function, error) {
	switch {
	case !identRE.MatchString(f.Name):
		return nil, fmt.Errorf("%s: name %q is not an identifier (a letter or '_', then letters, digits or '_')", where, f.Name)
	case strings.HasPrefix(f.Name, reservedPrefix):
		return nil, fmt.Errorf("%s: name %q is reserved: names starting with %q are the evaluator's", where, f.Name, reservedPrefix)
	case isBuiltin(f.Name):
		return nil, fmt.Errorf("%s: name %q is an expr builtin", where, f.Name)
	case f.Runner != RunClient && f.Runner != RunServer:
		return nil, fmt.Errorf("%s: function %q has no runner: say whether the client or the server runs it", where, f.Name)
	case f.Runner == RunServer && f.Impl == nil:
		return nil, fmt.Errorf("%s: function %q is not one the server provides", where, f.Name)
	}
	cf := &function{Function: f}
	in := f.InputSchema
	if len(in) == 0 {
		in = json.RawMessage(`{"type":"object"}`)
	}
	var err error
	if cf.input, err = compileSchema(where+".input_schema", in); err != nil {
		return nil, err
	}
	if len(f.OutputSchema) > 0 {
		if cf.output, err = compileSchema(where+".output_schema", f.OutputSchema); err != nil {
			return nil, err
		}
	}
	return cf, nil
}

func isBuiltin(name string) bool {
	if name == "scopes" {
		return true
	}
	_, ok := builtin.Index[name]
	return ok
}

var inputSchemas sync.Map // inputSchemaKey → *jsonschema.Schema

type inputSchemaKey struct {
	read     bool
	maxSteps int
}

// inputSchema compiles InputSchema once for each form.
func inputSchema(read bool, maxSteps int) (*jsonschema.Schema, error) {
	k := inputSchemaKey{read, maxSteps}
	if s, ok := inputSchemas.Load(k); ok {
		return s.(*jsonschema.Schema), nil
	}
	// The read limit changes only a description, which validation ignores:
	// the default keeps one compiled schema per form.
	s, err := compileSchema("input schema", InputSchema(read, maxSteps, DefaultMaxReadChars))
	if err != nil {
		return nil, err
	}
	inputSchemas.Store(k, s)
	return s, nil
}
