package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/ext"
	"github.com/dop251/goja"
	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"

	"github.com/exprd/exprd/evaluator"
)

// An engine runs one workload's program, compiled once, on its state.
type engine interface {
	run() (any, error)
}

// exprdEngine runs the step as a one-step call through the evaluator:
// input decoded and checked, the cached program run under the budgets, its
// value normalised, written copy-on-write and streamed to the host.
type exprdEngine struct {
	e     *evaluator.Evaluator
	tool  *evaluator.Tool
	st    *evaluator.State
	input []byte
	host  *lastWrite
}

func newExprd(w workload) (*exprdEngine, error) {
	e, err := evaluator.New()
	if err != nil {
		return nil, err
	}
	// The benchmarks measure speed, not the budgets: a loaded machine must
	// not trip the 100 ms default, and the large step needs more than the
	// default memory.
	budgets := evaluator.DefaultBudgets()
	budgets.Timeout = time.Minute
	budgets.MemoryBudget = 1 << 40
	budgets.MaxValueBytes = 1 << 30
	tool, err := evaluator.NewTool(evaluator.Settings{}, budgets)
	if err != nil {
		return nil, err
	}
	st := evaluator.NewState()
	if err := st.Replace(w.state); err != nil {
		return nil, err
	}
	src, err := json.Marshal(w.expr)
	if err != nil {
		return nil, err
	}
	input := []byte(`{"steps": [{"set": "scopes.root.selected", "expr": ` + string(src) + `}]}`)
	return &exprdEngine{e: e, tool: tool, st: st, input: input, host: &lastWrite{}}, nil
}

func (x *exprdEngine) run() (any, error) {
	if a := x.e.Run(context.Background(), x.tool, x.st, x.input, x.host); a.Err != nil {
		return nil, a.Err
	}
	return x.host.value, nil
}

// lastWrite is a host that keeps the last value written.
type lastWrite struct{ value any }

func (h *lastWrite) Write(_ context.Context, w evaluator.Write) error {
	h.value = w.Value
	return nil
}
func (*lastWrite) Confirm(context.Context, int, string) (bool, error) { return true, nil }
func (*lastWrite) CallClient(context.Context, string, map[string]any) (any, error) {
	return nil, fmt.Errorf("no client functions here")
}

// exprEngine is a bare run of the same program, precompiled, on the
// state decoded once with encoding/json, on one vm.VM reused from run to
// run as exprd reuses its VMs (expr.Run makes a new VM, and its stack,
// each time: a baseline slower than the fair one).
type exprEngine struct {
	p   *vm.Program
	env map[string]any
	vm  vm.VM
}

func newExpr(w workload) (*exprEngine, error) {
	root, err := decode(w.state)
	if err != nil {
		return nil, err
	}
	env := map[string]any{"scopes": map[string]any{"root": root}}
	p, err := expr.Compile(w.expr, expr.Env(env))
	if err != nil {
		return nil, err
	}
	return &exprEngine{p: p, env: env}, nil
}

func (x *exprEngine) run() (any, error) { return x.vm.Run(x.p, x.env) }

// celEngine is cel-go with its list extensions, the state as a dynamic
// variable.
type celEngine struct {
	prg  cel.Program
	vars map[string]any
}

func newCEL(w workload) (*celEngine, error) {
	root, err := decode(w.state)
	if err != nil {
		return nil, err
	}
	env, err := cel.NewEnv(cel.Variable("scopes", cel.MapType(cel.StringType, cel.DynType)), ext.Lists())
	if err != nil {
		return nil, err
	}
	ast, iss := env.Compile(w.cel)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	prg, err := env.Program(ast)
	if err != nil {
		return nil, err
	}
	return &celEngine{prg: prg, vars: map[string]any{"scopes": map[string]any{"root": root}}}, nil
}

func (x *celEngine) run() (any, error) {
	out, _, err := x.prg.Eval(x.vars)
	if err != nil {
		return nil, err
	}
	return out.ConvertToNative(anyType)
}

// gojaEngine is goja with the state parsed into native JS objects once and
// the script precompiled.
type gojaEngine struct {
	rt *goja.Runtime
	p  *goja.Program
}

func newGoja(w workload) (*gojaEngine, error) {
	rt := goja.New()
	if _, err := rt.RunString(`var scopes = {root: JSON.parse(` + jsString(w.state) + `)};`); err != nil {
		return nil, err
	}
	p, err := goja.Compile("step.js", w.js, true)
	if err != nil {
		return nil, err
	}
	return &gojaEngine{rt: rt, p: p}, nil
}

func (x *gojaEngine) run() (any, error) {
	v, err := x.rt.RunProgram(x.p)
	if err != nil {
		return nil, err
	}
	return v.Export(), nil
}

func decode(state []byte) (map[string]any, error) {
	var root map[string]any
	err := json.Unmarshal(state, &root)
	return root, err
}

func jsString(b []byte) string {
	s, _ := json.Marshal(string(b))
	return string(s)
}

var anyType = reflect.TypeFor[any]()
