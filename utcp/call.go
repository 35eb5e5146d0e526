package utcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/exprd/exprd/membudget"
	"github.com/exprd/exprd/utcp/manual"
	"github.com/exprd/exprd/utcp/vars"
)

// Call runs a tool by its full name. The arguments are checked against the
// tool's input schema first (*manual.InvalidArgumentsError, nothing sent). The
// deadline in force is the smallest of ctx's and the template's timeout
// (default WithTimeout); when it passes the error is a *TimeoutError, and
// cancelling ctx cancels the provider's request.
func (r *Registry) Call(ctx context.Context, name string, args map[string]any) (_ any, err error) {
	e, err := r.lookup(name)
	if err != nil {
		return nil, err
	}
	if r.observe != nil {
		var end func(error)
		ctx, end = r.observe(ctx, e.tool.Name)
		defer func() { end(err) }()
	}
	args, tr, err := r.prepareCall(e, name, args)
	if err != nil {
		return nil, err
	}
	timeout := r.timeoutOf(e)
	cctx, cancel := withDeadline(ctx, timeout)
	defer cancel()
	// What the call reads of its answer is reserved from the memory
	// budget as it reads, and given back once the value is returned.
	mem := r.cfg.memory.Empty(e.answer)
	defer mem.Release()
	v, err := tr.Call(withCallMemory(cctx, mem), e.tool, args)
	if err != nil {
		return nil, r.logged(ctx, e, callError(ctx, cctx, e.tool.Name, timeout, err))
	}
	return v, nil
}

// logged logs a failed call's whole story for the operator (the provider's
// body, the address a name resolved to, a lower-level error: what the
// caller is never shown), the values bound to the tool's manual replaced
// (a URL with an API key in its query), and returns err.
func (r *Registry) logged(ctx context.Context, e *toolEntry, err error) error {
	var te *TransportError
	if r.cfg.logger != nil && errors.As(err, &te) && te.cause != nil {
		r.cfg.logger.WarnContext(ctx, "utcp: tool call failed", "tool", te.Tool, "reason", string(te.Reason), "status", te.Status,
			"cause", e.env.Conceal(te.cause.Error()))
	}
	return err
}

// CallStream runs a tool and returns its chunks as they arrive. The deadline
// (as for Call) covers the whole stream; Close the stream when done with it
// early.
func (r *Registry) CallStream(ctx context.Context, name string, args map[string]any) (Stream, error) {
	e, err := r.lookup(name)
	if err != nil {
		return nil, err
	}
	var end func(error)
	if r.observe != nil {
		ctx, end = r.observe(ctx, e.tool.Name)
	}
	args, tr, err := r.prepareCall(e, name, args)
	if err != nil {
		if end != nil {
			end(err)
		}
		return nil, err
	}
	timeout := r.timeoutOf(e)
	cctx, cancel := withDeadline(ctx, timeout)
	// What the stream reads whole (a non-streamed answer) is reserved as
	// for Call, until the stream ends.
	mem := r.cfg.memory.Empty(e.answer)
	cctx = withCallMemory(cctx, mem)
	st, err := tr.Stream(cctx, e.tool, args)
	if err != nil {
		cancel()
		mem.Release()
		err = r.logged(ctx, e, callError(ctx, cctx, e.tool.Name, timeout, err))
		if end != nil {
			end(err)
		}
		return nil, err
	}
	return &callStream{s: st, parent: ctx, ctx: cctx, cancel: cancel, mem: mem, tool: e.tool.Name, timeout: timeout, end: end}, nil
}

// withDeadline bounds ctx by timeout, reusing ctx when its own deadline is
// already the sooner.
func withDeadline(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= timeout {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, timeout)
}

func (r *Registry) timeoutOf(e *toolEntry) time.Duration {
	if d := e.tool.Template.Timeout; d > 0 {
		return d
	}
	return r.cfg.timeout
}

// prepareCall checks a call's arguments (name as the caller wrote it) and
// returns them as JSON, with the tool's transport.
func (r *Registry) prepareCall(e *toolEntry, name string, args map[string]any) (map[string]any, Transport, error) {
	args, err := manual.JSONArgs(name, args)
	if err != nil {
		return nil, nil, err
	}
	if err := e.tool.ValidateArgs(args); err != nil {
		return nil, nil, err
	}
	tr, err := r.transportFor(e)
	if err != nil {
		return nil, nil, err
	}
	return args, tr, nil
}

// transportFor resolves the tool's template (variables are read on every
// call: vars.Resolver.SubstituteTemplate) and returns its transport,
// rebuilt only when the resolved template changed.
func (r *Registry) transportFor(e *toolEntry) (Transport, error) {
	if e.static != nil {
		return e.static, nil
	}
	resolved, err := r.variables.SubstituteTemplate(e.tool.Template.Fields(), e.tool.ManualName())
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(resolved)
	if err != nil {
		return nil, &manual.Error{Manual: e.tool.ManualName(), Path: "tool_call_template", Msg: err.Error()}
	}
	if b := e.last.Load(); b != nil && bytes.Equal(b.raw, raw) {
		return b.t, nil
	}
	f := r.factories[e.tool.Template.Type]
	if f == nil {
		return nil, &TransportError{Tool: e.tool.Name, Reason: ReasonUnsupportedType}
	}
	t, err := f(raw, e.env)
	if err != nil {
		return nil, prefixWithManual(manual.ErrorAt(err, "tool_call_template"), e.tool.ManualName())
	}
	e.last.Store(&builtTransport{raw: raw, t: t})
	return t, nil
}

// ReasonFailed is a transport's own error that is none of ours.
const ReasonFailed Reason = "failed"

// callError maps a transport's error: the call's deadline becomes a
// *TimeoutError, the caller's cancellation stays the caller's context error,
// and a foreign error is wrapped so its text stays out of the message.
func callError(parent, cctx context.Context, tool string, timeout time.Duration, err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || cctx.Err() != nil {
		switch {
		case parent.Err() == context.Canceled:
			return fmt.Errorf("tool %q: %w", tool, context.Canceled)
		case parent.Err() == context.DeadlineExceeded:
			return &TimeoutError{Tool: tool}
		case cctx.Err() == context.DeadlineExceeded:
			return &TimeoutError{Tool: tool, Timeout: timeout}
		}
	}
	var (
		te *TransportError
		ia *manual.InvalidArgumentsError
		to *TimeoutError
		me *manual.Error
		vn *vars.NotFoundError
		nf *NotFoundError
	)
	switch {
	case errors.As(err, &te):
		if te.Tool == "" {
			te.Tool = tool
		}
		return te
	case errors.As(err, &ia), errors.As(err, &to), errors.As(err, &me), errors.As(err, &vn), errors.As(err, &nf):
		return err
	}
	return &TransportError{Tool: tool, Reason: ReasonFailed, cause: err}
}

// callStream ties a transport's stream to the call's deadline.
type callStream struct {
	s       Stream
	parent  context.Context
	ctx     context.Context
	cancel  context.CancelFunc
	mem     *membudget.Reservation
	tool    string
	timeout time.Duration
	done    bool
	end     func(error) // the observer's, until called
}

func (c *callStream) Next() (any, error) {
	if c.done {
		return nil, io.EOF
	}
	v, err := c.s.Next()
	if err == nil {
		return v, nil
	}
	c.done = true
	c.s.Close()
	c.cancel()
	c.mem.Release()
	if err == io.EOF {
		c.ended(nil)
		return nil, io.EOF
	}
	err = callError(c.parent, c.ctx, c.tool, c.timeout, err)
	c.ended(err)
	return nil, err
}

func (c *callStream) Close() error {
	c.done = true
	err := c.s.Close()
	c.cancel()
	c.mem.Release()
	c.ended(nil)
	return err
}

// ended tells the observer, once, that the stream is over.
func (c *callStream) ended(err error) {
	if c.end != nil {
		c.end(err)
		c.end = nil
	}
}
