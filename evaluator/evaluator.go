package evaluator

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unicode/utf8"

	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/vm"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/exprd/exprd/evaluator/jsonvalue"
	"github.com/exprd/exprd/internal/exprbound"
	"github.com/exprd/exprd/internal/procs"
	"github.com/exprd/exprd/internal/turns"
	"github.com/exprd/exprd/membudget"
)

// tracer makes the spans of a run and of each compile, children of the
// caller's span; without a configured provider they cost nothing.
var tracer = otel.Tracer("github.com/exprd/exprd/evaluator")

// startSpan starts a span as a child of the recording span in ctx (the
// server's span of the RPC). Outside a recorded trace a call records
// nothing, and pays nothing for it: a span that is not recorded still
// cost 5% of a small call.
func startSpan(ctx context.Context, name string) (context.Context, trace.Span) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, noSpan
	}
	return tracer.Start(ctx, name)
}

var noSpan = trace.SpanFromContext(context.Background())

// Evaluator compiles and runs calls. It is safe for concurrent use.
type Evaluator struct {
	programs *exprbound.Cache[programKey, *vm.Program]
	vms      exprbound.VMs
	envs     sync.Pool // *callEnv
	// running admits the programs that run at once (WithMaxRunning).
	running *turns.Turns
	// memory is the server's budget, which what a call builds past
	// exprbound.DefaultAllocAllowance is reserved from (WithMemoryBudget).
	memory *membudget.Budget
}

// WithMemoryBudget reserves what each call's programs build past a small
// allowance (exprbound.DefaultAllocAllowance) from b, until the call ends
// (default: nil, nothing reserved; the byte budget still bounds each call).
func WithMemoryBudget(b *membudget.Budget) Option {
	return func(e *Evaluator) error { e.memory = b; return nil }
}

// programKey is the source and what, besides it, changes how it compiles
// (the tool's key): two strings rather than one joined, to spare an
// allocation on every lookup.
type programKey struct {
	tool, src string
}

// CacheStats counts the compile cache's lookups.
type CacheStats = exprbound.CacheStats

// Option configures an Evaluator.
type Option func(*Evaluator) error

// WithCacheSize bounds the compile cache (default DefaultCompileCacheSize).
func WithCacheSize(n int) Option {
	return func(e *Evaluator) error {
		var err error
		e.programs, err = exprbound.NewCache[programKey, *vm.Program](n)
		return err
	}
}

// WithMaxRunning lets at most n programs run at once (default: as many as
// GOMAXPROCS is at the time, DefaultMaxRunning): the others wait, let in
// by caller (membudget.WithCaller), the caller whose programs have run the
// least first, and their time budget starts when they run. A call waiting on the user or on a host function is not running.
// So a program has a core while its time budget counts, whatever the load (many programs sharing the cores would
// each run out of time having done a fraction of their work), and what
// programs allocate at once is what n of them can allocate in their time
// budget.
func WithMaxRunning(n int) Option {
	return func(e *Evaluator) error {
		if n < 1 {
			return fmt.Errorf("max running %d: want at least 1", n)
		}
		e.running = turns.NewTurns(n)
		return nil
	}
}

// DefaultMaxRunning is the cores Go runs on: GOMAXPROCS, and no more than
// the cores when cmd/exprd runs Go on more Ps than cores while busy
// (procs.Cores). A program holds its turn only while it computes (a wait
// on the user or a host function gives it back), so more would only share
// the cores, and hold more working memory at once.
func DefaultMaxRunning() int { return min(runtime.GOMAXPROCS(0), procs.Cores()) }

// withRunningOnCores is the default of WithMaxRunning: as many programs
// as DefaultMaxRunning is when each asks for its turn, so that a process
// whose GOMAXPROCS changes with its load (cmd/exprd's --adapt-procs)
// still gives each running program a core.
func withRunningOnCores() Option {
	return func(e *Evaluator) error {
		e.running = turns.NewTurnsOf(DefaultMaxRunning)
		return nil
	}
}

// Turns is the evaluator's turns to run (WithMaxRunning): give them to a
// CodeMode runtime (codemode.WithTurns) so that its programs and these
// share the cores.
func (e *Evaluator) Turns() *turns.Turns { return e.running }

// New returns an Evaluator.
func New(opts ...Option) (*Evaluator, error) {
	e := &Evaluator{}
	for _, o := range append([]Option{WithCacheSize(DefaultCompileCacheSize), withRunningOnCores()}, opts...) {
		if err := o(e); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// CacheStats returns the compile cache's counters.
func (e *Evaluator) CacheStats() CacheStats { return e.programs.Stats() }

// Host is what a call needs from whoever made it.
type Host interface {
	// Write is told of every write as it happens.
	Write(ctx context.Context, w Write) error
	// Confirm asks the user whether step may run.
	Confirm(ctx context.Context, step int, text string) (bool, error)
	// CallClient runs a client-run function. ctx carries its deadline.
	CallClient(ctx context.Context, name string, args map[string]any) (any, error)
}

// Write is one write a step made.
type Write struct {
	Step      int
	Path      string
	Value     any
	ValueJSON []byte
}

type step struct {
	set     *Path
	confirm string
	program *vm.Program
}

// Run checks a call, then runs its steps on st. It always returns an answer:
// every failure is in it.
func (e *Evaluator) Run(ctx context.Context, t *Tool, st *State, input []byte, h Host) Answer {
	ctx, span := startSpan(ctx, "exprd.evaluator.Run")
	defer span.End()
	steps, read, cerr := e.prepare(ctx, t, input)
	if cerr != nil {
		span.SetAttributes(attribute.String("exprd.reason", string(cerr.Reason)))
		return Answer{Err: cerr}
	}
	ce := e.newCallEnv(ctx, t, h)
	defer e.releaseCallEnv(ce)
	a := e.runSteps(ctx, t, st, h, ce, steps, read)
	a.EvalTime, a.Allocated = ce.m.elapsed(), ce.m.bytes.Used()
	span.SetAttributes(attribute.Int("exprd.steps", len(steps)), attribute.String("exprd.reason", string(a.Reason())))
	return a
}

func (e *Evaluator) runSteps(ctx context.Context, t *Tool, st *State, h Host, ce *callEnv, steps []step, read *vm.Program) Answer {
	m, env := &ce.m, ce.env
	for i, s := range steps {
		if s.confirm != "" {
			ok, err := h.Confirm(ctx, i, s.confirm)
			if err != nil {
				return e.failed(ctx, err, i)
			}
			if !ok {
				return Answer{Declined: true}
			}
		}
		v, err := e.exec(s.program, env, st, m, &t.budgets)
		if err != nil {
			return e.failed(ctx, err, i)
		}
		if s.set == nil {
			continue
		}
		v, err = normalize(v, &t.budgets)
		if err != nil {
			return e.failed(ctx, err, i)
		}
		js, err := marshal(v)
		if err != nil {
			return e.failed(ctx, err, i)
		}
		if err := st.set(*s.set, v, len(js)); err != nil {
			return e.failed(ctx, err, i)
		}
		if err := h.Write(ctx, Write{Step: i, Path: s.set.String(), Value: v, ValueJSON: js}); err != nil {
			return e.failed(ctx, err, i)
		}
	}
	if read == nil {
		return Answer{}
	}
	v, err := e.exec(read, env, st, m, &t.budgets)
	if err == nil {
		v, err = normalize(v, &t.budgets)
	}
	var js []byte
	if err == nil {
		js, err = marshal(v)
	}
	if err == nil && len(js) > t.budgets.MaxReadChars && utf8.RuneCount(js) > t.budgets.MaxReadChars {
		err = budgetError(BudgetRead, "the read value is %d characters of JSON, over the limit of %d: read less, e.g. a slice or some fields", utf8.RuneCount(js), t.budgets.MaxReadChars)
	}
	if err != nil {
		return e.failed(ctx, err, -1)
	}
	return Answer{ValueJSON: js}
}

// exec runs one program on the current state under the call's budgets.
func (e *Evaluator) exec(p *vm.Program, env map[string]any, st *State, m *meter, b *Budgets) (any, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	env["scopes"].(map[string]any)["root"] = st.Snapshot()
	if err := m.resume(); err != nil {
		return nil, err
	}
	out, err := e.vms.Run(p, env, uint(b.MemoryBudget))
	m.pause()
	if err == nil {
		err = m.check()
	}
	return out, err
}

// failed turns a run's error into the answer for step (-1: the read).
func (e *Evaluator) failed(ctx context.Context, err error, step int) Answer {
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ctx.Err())) {
		return Answer{Cancelled: true, Err: errorf(ExpressionRuntime, "the call was cancelled")}
	}
	var out *Error
	var inner *Error
	var fe *file.Error
	switch {
	case errors.As(err, &inner):
		c := *inner
		out = &c
		if errors.As(err, &fe) && fe.Line > 0 && out.Line == 0 {
			out.Message = fmt.Sprintf("%s (line %d, column %d)", out.Message, fe.Line, fe.Column+1)
			out.Line, out.Column = fe.Line, fe.Column+1
		}
	case errors.As(err, &fe) && fe.Message == "memory budget exceeded":
		out = fromFileError(BudgetExceeded, fe)
		out.Budget = BudgetMemory
		out.Message = "over the memory budget: " + out.Message
	case errors.As(err, &fe):
		if msg, ok := exprbound.PanicMessage(err); ok {
			c := *fe
			c.Message = msg
			fe = &c
		}
		out = fromFileError(ExpressionRuntime, fe)
	default:
		out = reasonOf(err)
	}
	out.Step = step
	if step >= 0 {
		out.Message = fmt.Sprintf("step %d: %s", step, out.Message)
	} else {
		out.Message = "read: " + out.Message
	}
	return Answer{Err: out}
}

// prepare checks the whole call before anything runs.
func (e *Evaluator) prepare(ctx context.Context, t *Tool, input []byte) ([]step, *vm.Program, *Error) {
	in, ok := decodeCallFast(input, t.settings.Read, t.budgets.MaxSteps)
	if !ok {
		var err *Error
		if in, err = decodeCall(t, input); err != nil {
			return nil, nil, err
		}
	}
	steps := make([]step, len(in.steps))
	for i, s := range in.steps {
		if s.hasSet {
			p, err := ParsePath(s.set)
			if err != nil {
				return nil, nil, stepError(err.(*Error), i)
			}
			steps[i].set = &p
		}
		steps[i].confirm = s.confirm
		p, cerr := e.compile(ctx, s.expr, t)
		if cerr != nil {
			return nil, nil, stepError(cerr, i)
		}
		steps[i].program = p
	}
	var read *vm.Program
	if in.hasRead {
		p, cerr := e.compile(ctx, in.read, t)
		if cerr != nil {
			cerr.Message = "read: " + cerr.Message
			return nil, nil, cerr
		}
		read = p
	}
	return steps, read, nil
}

// decodeCall is the general path of a call's input: decoded, checked
// against the tool's input schema, and every refusal explained.
func decodeCall(t *Tool, input []byte) (callInput, *Error) {
	v, err := jsonvalue.Decode(input)
	if err != nil {
		return callInput{}, errorf(InvalidEntry, "the input is not valid JSON: %v", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return callInput{}, errorf(InvalidEntry, "the input must be a JSON object with \"steps\", got %s", exprbound.Kind(v))
	}
	if _, has := obj["read"]; has && !t.settings.Read {
		return callInput{}, errorf(InvalidEntry, "read is off for this session: send only \"steps\"")
	}
	if !validInput(v, t.settings.Read, t.budgets.MaxSteps) {
		err := t.input.Validate(v)
		if err == nil {
			err = errors.New("refused") // unreachable while validInput agrees with the schema
		}
		return callInput{}, errorf(InvalidEntry, "the input does not match the tool's schema: %s", schemaMessage(err))
	}
	return callInputOf(obj), nil
}

func stepError(e *Error, i int) *Error {
	c := *e
	c.Step = i
	c.Message = fmt.Sprintf("step %d: %s", i, e.Message)
	return &c
}

// compile returns the program for src, from the cache when it can.
func (e *Evaluator) compile(ctx context.Context, src string, t *Tool) (*vm.Program, *Error) {
	if n := utf8.RuneCountInString(src); n > t.budgets.MaxSourceLength {
		return nil, errorf(GuardrailViolation, "the expression is %d characters, over the limit of %d: split it into steps", n, t.budgets.MaxSourceLength)
	}
	key := programKey{tool: t.key, src: src}
	if p, ok := e.programs.Get(key); ok {
		return p, nil
	}
	_, span := startSpan(ctx, "exprd.evaluator.compile")
	p, err := compileChecked(src, t)
	span.End()
	if err != nil {
		return nil, err
	}
	e.programs.Add(key, p)
	return p, nil
}

// compileChecked compiles src with the sandbox (exprbound.Compile) under
// the tool's policy.
func compileChecked(src string, t *Tool) (*vm.Program, *Error) {
	b := &t.budgets
	p, err := exprbound.Compile(src, envSample(t), exprbound.Limits{
		MaxString: b.MaxStringLength,
		TooLong:   func(msg string) error { return budgetError(BudgetString, "%s", msg) },
		TooCostly: func(msg string) error { return budgetError(BudgetTime, "%s", msg) },
		Normalize: func(v any) (any, error) { return normalize(v, b) },
	}, t.policy(src))
	if err != nil {
		return nil, compileError(err)
	}
	return p, nil
}

// compileError gives a compile failure its reason: the whitelist's own, or
// the stage's (syntax, type; runtime where the optimiser folds 7 % 0).
func compileError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var se *exprbound.StageError
	if !errors.As(err, &se) {
		return errorf(ExpressionRuntime, "%v", err)
	}
	switch se.Stage {
	case exprbound.StageSyntax:
		return exprError(ExpressionSyntax, se.Err)
	case exprbound.StageRuntime:
		return exprError(ExpressionRuntime, se.Err)
	}
	return exprError(ExpressionType, se.Err)
}

func exprError(reason Reason, err error) *Error {
	var fe *file.Error
	if errors.As(err, &fe) {
		return fromFileError(reason, fe)
	}
	return errorf(reason, "%v", err)
}

// hostFunc is the type every host function has in the environment.
type hostFunc = func(arg any) (any, error)

// envSample is the environment's shape at compile time: the state is an
// object of unknown fields, functions take one argument.
func envSample(t *Tool) map[string]any {
	env := map[string]any{
		"scopes":                map[string]any{"root": map[string]any{}},
		tickName:                func() bool { return true },
		exprbound.AllocName:     func(v any) any { return v },
		exprbound.AllocDeepName: func(v any) any { return v },
		exprbound.MeterName:     (*exprbound.Meter)(nil),
	}
	for name := range t.funcs {
		env[name] = hostFunc(nil)
	}
	return env
}

// callEnv is a call's environment: the counter and the functions bound to
// the call, and scopes, whose root is set before each step. Envs are pooled:
// a call's env is only the VM's while the call runs, and the whitelist keeps
// scopes from becoming a value.
type callEnv struct {
	m         meter
	alarm     exprbound.Alarm
	tick      func() bool // m.tick, bound once
	alloc     func(any) any
	allocDeep func(any) any
	reserve   func(n int64) error
	overAlloc func(used, max int64) error
	mem       *membudget.Reservation // what the call's programs built past the allowance; nil: none yet
	ctx       context.Context        // the call's, for the reservation's holder
	env       map[string]any
	scopes    map[string]any
}

func (e *Evaluator) newCallEnv(ctx context.Context, t *Tool, h Host) *callEnv {
	ce, ok := e.envs.Get().(*callEnv)
	if !ok {
		ce = &callEnv{env: map[string]any{}, scopes: map[string]any{}}
		ce.tick = ce.m.tick
		ce.alloc = ce.m.bytes.Alloc
		ce.allocDeep = ce.m.bytes.AllocDeep
		ce.overAlloc = overAlloc
		ce.reserve = func(n int64) error {
			if ce.mem == nil {
				// The RPC's holder (an overload manager's call) is told.
				ce.mem = e.memory.EmptyFor(ce.ctx, "a call's values")
			}
			if err := ce.mem.TryResize(n); err != nil {
				return budgetError(BudgetMemory, "the server's memory budget cannot hold what this call builds now: build less, or retry later")
			}
			return nil
		}
	}
	now, cpu := clockOf(t.now)
	ce.m = meter{ctx: ctx, max: t.budgets.MaxIterations, timeout: t.budgets.Timeout, now: now, cpu: cpu, running: e.running, caller: membudget.CallerOf(ctx),
		alarm: &ce.alarm, maxCalls: t.budgets.MaxFunctionCalls,
		bytes: exprbound.Meter{Max: int64(t.budgets.MaxAllocBytes), Over: ce.overAlloc}}
	if e.memory != nil {
		ce.m.bytes.Reserve = ce.reserve
	}
	ce.ctx = ctx
	ce.alarm.Watch(ctx)
	ce.env[tickName] = ce.tick
	ce.env[exprbound.AllocName] = ce.alloc
	ce.env[exprbound.AllocDeepName] = ce.allocDeep
	ce.env[exprbound.MeterName] = &ce.m.bytes
	ce.env["scopes"] = ce.scopes
	for name, f := range t.funcs {
		ce.env[name] = bind(ctx, f, t, &ce.m, h)
	}
	return ce
}

// releaseCallEnv drops what the call held (its state, host, context) and
// pools the env.
func (e *Evaluator) releaseCallEnv(ce *callEnv) {
	clear(ce.env)
	clear(ce.scopes)
	ce.alarm.Release()
	ce.mem.Close()
	ce.mem, ce.ctx = nil, nil
	ce.m = meter{}
	e.envs.Put(ce)
}

// overAlloc is the error of a call whose programs built more than its
// byte budget.
func overAlloc(used, max int64) error {
	return budgetError(BudgetAlloc, "the call's programs built %d bytes, over the limit of %d bytes (strings, arrays and maps, and the answers of functions): build less, e.g. map over fewer items or keep shorter strings", used, max)
}

// bind makes a host function callable from expr: it checks the argument
// against the input schema, pauses the time budget while the function runs,
// and checks the result against the output schema.
func bind(ctx context.Context, f *function, t *Tool, m *meter, h Host) hostFunc {
	return func(arg any) (any, error) {
		a, err := normalize(arg, &t.budgets)
		if err != nil {
			return nil, errorf(InvalidArguments, "%s: the argument is not JSON: %s", f.Name, reasonOf(err).Message)
		}
		args, ok := a.(map[string]any)
		if !ok {
			return nil, errorf(InvalidArguments, "%s takes one object argument, got %s", f.Name, exprbound.Kind(a))
		}
		if err := f.input.Validate(args); err != nil {
			return nil, errorf(InvalidArguments, "%s: %s", f.Name, schemaMessage(err))
		}
		if m.calls++; m.calls > m.maxCalls {
			return nil, budgetError(BudgetCalls, "over the limit of %d host-function calls in one call: call %s fewer times, e.g. once with more in its argument", m.maxCalls, f.Name)
		}
		m.pause()
		// Running again may wait for its turn; a call cancelled meanwhile
		// stops at the program's next check.
		defer func() { _ = m.resume() }()
		fctx, cancel := context.WithTimeout(ctx, t.budgets.FunctionTimeout)
		defer cancel()
		var res any
		if f.Runner == RunServer {
			res, err = callImpl(fctx, f.Impl, args)
		} else {
			res, err = h.CallClient(fctx, f.Name, args)
		}
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case fctx.Err() != nil:
			return nil, errorf(HostFunction, "%s timed out after %v", f.Name, t.budgets.FunctionTimeout)
		case err != nil:
			return nil, errorf(HostFunction, "%s failed: %v", f.Name, err)
		}
		res, size, err := normalizeSized(res, &t.budgets)
		if err != nil {
			return nil, errorf(HostFunction, "%s returned a value that is not JSON: %s", f.Name, reasonOf(err).Message)
		}
		if err := m.charge(answerFactor * int64(size)); err != nil {
			return nil, err
		}
		if f.output != nil {
			if err := f.output.Validate(res); err != nil {
				return nil, errorf(HostFunction, "%s returned a value its output schema refuses: %s", f.Name, schemaMessage(err))
			}
		}
		return res, nil
	}
}

// callImpl runs a server function, turning its panic into its error: the
// function's fault, not the expression's, and never the process's.
func callImpl(ctx context.Context, impl Func, args map[string]any) (res any, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, fmt.Errorf("it panicked: %v", r)
		}
	}()
	return impl(ctx, args)
}

// marshal renders a normalised value as JSON.
func marshal(v any) ([]byte, error) { return appendJSON(make([]byte, 0, 128), v), nil }
