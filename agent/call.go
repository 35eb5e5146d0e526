package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/exprd/exprd/model"
)

// errToolTimeout is the cause of a call's context when its own timeout passed.
var errToolTimeout = errors.New("the tool timed out")

// noArguments is what a call the model gave no arguments runs with.
const noArguments = `{}`

func isEmpty(args string) bool { return strings.TrimSpace(args) == "" }

// stepRun is what a step's calls share: the step, its active tools, the
// calls that are not run and why, and the missing-tool messages made so
// far.
type stepRun struct {
	index  int
	active map[string]*compiledTool
	// refused[j], when set, is the error result of call j, which does not
	// run (no hook is asked): the reply was cut at its length limit, or
	// it made more calls than a step runs.
	refused []string
	// resumed, when set, is what the calls of a step that was under way
	// when its turn stopped go on from (a takeover).
	resumed *resumed

	mu      sync.Mutex
	missing map[string]string // the message of each missing tool's name, made once a step
}

func (s *stepRun) refusal(j int) string {
	if j < len(s.refused) {
		return s.refused[j]
	}
	return ""
}

// runCalls runs a step's tool calls at once, at most Parallelism at a time,
// and returns their results and the calls as they ran (a PreToolCall hook
// may have replaced one), in call order. Its error (a hook's) fails the
// turn; every other failure is a result.
func (l *loop) runCalls(ctx context.Context, s *stepRun, raw []model.ToolCall, calls []ToolCall) ([]Result, []ToolCall, error) {
	if f := l.cfg.Events.ToolCallRequested; f != nil && s.resumed == nil { // a resumed step's were told
		for _, c := range calls {
			f(s.index, c)
		}
	}
	results := make([]Result, len(calls))
	ran := slices.Clone(calls)
	if len(calls) == 1 {
		r, err := l.runCall(ctx, s, s.refusal(0), raw[0].ArgumentsErr, &ran[0])
		results[0] = r
		return results, ran, err
	}
	// A hook's error ends the turn: the first cancels the others. A panic
	// (a hook's, an event's) is the turn's error, not the process's end.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(l.cfg.Parallelism)
	for j := range calls {
		g.Go(func() (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("the call of tool %q panicked: %v\n%s", calls[j].Name, p, debug.Stack())
				}
			}()
			if gctx.Err() != nil {
				results[j] = ErrorResult(fmt.Sprintf("tool %s was cancelled before it ran", quoteName(calls[j].Name)))
				return nil
			}
			results[j], err = l.runCall(gctx, s, s.refusal(j), raw[j].ArgumentsErr, &ran[j])
			return err
		})
	}
	err := g.Wait()
	return results, ran, err
}

// runCall takes one call through hooks, checks, approval and its executor;
// *call ends as the call ran.
func (l *loop) runCall(ctx context.Context, s *stepRun, refused string, argsErr error, call *ToolCall) (Result, error) {
	if rs := s.resumed; rs != nil {
		if r, ok := rs.recorded[call.ID]; ok {
			return r, nil // its result was recorded (and told) before the turn stopped
		}
		if refused == "" && rs.interrupted[call.ID] {
			refused = Interrupted
		}
	}
	r, post, err := l.resolve(ctx, s, refused, argsErr, call)
	if err != nil {
		return Result{}, err
	}
	if post {
		if h := l.cfg.Hooks.PostToolCall; h != nil {
			if r, err = h(ctx, s.index, *call, r); err != nil {
				return Result{}, &HookError{Hook: HookPostToolCall, Step: s.index, CallID: call.ID, Err: err}
			}
			r = normalize(r)
		}
	}
	if f := l.cfg.Events.ToolResult; f != nil {
		f(s.index, *call, r)
	}
	return r, nil
}

// resolve returns a call's result and whether PostToolCall may see it.
func (l *loop) resolve(ctx context.Context, s *stepRun, refused string, argsErr error, call *ToolCall) (Result, bool, error) {
	step := s.index
	if isEmpty(string(call.Arguments)) {
		call.Arguments = json.RawMessage(noArguments) // as the model package reads no arguments
	}
	if refused != "" {
		return ErrorResult(refused), false, nil
	}
	if h := l.cfg.Hooks.PreToolCall; h != nil {
		pre, err := h(ctx, step, *call)
		if err != nil {
			return Result{}, false, &HookError{Hook: HookPreToolCall, Step: step, CallID: call.ID, Err: err}
		}
		if pre.Call.ID != "" || pre.Call.Name != "" {
			if pre.Call.ID != call.ID {
				return Result{}, false, &HookError{Hook: HookPreToolCall, Step: step, CallID: call.ID,
					Err: fmt.Errorf("%w: %q", ErrCallIDMismatch, pre.Call.ID)}
			}
			if !slices.Equal(pre.Call.Arguments, call.Arguments) {
				argsErr = nil // checked again below
			}
			*call = pre.Call
		}
		if pre.Result != nil {
			return normalize(*pre.Result), false, nil
		}
	}
	t := s.active[call.Name]
	if t == nil {
		return ErrorResult(l.missingTool(s, call.Name)), false, nil
	}
	if argsErr != nil {
		return ErrorResult(argsErr.Error()), false, nil
	}
	if err := t.checkArguments(call.Arguments); err != nil {
		return ErrorResult(err.Error()), false, nil
	}
	if t.Exec == nil {
		return ErrorResult(fmt.Sprintf("tool %q only describes itself: it has no executor", call.Name)), false, nil
	}
	if t.NeedsApproval {
		ok, reason, err := l.cfg.Approve(ctx, step, *call)
		if err != nil {
			return Result{}, false, &HookError{Hook: HookApproval, Step: step, CallID: call.ID, Err: err}
		}
		if !ok {
			msg := "the call was denied"
			if reason != "" {
				msg += ": " + reason
			}
			return ErrorResult(msg), false, nil
		}
	}
	if f := l.cfg.Events.CallExecuting; f != nil {
		f(step, *call)
	}
	return l.execute(ctx, step, t, *call), true, nil
}

// callKey is the context key of CallStep and CallID.
type callKey struct{}

// running is the call an Executor's context says it runs.
type running struct {
	step int
	id   string
}

// CallStep returns the index of the step whose tool call an Executor is
// running, from the context the Executor was given.
func CallStep(ctx context.Context) (int, bool) {
	r, ok := ctx.Value(callKey{}).(running)
	return r.step, ok
}

// CallID returns the id of the tool call an Executor is running, from the
// context the Executor was given ("" outside one).
func CallID(ctx context.Context) string {
	r, _ := ctx.Value(callKey{}).(running)
	return r.id
}

// execute runs the executor under the tool's timeout. A call past its
// timeout is answered at once; its executor, its context cancelled, is
// left to return on its own, and Run waits for it (executors).
func (l *loop) execute(ctx context.Context, step int, t *compiledTool, call ToolCall) Result {
	cctx, cancel := context.WithTimeoutCause(context.WithValue(ctx, callKey{}, running{step: step, id: call.ID}), t.timeout, errToolTimeout)
	defer cancel()
	type outcome struct {
		r   Result
		err error
	}
	done := make(chan outcome, 1)
	l.executors.Go(func() {
		defer func() {
			if p := recover(); p != nil {
				done <- outcome{err: fmt.Errorf("the tool panicked: %v", p)}
			}
		}()
		r, err := t.Exec.Execute(cctx, call)
		done <- outcome{r, err}
	})
	var o outcome
	select {
	case o = <-done:
	case <-cctx.Done():
		o.err = cctx.Err()
	}
	if cctx.Err() != nil {
		switch {
		case context.Cause(cctx) == errToolTimeout:
			return ErrorResult(fmt.Sprintf("tool %q timed out after %s", call.Name, t.timeout))
		case context.Cause(ctx) == ErrStepTimeout:
			return ErrorResult(fmt.Sprintf("tool %q was stopped: the step outlived %s", call.Name, l.cfg.StepTimeout))
		case o.err == nil && ctx.Err() == nil:
		default:
			return ErrorResult(fmt.Sprintf("tool %q was cancelled", call.Name))
		}
	}
	if o.err != nil {
		return ErrorResult(o.err.Error())
	}
	return normalize(o.r)
}

// normalize makes a result's content JSON: empty is {} (or an error with
// no message), and content that is not JSON is an error result.
func normalize(r Result) Result {
	switch {
	case len(r.Content) == 0 && r.IsError:
		return ErrorResult("the tool failed")
	case len(r.Content) == 0:
		r.Content = json.RawMessage(`{}`)
	case !json.Valid(r.Content):
		return ErrorResult("the tool answered with content that is not JSON")
	}
	return r
}

// missingTool is the message of a call of a tool the step does not have,
// made once a step for each name.
func (l *loop) missingTool(s *stepRun, name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if msg, ok := s.missing[name]; ok {
		return msg
	}
	var names []string
	for _, n := range l.names {
		if s.active[n] != nil {
			names = append(names, n)
		}
	}
	msg := missingToolMessage(name, names)
	if s.missing == nil {
		s.missing = map[string]string{}
	}
	s.missing[name] = msg
	return msg
}
