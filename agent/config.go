package agent

import (
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
	Events                                Events
}

// turn is a checked Config with its defaults filled in.
type turn struct {
	cfg    Config
	tools  map[string]*compiledTool
	names  []string // in Config order
	stop   StopCondition
	system []model.Message
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
	switch {
	case cfg.Parallelism < 0:
		return nil, invalid("parallelism", "%d is negative", cfg.Parallelism)
	case cfg.Parallelism == 0:
		cfg.Parallelism = DefaultParallelism
	}
	t := &turn{cfg: cfg, tools: make(map[string]*compiledTool, len(cfg.Tools)), stop: cfg.Stop}
	if t.stop == nil {
		t.stop = MaxSteps(DefaultMaxSteps)
	}
	if cfg.System != "" {
		t.system = []model.Message{model.System(cfg.System)}
	}
	for i, tool := range cfg.Tools {
		if err := t.addTool(i, tool); err != nil {
			return nil, err
		}
	}
	// What the model package would refuse to send is the caller's mistake:
	// refused here, naming the field, before anything is sent.
	if fe := checkMessages(cfg.Messages); fe != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, fe)
	}
	if fe := checkToolChoice(cfg.ToolChoice, t.names); fe != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, fe)
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
