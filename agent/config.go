package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/exprd/exprd/model"
)

// Defaults of Config.
const (
	// DefaultMaxSteps is the step limit when Config.Stop is nil.
	DefaultMaxSteps = 10
	// DefaultParallelism bounds the tool calls of one step running at once.
	DefaultParallelism = 8
	// DefaultToolTimeout bounds one tool call.
	DefaultToolTimeout = 30 * time.Second
	// DefaultStepTimeout bounds one step: its model call and its tools.
	DefaultStepTimeout = 2 * time.Minute
	// DefaultTurnTimeout bounds the whole turn.
	DefaultTurnTimeout = 10 * time.Minute
	// DefaultStepLimit bounds the steps of a turn whatever Config.Stop
	// says: a condition that never matches (has_tool_call of a tool the
	// model does not call, not(max_steps)) still ends.
	DefaultStepLimit = 100
	// DefaultMaxCallsPerStep bounds the tool calls of one step that run
	// and enter the history. A model's reply holds at most 8 MiB of text,
	// names and arguments, room for millions of calls; 64 is CodeMode's
	// calls per run, and more than models make at once.
	DefaultMaxCallsPerStep = 64
	// DefaultMaxHistoryBytes bounds the history a model request carries,
	// in bytes of JSON: the system prompt, the tools declared and the
	// messages so far. 8 MiB is more than the context of any model today
	// (2M tokens at 4 bytes a token); a turn past it ends with a
	// *HistoryError.
	DefaultMaxHistoryBytes = 8 << 20
)

// Config is one turn.
type Config struct {
	Provider model.Provider
	// Model is the model name sent with each request; empty: the
	// provider's own.
	Model string
	// System, when set, is sent first in every request, as a system message.
	System string
	// Messages are the conversation so far; at least one.
	Messages   []model.Message
	Tools      []Tool
	ToolChoice model.ToolChoice
	// Stop ends the turn after a step that made tool calls; nil:
	// MaxSteps(DefaultMaxSteps).
	Stop  StopCondition
	Hooks Hooks
	// Approve decides calls of tools with NeedsApproval; required when a
	// tool needs approval.
	Approve Approval
	// Parallelism bounds a step's tool calls running at once; 0:
	// DefaultParallelism.
	Parallelism int
	// Timeouts; 0: the Default of each.
	ToolTimeout, StepTimeout, TurnTimeout time.Duration
	// StepLimit bounds the turn's steps whatever Stop says: after that
	// many the turn ends as if Stop had matched (StopConditionMet); 0:
	// DefaultStepLimit.
	StepLimit int
	// MaxCallsPerStep bounds the calls of one step that run: of a reply
	// with more, the first MaxCallsPerStep run, the next one is answered
	// with an error result saying how many calls the reply made and that
	// those after it were left out, and the rest are in neither the step
	// nor the history. 0: DefaultMaxCallsPerStep.
	MaxCallsPerStep int
	// MaxHistoryBytes bounds what one model request carries, in bytes of
	// JSON as the providers send it: the system prompt, the tools and the
	// messages (a PrepareStep hook's instead, when it gives some). A turn
	// whose Config is over it fails before anything is sent; a history
	// that a step grew past it ends the turn before the next request,
	// which is not sent (the step itself ran and finished). Either is a
	// *HistoryError (ErrHistoryTooLarge). 0: DefaultMaxHistoryBytes.
	MaxHistoryBytes int64
	// ReserveHistory, when set, is asked to hold memory for a history of
	// bytes (as counted for MaxHistoryBytes) before the history grows to
	// it: at the start, when a step's request carries a PrepareStep hook's
	// messages, and when a step adds the model's reply and the results.
	// bytes only grows; the caller releases what it holds once Run has
	// returned. Its error ends the turn with a *HistoryError wrapping it.
	ReserveHistory func(ctx context.Context, bytes int64) error
	Events         Events
	// Resume, when set, goes on with a turn that another process ran until
	// it stopped, from what its events recorded: Messages is then the
	// history after Resume.Steps.
	Resume *Resume
}

// turn is a checked Config with its defaults filled in.
type turn struct {
	cfg    Config
	tools  map[string]*compiledTool
	names  []string // in Config order
	stop   StopCondition
	system []model.Message
	// history is the size of what the first request carries.
	history historyBytes
}

func newTurn(cfg Config) (*turn, error) {
	if cfg.Provider == nil {
		return nil, invalid("provider", "none")
	}
	if len(cfg.Messages) == 0 {
		return nil, invalid("messages", "none: give at least one")
	}
	durations := []struct {
		name string
		d    *time.Duration
		def  time.Duration
	}{
		{"tool_timeout", &cfg.ToolTimeout, DefaultToolTimeout},
		{"step_timeout", &cfg.StepTimeout, DefaultStepTimeout},
		{"turn_timeout", &cfg.TurnTimeout, DefaultTurnTimeout},
	}
	for _, d := range durations {
		switch {
		case *d.d < 0:
			return nil, invalid(d.name, "%s is negative", *d.d)
		case *d.d == 0:
			*d.d = d.def
		}
	}
	counts := []struct {
		name string
		n    *int
		def  int
	}{
		{"parallelism", &cfg.Parallelism, DefaultParallelism},
		{"step_limit", &cfg.StepLimit, DefaultStepLimit},
		{"max_calls_per_step", &cfg.MaxCallsPerStep, DefaultMaxCallsPerStep},
	}
	for _, c := range counts {
		switch {
		case *c.n < 0:
			return nil, invalid(c.name, "%d is negative", *c.n)
		case *c.n == 0:
			*c.n = c.def
		}
	}
	switch {
	case cfg.MaxHistoryBytes < 0:
		return nil, invalid("max_history_bytes", "%d is negative", cfg.MaxHistoryBytes)
	case cfg.MaxHistoryBytes == 0:
		cfg.MaxHistoryBytes = DefaultMaxHistoryBytes
	}
	t := &turn{cfg: cfg, tools: make(map[string]*compiledTool, len(cfg.Tools)), stop: cfg.Stop,
		history: historyBytes{fixed: 2}} // the tools' [ ]
	if t.stop == nil {
		t.stop = MaxSteps(DefaultMaxSteps)
	}
	if cfg.System != "" {
		t.system = []model.Message{model.System(cfg.System)}
		t.history.fixed += messageBytes(&t.system[0]) + 1
	}
	for i, tool := range cfg.Tools {
		if err := t.addTool(i, tool); err != nil {
			return nil, err
		}
		t.history.fixed += toolBytes(&t.tools[tool.Name].desc)
	}
	// What the model package would refuse to send is the caller's mistake:
	// refused here, naming the field, before anything is sent.
	if fe := checkMessages(cfg.Messages); fe != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, fe)
	}
	if fe := checkToolChoice(cfg.ToolChoice, t.names); fe != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, fe)
	}
	t.history.messages = messagesBytes(cfg.Messages)
	if n := t.history.total() + stringBytes(cfg.Model); n > cfg.MaxHistoryBytes {
		return nil, &HistoryError{Start: true, Bytes: n, Limit: cfg.MaxHistoryBytes}
	}
	return t, nil
}

func (t *turn) addTool(i int, tool Tool) error {
	switch {
	case tool.Name == "":
		return invalid(fmt.Sprintf("tools[%d].name", i), "empty")
	case t.tools[tool.Name] != nil:
		return invalid(fmt.Sprintf("tools[%d].name", i), "%q is the name of an earlier tool", tool.Name)
	case tool.Timeout < 0:
		return invalid(fmt.Sprintf("tools[%d].timeout", i), "%s is negative (tool %s)", tool.Timeout, tool.Name)
	case tool.NeedsApproval && t.cfg.Approve == nil:
		return invalid(fmt.Sprintf("tools[%d].needs_approval", i), "tool %s needs approval, and the config has no Approve", tool.Name)
	}
	ct := &compiledTool{Tool: tool, timeout: tool.Timeout,
		desc: model.Tool{Name: tool.Name, Description: tool.Description, Parameters: tool.Parameters}}
	if ct.timeout == 0 {
		ct.timeout = t.cfg.ToolTimeout
	}
	if len(tool.Parameters) > 0 {
		s, err := compileSchema(tool.Parameters)
		if err != nil {
			return invalid(fmt.Sprintf("tools[%d].parameters", i), "tool %s: %v", tool.Name, err)
		}
		ct.compiledSchema = s
	}
	t.tools[tool.Name] = ct
	t.names = append(t.names, tool.Name)
	return nil
}
