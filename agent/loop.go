package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/exprd/exprd/model"
)

// Step is one model call and the tool calls it asked for.
type Step struct {
	Index int
	// Text is the model's text in the step.
	Text string
	// ToolCalls are the calls as the model made them; Results holds their
	// results, in the same order. The history the next step sends holds
	// each call as it ran: with a PreToolCall hook's replacement.
	ToolCalls    []ToolCall
	Results      []Result
	FinishReason model.FinishReason
	Usage        model.Usage
}

// StopReason is why a turn ended.
type StopReason string

// The reasons a turn ends.
const (
	// StopCompleted: the model answered without a tool call.
	StopCompleted StopReason = "completed"
	// StopConditionMet: Config.Stop matched after a step.
	StopConditionMet StopReason = "stop-condition"
	// StopCancelled: the caller's context ended (abort); Run returns its error.
	StopCancelled StopReason = "cancelled"
	// StopTurnTimeout: Config.TurnTimeout passed; Run returns ErrTurnTimeout.
	StopTurnTimeout StopReason = "turn-timeout"
	// StopStepTimeout: a step's model call outlived Config.StepTimeout; Run
	// returns ErrStepTimeout.
	StopStepTimeout StopReason = "step-timeout"
	// StopHistoryLimit: the history would be over Config.MaxHistoryBytes,
	// or its memory could not be reserved; Run returns a *HistoryError.
	StopHistoryLimit StopReason = "history-limit"
	// StopError: the model request or a hook failed; Run returns the error.
	StopError StopReason = "error"
)

// Outcome is what a turn did. Run returns the steps finished so far with
// its error too.
type Outcome struct {
	// Text is the last step's text.
	Text       string
	Steps      []Step
	Usage      model.Usage
	StopReason StopReason
}

// Run runs a turn: each step calls the model, runs the tool calls it asked
// for and sends their results back, until the model answers without a tool
// call or cfg.Stop matches. See the package doc for the contract.
//
// Run returns only once every Executor it started has returned. A call
// past its timeout is answered at once and its Executor's context is
// cancelled, but an Executor that does not return when its context ends
// delays the end of the turn by as long as it keeps running.
func Run(ctx context.Context, cfg Config) (Outcome, error) {
	t, err := newTurn(cfg)
	if err != nil {
		reason := StopError
		if errors.Is(err, ErrHistoryTooLarge) {
			reason = StopHistoryLimit
		}
		return Outcome{StopReason: reason}, err
	}
	l := &loop{turn: t, parent: ctx, messages: slices.Clone(cfg.Messages), history: t.history}
	if cfg.Resume != nil {
		if err := l.resumeFrom(cfg.Resume); err != nil {
			return Outcome{StopReason: StopError}, err
		}
	}
	defer l.executors.Wait()
	var cancel context.CancelFunc
	l.ctx, cancel = context.WithTimeoutCause(ctx, t.cfg.TurnTimeout, ErrTurnTimeout)
	defer cancel()
	if err := l.reserve(l.ctx, 0, l.history.total()); err != nil {
		return l.fail(err)
	}
	return l.run()
}

type loop struct {
	*turn
	parent   context.Context // the caller's
	ctx      context.Context // the turn's: parent + TurnTimeout
	messages []model.Message
	// history is the size of what the next request carries (without a
	// PrepareStep hook's messages), reserved the largest size
	// ReserveHistory held.
	history  historyBytes
	reserved int64
	out      Outcome
	// first is the first step this Run makes (Resume's finished steps
	// are before it); reply, the model's answer it resumes that step with.
	first int
	reply *Reply
	// executors are the goroutines running Executors (execute).
	executors sync.WaitGroup
}

func (l *loop) run() (Outcome, error) {
	for i := l.first; ; i++ {
		step, err := l.step(i)
		if err != nil {
			return l.fail(err)
		}
		l.out.Steps = append(l.out.Steps, step)
		l.out.Text = step.Text
		l.out.Usage = addUsage(l.out.Usage, step.Usage)
		if f := l.cfg.Events.StepFinished; f != nil {
			f(step)
		}
		switch {
		case len(step.ToolCalls) == 0:
			l.out.StopReason = StopCompleted
			return l.out, nil
		case l.stop.Stop(l.out.Steps), len(l.out.Steps) >= l.cfg.StepLimit:
			l.out.StopReason = StopConditionMet
			return l.out, nil
		}
	}
}

// fail ends the turn with err, the turn's own end taking precedence: the
// caller's context error as it is, or ErrTurnTimeout.
func (l *loop) fail(err error) (Outcome, error) {
	switch {
	case l.parent.Err() != nil:
		l.out.StopReason = StopCancelled
		return l.out, l.parent.Err()
	case l.ctx.Err() != nil:
		l.out.StopReason = StopTurnTimeout
		return l.out, &TimeoutError{Turn: true, Step: len(l.out.Steps), Timeout: l.cfg.TurnTimeout}
	case errors.Is(err, ErrStepTimeout):
		l.out.StopReason = StopStepTimeout
	case errors.Is(err, ErrHistoryTooLarge):
		l.out.StopReason = StopHistoryLimit
	default:
		l.out.StopReason = StopError
	}
	return l.out, err
}

func (l *loop) step(i int) (Step, error) {
	if err := l.ctx.Err(); err != nil {
		return Step{}, err
	}
	sctx, cancel := context.WithTimeoutCause(l.ctx, l.cfg.StepTimeout, ErrStepTimeout)
	defer cancel()
	resp, res, resuming := l.replied(i)
	if resuming {
		// The step was under way when the turn stopped, its model
		// answered: its calls go on, with the tools all active (a
		// PrepareStep hook's choice for it was not recorded).
		return l.finish(sctx, i, resp, res, l.tools)
	}
	if f := l.cfg.Events.StepStarted; f != nil {
		f(i)
	}
	p := PrepareStep{Step: i, Messages: l.messages, ActiveTools: l.names, ToolChoice: l.cfg.ToolChoice, Model: l.cfg.Model}
	prepared := int64(-1) // the size of the hook's messages
	if h := l.cfg.Hooks.PrepareStep; h != nil {
		// The hook gets copies: what it changes holds for this step only.
		p.Messages, p.ActiveTools = slices.Clone(p.Messages), slices.Clone(p.ActiveTools)
		var err error
		if p, err = h(sctx, p); err != nil {
			return Step{}, &HookError{Hook: HookPrepareStep, Step: i, Err: err}
		}
		if fe := checkPrepared(p); fe != nil {
			return Step{}, &HookError{Hook: HookPrepareStep, Step: i, Err: fe}
		}
		prepared = messagesBytes(p.Messages)
	}
	// What the request carries is within the limit: the turn ends here
	// when the last step grew the history past it.
	if err := l.request(i, prepared, p.Model); err != nil {
		return Step{}, err
	}
	active, err := l.activeTools(p.ActiveTools)
	if err != nil {
		return Step{}, &HookError{Hook: HookPrepareStep, Step: i, Err: err}
	}
	req := model.Request{Messages: p.Messages, ToolChoice: p.ToolChoice, Model: p.Model}
	if len(l.system) > 0 {
		req.Messages = append(slices.Clip(l.system), p.Messages...)
	}
	for _, name := range p.ActiveTools {
		req.Tools = append(req.Tools, active[name].desc)
	}
	resp, err = l.callModel(sctx, i, req)
	if err != nil {
		if context.Cause(sctx) == ErrStepTimeout && l.ctx.Err() == nil {
			return Step{}, &TimeoutError{Step: i, Timeout: l.cfg.StepTimeout}
		}
		return Step{}, &ModelError{Step: i, Model: p.Model, ModelFromHook: p.Model != l.cfg.Model, Err: err}
	}
	return l.finish(sctx, i, resp, nil, active)
}

// finish runs the calls of a step's model answer and grows the history
// with the answer and their results. res, when set, is what the calls
// of a resumed step go on from.
func (l *loop) finish(sctx context.Context, i int, resp model.Response, res *resumed, active map[string]*compiledTool) (Step, error) {
	for j, c := range resp.Message.ToolCalls {
		if c.ID == "" {
			// A result must name its call: give an id the model left out.
			resp.Message.ToolCalls[j].ID = fmt.Sprintf("call_%d_%d", i, j)
		}
	}
	if f := l.cfg.Events.Replied; f != nil && res == nil {
		f(i, Reply{Message: model.Assistant(resp.Message.Content, slices.Clone(resp.Message.ToolCalls)...), FinishReason: resp.FinishReason, Usage: resp.Usage})
	}
	step := Step{Index: i, Text: resp.Message.Content, FinishReason: resp.FinishReason, Usage: resp.Usage}
	run := &stepRun{index: i, active: active, resumed: res}
	if n, most := len(resp.Message.ToolCalls), l.cfg.MaxCallsPerStep; n > most {
		// The calls past the limit are one error result, on the first of
		// them; the others are in neither the step nor the history.
		resp.Message.ToolCalls = resp.Message.ToolCalls[: most+1 : most+1]
		run.refused = make([]string, most+1)
		run.refused[most] = fmt.Sprintf("the reply made %d tool calls, over the limit of %d a step: the first %d ran, this one and the %d after it did not, and the history leaves those after it out", n, most, most, n-most-1)
	}
	if resp.FinishReason == model.FinishLength && len(resp.Message.ToolCalls) > 0 {
		if run.refused == nil {
			run.refused = make([]string, len(resp.Message.ToolCalls))
		}
		for j := range run.refused {
			if run.refused[j] == "" {
				run.refused[j] = "the reply was cut off at its length limit, so the call may be incomplete: it was not run"
			}
		}
	}
	grown := l.history
	if len(resp.Message.ToolCalls) > 0 {
		step.ToolCalls = make([]ToolCall, len(resp.Message.ToolCalls))
		for j, c := range resp.Message.ToolCalls {
			step.ToolCalls[j] = ToolCall{ID: c.ID, Name: c.Name, Arguments: []byte(c.Arguments)}
		}
		// The reply is held while its calls run.
		assistant := model.Assistant(resp.Message.Content, resp.Message.ToolCalls...)
		grown.messages += messageBytes(&assistant) + 1
		if err := l.reserve(l.ctx, i, grown.total()); err != nil {
			return Step{}, err
		}
		var ran []ToolCall
		var err error
		if step.Results, ran, err = l.runCalls(sctx, run, resp.Message.ToolCalls, step.ToolCalls); err != nil {
			return Step{}, err
		}
		if err := l.ctx.Err(); err != nil {
			return Step{}, err
		}
		resp.Message.ToolCalls = asRan(resp.Message.ToolCalls, ran)
		grown = l.history
	}
	msgs := make([]model.Message, 0, 1+len(step.ToolCalls))
	msgs = append(msgs, model.Assistant(resp.Message.Content, resp.Message.ToolCalls...))
	for j, c := range step.ToolCalls {
		msgs = append(msgs, model.ToolResult(c.ID, string(step.Results[j].Content)))
	}
	for j := range msgs {
		grown.messages += messageBytes(&msgs[j]) + 1
	}
	// Held until the turn ends; the next step's request checks the limit.
	if err := l.reserve(l.ctx, i, grown.total()); err != nil {
		return Step{}, err
	}
	l.messages = append(l.messages, msgs...)
	l.history = grown
	if f := l.cfg.Events.HistoryGrew; f != nil {
		f(i, msgs)
	}
	return step, nil
}

// asRan is the assistant message's tool calls as they ran: a call a
// PreToolCall hook replaced shows the replacement's name and arguments, so
// that the model reads each result next to the arguments that made it.
// The others stay as the model wrote them (no arguments included, which
// ran as {}).
func asRan(calls []model.ToolCall, ran []ToolCall) []model.ToolCall {
	var out []model.ToolCall
	for j, r := range ran {
		c := calls[j]
		args := string(r.Arguments)
		if r.Name == c.Name && (args == c.Arguments || args == noArguments && isEmpty(c.Arguments)) {
			continue
		}
		if out == nil {
			out = slices.Clone(calls)
		}
		out[j] = model.ToolCall{ID: c.ID, Name: r.Name, Arguments: args}
	}
	if out == nil {
		return calls
	}
	return out
}

// checkPrepared refuses what a PrepareStep hook returned that the model
// package would refuse to send.
func checkPrepared(p PrepareStep) *FieldError {
	if len(p.Messages) == 0 {
		return &FieldError{"messages", "none: give at least one"}
	}
	if fe := checkMessages(p.Messages); fe != nil {
		return fe
	}
	return checkToolChoice(p.ToolChoice, p.ActiveTools)
}

// activeTools checks the step's active tool names; its error is a
// *FieldError (active_tools).
func (l *loop) activeTools(names []string) (map[string]*compiledTool, error) {
	if slices.Equal(names, l.names) {
		return l.tools, nil
	}
	active := make(map[string]*compiledTool, len(names))
	for _, n := range names {
		t := l.tools[n]
		switch {
		case t == nil:
			return nil, &FieldError{"active_tools", fmt.Sprintf("%q is not a tool of the turn", n)}
		case active[n] != nil:
			return nil, &FieldError{"active_tools", fmt.Sprintf("%q is listed twice", n)}
		}
		active[n] = t
	}
	return active, nil
}

// callModel streams the model's reply, forwarding its text as it comes.
func (l *loop) callModel(ctx context.Context, i int, req model.Request) (model.Response, error) {
	s, err := l.cfg.Provider.Stream(ctx, req)
	if err != nil {
		return model.Response{}, err
	}
	defer s.Close()
	onText := l.cfg.Events.TextDelta
	for {
		ev, err := s.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = model.ErrStreamCut
			}
			return model.Response{}, err
		}
		switch ev := ev.(type) {
		case model.TextDelta:
			if onText != nil && ev.Text != "" {
				onText(i, ev.Text)
			}
		case model.Response:
			return ev, nil
		}
	}
}

func addUsage(a, b model.Usage) model.Usage {
	return model.Usage{
		PromptTokens:     a.PromptTokens + b.PromptTokens,
		CompletionTokens: a.CompletionTokens + b.CompletionTokens,
		TotalTokens:      a.TotalTokens + b.TotalTokens,
	}
}
