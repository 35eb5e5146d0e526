package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"runtime"
	"time"

	"github.com/exprd/exprd/internal/exprbound"
	"github.com/exprd/exprd/internal/turns"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/manual"
)

// Outcome is how a tool call ended.
type Outcome string

// The outcomes of a tool call.
const (
	OutcomeOK        Outcome = "ok"
	OutcomeError     Outcome = "error"
	OutcomeRejected  Outcome = "rejected"
	OutcomeCancelled Outcome = "cancelled"
	OutcomeTimeout   Outcome = "timeout"
)

// Call is one tool call of a run, as the trace and events report it.
type Call struct {
	Tool     string
	Args     map[string]any
	Stream   bool
	Duration time.Duration
	// Outcome is empty in a start event.
	Outcome Outcome
	// Error is the failure, summarised, when Outcome is not ok.
	Error string
	// Chunks counts a stream's chunks.
	Chunks int
}

// ArgsJSON renders the arguments.
func (c Call) ArgsJSON() json.RawMessage {
	b, _ := json.Marshal(c.Args)
	return b
}

// EventKind says what an Event reports.
type EventKind int

// The kinds of Event.
const (
	EventToolStart EventKind = iota + 1
	EventToolEnd
	EventChunk
)

// Event is one step of a run, for a client watching it.
type Event struct {
	Kind EventKind
	// Call is the call starting or ending (or streaming, for a chunk).
	Call Call
	// Chunk is a stream's chunk, for EventChunk.
	Chunk any
}

// run is one run's state; only the run's goroutine (the VM's) touches it.
type run struct {
	ctx, parent context.Context
	toolCtx     context.Context // ctx with the tool calls' response limit
	reg         Registry
	opts        *RunOptions
	b           *Budgets
	allowed     toolSet
	approval    toolSet
	calls       int
	iterations  int
	trace       []Call
	alarm       exprbound.Alarm // rings when ctx ends
	bytes       exprbound.Meter // what the run built and its tools returned
	turns       Turns           // nil: none to take
	caller      string          // whose turn it takes
	since       time.Time       // when it last took its turn; zero: it holds none
}

// resume takes a turn to compute (RunOptions' runtime's WithTurns), or
// fails when the run's context ends first.
func (r *run) resume() error {
	if r.turns == nil {
		return nil
	}
	if err := r.turns.Acquire(r.ctx, r.caller); err != nil {
		return err
	}
	r.since = time.Now()
	r.alarm.Arm(TurnSlice) // a costly iteration does not hold it 1,024 times over
	return nil
}

// pause gives the run's turn back, while a tool call runs or once the
// program has ended.
func (r *run) pause() {
	if r.turns == nil || r.since.IsZero() {
		return
	}
	r.alarm.Disarm()
	r.turns.Release(r.caller, time.Since(r.since))
	r.since = time.Time{}
}

// tick counts one iteration. It panics with an error, which the VM
// recovers and returns, to stop a run that cannot otherwise be interrupted.
func (r *run) tick() bool {
	r.iterations++
	if r.iterations > r.b.MaxIterations {
		panic(budgetError(BudgetIterations, "over the limit of %d iterations: map, filter and the other predicates ran too often", r.b.MaxIterations))
	}
	if r.alarm.Rung() || r.iterations%exprbound.TickCheckEvery == 0 {
		if err := r.ctx.Err(); err != nil {
			panic(err)
		}
		r.alarm.Quiet(r.ctx)
		if r.turns != nil && time.Since(r.since) >= TurnSlice {
			// Its slice is over: the core to the goroutines waiting
			// for it first, then the turn to whoever waits (as
			// turns.Yield), and take the turn back in turn.
			runtime.Gosched()
			r.pause()
			if err := r.resume(); err != nil {
				panic(err)
			}
		}
	}
	return true
}

// TurnSlice is how long a run's program computes on one turn
// (WithTurns) before it gives it to those that wait and waits its turn
// again: a run's time budget is seconds, and a program holding a turn for
// its whole budget would keep every other caller's from a core that long.
// ExprTool's programs take the same slices.
const TurnSlice = turns.Slice

func (r *run) emit(kind EventKind, c Call, chunk any) {
	if r.opts.OnEvent != nil {
		r.opts.OnEvent(Event{Kind: kind, Call: c, Chunk: chunk})
	}
}

func (r *run) callTool(p ...any) any       { return must(r.call(false, p)) }
func (r *run) callToolStream(p ...any) any { return must(r.call(true, p)) }

// call is codemode.CallTool and CallToolStream: the whitelist, the call
// budget, approval, then the registry under the run's context.
func (r *run) call(stream bool, p []any) (any, error) {
	fn := "codemode." + fnCallTool
	if stream {
		fn = "codemode." + fnCallToolStrm
	}
	if len(p) != 2 {
		return nil, errorf(ExpressionType, "%s takes (name, args)", fn)
	}
	name, ok := p[0].(string)
	if !ok {
		return nil, errorf(InvalidArguments, "%s: the tool name is %s, not a string", fn, exprbound.Kind(p[0]))
	}
	if !r.allowed.has(name) {
		e := errorf(UnknownReference, "tool %q is not allowed here: the run may call %s", name, listNames(r.allowed))
		e.Tool = name
		return nil, e
	}
	if err := r.ctx.Err(); err != nil {
		return nil, err
	}
	r.calls++
	if r.calls > r.b.MaxToolCalls {
		e := budgetError(BudgetToolCalls, "over the limit of %d tool calls", r.b.MaxToolCalls)
		e.Tool = name
		return nil, e
	}
	raw := p[1]
	if raw == nil {
		raw = map[string]any{}
	}
	a, err := jsonValue(raw, r.b.MaxResultBytes)
	if err != nil {
		return nil, toolError(name, err)
	}
	args, ok := a.(map[string]any)
	if !ok {
		e := errorf(InvalidArguments, "%s(%q, args): args must be an object, got %s", fn, name, exprbound.Kind(a))
		e.Tool = name
		return nil, e
	}
	c := Call{Tool: name, Args: args, Stream: stream}
	r.pause()
	r.emit(EventToolStart, c, nil)
	start := time.Now()
	var v any
	if r.approval.has(name) {
		err = r.approve(name, args)
	}
	if err == nil {
		if stream {
			v, c.Chunks, err = r.stream(c)
		} else {
			v, err = r.reg.Call(r.toolCtx, name, args)
			if err == nil {
				var size int
				if v, size, err = jsonValueSized(v, r.b.MaxResultBytes); err == nil {
					err = r.bytes.Charge(resultFactor * int64(size))
				}
			}
		}
	}
	c.Duration = time.Since(start)
	c.Outcome = OutcomeOK
	if err != nil {
		err = r.callFailed(&c, err)
	}
	r.trace = append(r.trace, c)
	r.emit(EventToolEnd, c, nil)
	if rerr := r.resume(); rerr != nil && err == nil {
		err = rerr // the run ends: its context did
	}
	return v, err
}

// ErrRejected marks a call the approver refused. RunOptions.Approve may
// return an error wrapping it to reject a call with a reason: the error's
// text is what the program and the trace are told
// (fmt.Errorf("%w: nobody is left to ask", ErrRejected)).
var ErrRejected = errors.New("the call was rejected")

func (r *run) approve(name string, args map[string]any) error {
	if r.opts.Approve == nil {
		return ErrRejected
	}
	ok, err := r.opts.Approve(r.ctx, name, args)
	switch {
	case err != nil:
		return err
	case !ok:
		return ErrRejected
	}
	return nil
}

// callFailed sets c's outcome and returns the error the program sees: the
// run's own context error when the run is ending (so it ends as cancelled
// or timed out), else a host-function error naming the tool.
func (r *run) callFailed(c *Call, err error) error {
	err = r.unseen(err)
	switch {
	case r.ctx.Err() != nil:
		c.Outcome, c.Error = OutcomeCancelled, "the run was cancelled"
		if !errors.Is(r.parent.Err(), context.Canceled) {
			c.Outcome, c.Error = OutcomeTimeout, "the run's time budget ran out"
		}
		return r.ctx.Err()
	case errors.Is(err, ErrRejected):
		c.Outcome, c.Error = OutcomeRejected, err.Error()
		e := errorf(HostFunction, "tool %q: %s", c.Tool, err.Error())
		e.Tool, e.cause = c.Tool, err
		return e
	case errors.Is(err, utcp.ErrTimeout):
		c.Outcome = OutcomeTimeout
	default:
		c.Outcome = OutcomeError
	}
	e := toolError(c.Tool, err)
	c.Error = e.Message
	return e
}

// unseen keeps out of an unknown tool's error the similar names the
// caller does not see (RunOptions.Visible).
func (r *run) unseen(err error) error {
	var nf *utcp.NotFoundError
	if r.opts.Visible == nil || !errors.As(err, &nf) {
		return err
	}
	c := *nf
	c.Similar = nil
	for _, s := range nf.Similar {
		if r.opts.Visible(s) {
			c.Similar = append(c.Similar, s)
		}
	}
	return &c
}

// toolError is a tool's failure as the program sees it: host-function
// (budget errors keep their reason), carrying the tool's name. utcp's
// errors carry no lower-level text, so their message is safe to show.
func toolError(name string, err error) *Error {
	var inner *Error
	if errors.As(err, &inner) {
		c := *inner
		c.Tool = name
		c.Message = "tool " + `"` + name + `": ` + inner.Message
		return &c
	}
	e := errorf(HostFunction, "tool %q failed: %v", name, err)
	if errors.Is(err, manual.ErrInvalidArguments) {
		e.Reason = InvalidArguments
	}
	e.Tool, e.cause = name, err
	return e
}

// toolCtx is the run's context for its tool calls, made once a run: a provider's answer is
// read only up to what the result budget could take (utcp's response
// limit), with room for the whitespace a provider may indent its JSON
// with. A 5 MiB answer to a 1 MiB budget stops at 2 MiB, not at the
// registry's 8 MiB.
func toolCtx(ctx context.Context, b *Budgets) context.Context {
	return utcp.WithResponseLimit(ctx, 2*int64(b.MaxResultBytes)+1024)
}

// stream collects a stream's chunks, reporting each as it arrives. A
// stream that ends with an error is the tool's error, never a clean end.
func (r *run) stream(c Call) (any, int, error) {
	st, err := r.reg.CallStream(r.toolCtx, c.Tool, c.Args)
	if err != nil {
		return nil, 0, err
	}
	defer st.Close()
	n := exprbound.Normalizer{Limits: exprbound.ValueLimits{MaxBytes: r.b.MaxResultBytes}}
	chunks := []any{}
	for {
		chunk, err := st.Next()
		if errors.Is(err, io.EOF) {
			return chunks, len(chunks), nil
		}
		if err != nil {
			return nil, len(chunks), err
		}
		before := n.Size()
		if chunk, err = normalize(&n, chunk); err != nil {
			return nil, len(chunks), err
		}
		if err := r.bytes.Charge(resultFactor * int64(n.Size()-before)); err != nil {
			return nil, len(chunks), err
		}
		chunks = append(chunks, chunk)
		if r.opts.OnChunk != nil {
			r.opts.OnChunk(c.Tool, chunk)
		}
		r.emit(EventChunk, c, chunk)
	}
}
