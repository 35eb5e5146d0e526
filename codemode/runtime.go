package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/expr-lang/expr/file"

	"github.com/exprd/exprd/internal/exprbound"
	"github.com/exprd/exprd/membudget"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/manual"
)

// Registry is what the runtime and the orchestrator need of a tool
// registry; *utcp.Registry is one. Call and CallStream must not change
// args: it may share the program's values.
type Registry interface {
	Call(ctx context.Context, name string, args map[string]any) (any, error)
	CallStream(ctx context.Context, name string, args map[string]any) (utcp.Stream, error)
	SearchContext(ctx context.Context, query string, limit int) ([]utcp.SearchResult, error)
	Tool(name string) (*manual.Tool, error)
}

var _ Registry = (*utcp.Registry)(nil)

// ErrModel is matched by the error of a prompt whose model request failed
// (the server's own text stays in it, for logs; the message is exprd's).
var ErrModel = errors.New("codemode: the model request failed")

// ErrInvalidOptions is matched by the error Run returns for options it
// cannot use (a negative budget): the caller's fault, not the program's.
var ErrInvalidOptions = errors.New("codemode: invalid options")

// Runtime runs programs against one registry. It caches compiled programs
// and pools VMs; it is safe for concurrent use.
type Runtime struct {
	reg      Registry
	programs *exprbound.Cache[programKey, *program]
	vms      exprbound.VMs
	memory   *membudget.Budget
	turns    Turns
}

// Turns is what a run's program takes to compute: an evaluator's
// (evaluator.Evaluator.Turns), so that CodeMode's programs and ExprTool's
// share the cores.
type Turns interface {
	// Acquire waits for a turn for caller, or for ctx to end (its error).
	Acquire(ctx context.Context, caller string) error
	// Release gives a turn of caller's back, its program having run for
	// ran.
	Release(caller string, ran time.Duration)
}

// WithTurns makes each run's program take a turn of t to compute, by its
// caller (membudget.WithCaller), and give it back while a tool call runs
// (default: nil, programs compute at once, as many as run): give it an
// evaluator's turns (evaluator.Evaluator.Turns) so that CodeMode's
// programs and ExprTool's share the cores, a program having one while it
// computes. The wait for a turn is inside the run's time budget.
func WithTurns(t Turns) Option {
	return func(rt *Runtime) error { rt.turns = t; return nil }
}

// WithMemoryBudget reserves what each run builds past a small allowance
// (exprbound.DefaultAllocAllowance) from b, until the run ends (default:
// nil, nothing reserved; the byte budget still bounds each run).
func WithMemoryBudget(b *membudget.Budget) Option {
	return func(rt *Runtime) error { rt.memory = b; return nil }
}

// overAlloc is the error of a run that built more than its byte budget.
func overAlloc(used, max int64) error {
	return budgetError(BudgetAlloc, "the run built %d bytes, over the limit of %d bytes (strings, arrays and maps, and the results of tools): build less, e.g. map over fewer items or keep shorter strings", used, max)
}

// Option configures a Runtime.
type Option func(*Runtime) error

// WithCacheSize sets how many compiled programs are kept (default
// DefaultCacheSize); it must be positive.
func WithCacheSize(n int) Option {
	return func(rt *Runtime) error {
		if n <= 0 {
			return fmt.Errorf("%w: cache size %d, want a positive value", ErrInvalidOptions, n)
		}
		var err error
		rt.programs, err = exprbound.NewCache[programKey, *program](n)
		return err
	}
}

// New returns a Runtime calling the tools of reg.
func New(reg Registry, opts ...Option) (*Runtime, error) {
	if reg == nil {
		return nil, fmt.Errorf("%w: no registry", ErrInvalidOptions)
	}
	rt := &Runtime{reg: reg}
	for _, o := range append([]Option{WithCacheSize(DefaultCacheSize)}, opts...) {
		if err := o(rt); err != nil {
			return nil, err
		}
	}
	return rt, nil
}

// Registry returns the runtime's registry.
func (rt *Runtime) Registry() Registry { return rt.reg }

// RunOptions are one run's settings.
type RunOptions struct {
	// Tools is the whitelist: the full names of the tools the program may
	// call. Empty: none.
	Tools []string
	// Visible, when set, says which tools the run's caller may see of the
	// registry (a token's tools: scopes): a tool it does not see is off
	// the whitelist (unknown-reference, as any tool the whitelist lacks),
	// a prompt is neither ranked against nor planned with it, and an
	// unknown tool's error offers only similar names it sees. Nil: every
	// tool.
	Visible func(name string) bool
	// Budgets bound the run; Budgets.Timeout is timeout_ms (0: DefaultTimeout).
	Budgets Budgets
	// NeedsApproval names tools whose every call is first put to Approve.
	NeedsApproval []string
	// Approve decides a call of a tool that needs approval; false (or no
	// Approve at all) rejects it, which the program sees as the tool's
	// error. It gets the run's context: a run cancelled while waiting stops.
	Approve func(ctx context.Context, tool string, args map[string]any) (bool, error)
	// OnEvent, when set, gets each tool call's start and end and each
	// stream chunk, in order, from the run's goroutine.
	OnEvent func(Event)
	// OnChunk, when set, gets each chunk of a CallToolStream as it arrives.
	OnChunk func(tool string, chunk any)
}

// Result is a run's outcome. Trace is set whether or not the run failed.
type Result struct {
	// Value is the last expression's value in JSON types, and ValueJSON its
	// JSON; both unset when the run failed.
	Value     any
	ValueJSON json.RawMessage
	Trace     []Call
	// Cancelled is set when the caller's context ended the run.
	Cancelled bool
	Elapsed   time.Duration
}

// Check parses and checks code and the literal tool names in it against
// tools, without running anything (compiled programs are cached).
func (rt *Runtime) Check(code string, tools []string, b Budgets) (*Analysis, error) {
	b, err := b.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidOptions, err)
	}
	p, cerr := rt.compile(code, &b)
	if cerr != nil {
		return nil, cerr
	}
	if cerr := checkTools(p.analysis, set(tools)); cerr != nil {
		return p.analysis, cerr
	}
	return p.analysis, nil
}

func (rt *Runtime) compile(code string, b *Budgets) (*program, *Error) {
	if err := checkSource(code, b); err != nil {
		return nil, err
	}
	key := programKey{src: code, maxNodes: b.MaxNodes, maxStringLength: b.MaxStringLength}
	if p, ok := rt.programs.Get(key); ok {
		return p, nil
	}
	p, err := compile(code, b)
	if err != nil {
		return nil, err
	}
	rt.programs.Add(key, p)
	return p, nil
}

// Run checks code and runs it in the calling goroutine. A program that
// fails, before or while running, returns a *Error (with the trace so far
// in the Result); options it cannot use return an error matching
// ErrInvalidOptions. Run returns only once the program and its tool calls
// have stopped.
func (rt *Runtime) Run(ctx context.Context, code string, opts RunOptions) (Result, error) {
	start := time.Now()
	b, err := opts.Budgets.withDefaults()
	if err != nil {
		return Result{}, fmt.Errorf("%w: %v", ErrInvalidOptions, err)
	}
	p, cerr := rt.compile(code, &b)
	if cerr != nil {
		return Result{}, cerr
	}
	allowed := set(opts.Tools)
	if opts.Visible != nil {
		for n := range allowed {
			if !opts.Visible(n) {
				delete(allowed, n)
			}
		}
	}
	if cerr := checkTools(p.analysis, allowed); cerr != nil {
		return Result{}, cerr
	}
	rctx, cancel := context.WithTimeout(ctx, b.Timeout)
	defer cancel()
	r := &run{ctx: rctx, parent: ctx, toolCtx: toolCtx(rctx, &b), reg: rt.reg, opts: &opts, b: &b, allowed: allowed, approval: set(opts.NeedsApproval),
		// Room for the calls the source names, the usual case: the trace
		// grows from there only for calls in a loop or computed names.
		trace: make([]Call, 0, min(len(p.analysis.Tools), b.MaxToolCalls))}
	r.bytes = exprbound.Meter{Max: int64(b.MaxAllocBytes), Over: overAlloc}
	if rt.memory != nil {
		var mem *membudget.Reservation
		defer func() { mem.Close() }()
		r.bytes.Reserve = func(n int64) error {
			if mem == nil {
				// The RPC's holder (an overload manager's call) is told.
				mem = rt.memory.EmptyFor(ctx, "a CodeMode run's values")
			}
			if err := mem.TryResize(n); err != nil {
				return budgetError(BudgetMemory, "the server's memory budget cannot hold what this run builds now: build less, or retry later")
			}
			return nil
		}
	}
	r.alarm.Watch(rctx)
	defer r.alarm.Release()
	if rt.turns != nil {
		r.turns, r.caller = rt.turns, membudget.CallerOf(ctx)
		if err := r.resume(); err != nil {
			return Result{}, r.failure(err)
		}
		defer r.pause()
	}
	env := map[string]any{
		nsName:                  namespace{CallTool: r.callTool, CallToolStream: r.callToolStream, Get: get},
		exprbound.TickName:      r.tick,
		exprbound.AllocName:     r.bytes.Alloc,
		exprbound.AllocDeepName: r.bytes.AllocDeep,
		exprbound.MeterName:     &r.bytes,
	}
	out, err := rt.vms.Run(p.prog, env, uint(b.MemoryBudget))
	res := Result{Trace: r.trace}
	if err == nil {
		err = rctx.Err()
	}
	if err == nil {
		// The walk guards against values of shared parts; the size of the
		// JSON itself is then checked exactly.
		var val any
		if val, err = jsonValue(out, 2*b.MaxResultBytes+64); err == nil {
			res.Value = val
			res.ValueJSON, err = json.Marshal(val)
		}
		if err == nil && len(res.ValueJSON) > b.MaxResultBytes {
			err = budgetError(BudgetResult, "the result is %d bytes of JSON, over the limit of %d", len(res.ValueJSON), b.MaxResultBytes)
		}
	}
	res.Elapsed = time.Since(start)
	if err != nil {
		e := r.failure(err)
		res.Cancelled = errors.Is(e, context.Canceled)
		res.Value, res.ValueJSON = nil, nil
		return res, e
	}
	return res, nil
}

// failure turns a run's error into the *Error the caller gets.
func (r *run) failure(err error) *Error {
	if r.ctx.Err() != nil {
		if errors.Is(r.parent.Err(), context.Canceled) {
			return &Error{Reason: ExpressionRuntime, Message: "the run was cancelled", cause: context.Canceled}
		}
		e := budgetError(BudgetTime, "the run is over its time budget of %v", r.b.Timeout)
		e.cause = context.DeadlineExceeded
		return e
	}
	var inner *Error
	var fe *file.Error
	switch {
	case errors.As(err, &inner):
		c := *inner
		if errors.As(err, &fe) && c.Line == 0 {
			return positioned(&c, fe)
		}
		return &c
	case errors.As(err, &fe) && fe.Message == "memory budget exceeded":
		e := budgetError(BudgetMemory, "over the memory budget of %d", r.b.MemoryBudget)
		return positioned(e, fe)
	case errors.As(err, &fe):
		msg := fe.Message
		if m, ok := exprbound.PanicMessage(err); ok {
			msg = m // a Go panic's text is not for the model
		}
		return positioned(errorf(ExpressionRuntime, "%s", msg), fe)
	}
	return &Error{Reason: ExpressionRuntime, Message: err.Error(), cause: err}
}

// get is codemode.Get: value[key] when value is an object, else nil.
func get(p ...any) any {
	if len(p) != 2 {
		panic(errorf(ExpressionType, "codemode.Get takes (value, key)"))
	}
	m, ok := p[0].(map[string]any)
	if !ok {
		return nil
	}
	k, ok := p[1].(string)
	if !ok {
		return nil
	}
	return m[k]
}

// A toolSet holds tool names as the registry knows them: the manual's part
// normalised (my-api.get is my_api.get), so that either spelling matches,
// as it does in the registry.
type toolSet map[string]bool

func set(names []string) toolSet {
	m := make(toolSet, len(names))
	for _, n := range names {
		m[utcp.NormalizeToolName(n)] = true
	}
	return m
}

func (s toolSet) has(name string) bool { return s[utcp.NormalizeToolName(name)] }

// listNames renders a whitelist for messages.
func listNames(m toolSet) string {
	if len(m) == 0 {
		return "none"
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
