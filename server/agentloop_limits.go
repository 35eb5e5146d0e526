package server

import (
	"context"
	"fmt"
	"time"

	"github.com/exprd/exprd/agent"
	"github.com/exprd/exprd/codemode"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/membudget"
	"github.com/exprd/exprd/server/internal/rpcstatus"
)

// The server's maxima of AgentLoop turns. A request's value above one is
// INVALID_ARGUMENT with a BadRequest naming the field, as the ExprTool's
// budgets are; a request that leaves a value out (0) gets the loop's
// default, or the maximum when that is lower.
const (
	// DefaultAgentMaxSteps bounds a turn's steps: max_steps (wherever it
	// is in start.stop) may not be more, and every stop condition ends
	// the turn after this many steps (agent.Config.StepLimit).
	DefaultAgentMaxSteps = agent.DefaultStepLimit
	// DefaultAgentMaxToolTimeout bounds tool_timeout_ms and each tool's
	// timeout_ms.
	DefaultAgentMaxToolTimeout = 10 * time.Minute
	// DefaultAgentMaxStepTimeout bounds step_timeout_ms.
	DefaultAgentMaxStepTimeout = 15 * time.Minute
	// DefaultAgentMaxTurnTimeout bounds turn_timeout_ms: a turn holds its
	// history and its stream; it outlives no connection anyway
	// (DefaultMaxConnectionAge).
	DefaultAgentMaxTurnTimeout = 30 * time.Minute
	// DefaultAgentMaxCallsPerStep bounds the tool calls of a step that
	// run (agent.Config.MaxCallsPerStep).
	DefaultAgentMaxCallsPerStep = agent.DefaultMaxCallsPerStep
	// DefaultAgentMaxHistoryBytes bounds what one model request of a turn
	// carries, in bytes of JSON (agent.Config.MaxHistoryBytes); a turn
	// past it ends RESOURCE_EXHAUSTED, QuotaFailure max_history_bytes.
	DefaultAgentMaxHistoryBytes = agent.DefaultMaxHistoryBytes
	// DefaultCodeModeMaxTimeout bounds CodeMode's timeout_ms
	// (codemode.DefaultMaxTimeout).
	DefaultCodeModeMaxTimeout = codemode.DefaultMaxTimeout
)

// historyMemoryFactor is what a turn's history reserves from the memory
// budget per byte of its JSON: the messages (1), the steps' copies of the
// results and arguments (up to 1), and the request body the provider
// encodes from them for each step (up to 2 while its buffer grows).
// Measured: a model that kept calling tools (64 calls and 100 KB of text
// a step) until the 8 MiB history ended its turn after 75 steps took
// exprd's live heap after a GC to 33 MiB at most, for 8.1 MiB of history:
// 4.1 times, less the few MiB exprd holds idle.
const historyMemoryFactor = 4

// quotaHistoryBytes is the QuotaFailure subject of a turn over its
// history's limit.
const quotaHistoryBytes = "max_history_bytes"

// AgentLimits are the server's maxima of AgentLoop turns. A zero field
// keeps its default (DefaultAgentLimits).
type AgentLimits struct {
	// MaxSteps bounds start.stop's max_steps and every turn's steps.
	MaxSteps int
	// MaxToolTimeout bounds tool_timeout_ms and each tool's timeout_ms;
	// MaxStepTimeout step_timeout_ms; MaxTurnTimeout turn_timeout_ms.
	MaxToolTimeout, MaxStepTimeout, MaxTurnTimeout time.Duration
	// MaxCallsPerStep bounds the tool calls of a step that run.
	MaxCallsPerStep int
	// MaxHistoryBytes bounds what one model request carries, as JSON.
	MaxHistoryBytes int64
}

// DefaultAgentLimits are the Default* maxima above.
func DefaultAgentLimits() AgentLimits {
	return AgentLimits{
		MaxSteps:        DefaultAgentMaxSteps,
		MaxToolTimeout:  DefaultAgentMaxToolTimeout,
		MaxStepTimeout:  DefaultAgentMaxStepTimeout,
		MaxTurnTimeout:  DefaultAgentMaxTurnTimeout,
		MaxCallsPerStep: DefaultAgentMaxCallsPerStep,
		MaxHistoryBytes: DefaultAgentMaxHistoryBytes,
	}
}

// withDefaults fills l's zero fields from DefaultAgentLimits.
func (l AgentLimits) withDefaults() AgentLimits {
	d := DefaultAgentLimits()
	fill := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	fillD := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	fill(&l.MaxSteps, d.MaxSteps)
	fill(&l.MaxCallsPerStep, d.MaxCallsPerStep)
	fillD(&l.MaxToolTimeout, d.MaxToolTimeout)
	fillD(&l.MaxStepTimeout, d.MaxStepTimeout)
	fillD(&l.MaxTurnTimeout, d.MaxTurnTimeout)
	if l.MaxHistoryBytes == 0 {
		l.MaxHistoryBytes = d.MaxHistoryBytes
	}
	return l
}

// runLimits are the server's maxima of AgentLoop turns and CodeMode runs;
// the zero value is every default.
type runLimits struct {
	agent           AgentLimits
	codeModeTimeout time.Duration // 0: DefaultCodeModeMaxTimeout
	// codeModeCandidates is how many ranked tools CodeMode's prompt mode
	// offers the model (0: codemode.DefaultCandidateLimit).
	codeModeCandidates int
}

func (r runLimits) agentLimits() AgentLimits { return r.agent.withDefaults() }

func (r runLimits) codeModeMaxTimeout() time.Duration {
	if r.codeModeTimeout == 0 {
		return DefaultCodeModeMaxTimeout
	}
	return r.codeModeTimeout
}

// WithAgentLimits sets the maxima of AgentLoop turns (default
// DefaultAgentLimits()); a zero field keeps its default, a negative one is
// an error.
func WithAgentLimits(l AgentLimits) Option {
	return func(o *options) error {
		for _, f := range []struct {
			name string
			neg  bool
			v    any
		}{
			{"agent max steps", l.MaxSteps < 0, l.MaxSteps},
			{"agent max tool timeout", l.MaxToolTimeout < 0, l.MaxToolTimeout},
			{"agent max step timeout", l.MaxStepTimeout < 0, l.MaxStepTimeout},
			{"agent max turn timeout", l.MaxTurnTimeout < 0, l.MaxTurnTimeout},
			{"agent max calls per step", l.MaxCallsPerStep < 0, l.MaxCallsPerStep},
			{"agent max history bytes", l.MaxHistoryBytes < 0, l.MaxHistoryBytes},
		} {
			if f.neg {
				return fmt.Errorf("%s %v: want a positive value (0: the default)", f.name, f.v)
			}
		}
		o.runLimits.agent = l
		return nil
	}
}

// WithCodeModeCandidates sets how many ranked tools CodeMode's prompt mode
// offers the model (default codemode.DefaultCandidateLimit).
func WithCodeModeCandidates(n int) Option {
	return func(o *options) error {
		return positive("codemode candidates", n, func() { o.runLimits.codeModeCandidates = n })
	}
}

// WithCodeModeMaxTimeout bounds the timeout_ms a CodeMode request may ask
// for (default DefaultCodeModeMaxTimeout); 0 keeps the default.
func WithCodeModeMaxTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return fmt.Errorf("codemode max timeout %v: want a positive duration (0: the default)", d)
		}
		o.runLimits.codeModeTimeout = d
		return nil
	}
}

// limitedTimeout reads a request's timeout in milliseconds: 0 is def, or
// most when that is lower; more than most is INVALID_ARGUMENT naming field.
func limitedTimeout(field string, ms uint32, def, most time.Duration) (time.Duration, error) {
	if ms == 0 {
		return min(def, most), nil
	}
	d := time.Duration(ms) * time.Millisecond
	if d > most {
		return 0, rpcstatus.BadRequest(field, fmt.Sprintf("%d ms is above the server's maximum of %d ms", ms, most.Milliseconds()))
	}
	return d, nil
}

// checkStopSteps refuses a max_steps anywhere in c above most, naming its
// field under field.
func checkStopSteps(c *exprdv1.StopCondition, field string, most int) error {
	sub := func(cs *exprdv1.StopConditions, name string) error {
		for i, s := range cs.GetConditions() {
			if err := checkStopSteps(s, fmt.Sprintf("%s.%s.conditions[%d]", field, name, i), most); err != nil {
				return err
			}
		}
		return nil
	}
	switch x := c.GetCond().(type) {
	case *exprdv1.StopCondition_MaxSteps:
		if int64(x.MaxSteps) > int64(most) {
			return rpcstatus.BadRequest(field+".max_steps", fmt.Sprintf("%d steps is above the server's maximum of %d steps", x.MaxSteps, most))
		}
	case *exprdv1.StopCondition_And:
		return sub(x.And, "and")
	case *exprdv1.StopCondition_Or:
		return sub(x.Or, "or")
	case *exprdv1.StopCondition_Not:
		return checkStopSteps(x.Not, field+".not", most)
	}
	return nil
}

// historyReservation is the memory a turn's history holds: it reserves
// historyMemoryFactor bytes per byte of the history's JSON as the loop
// asks (agent.Config.ReserveHistory); close it when the turn ends.
func historyReservation(b *membudget.Budget) (*membudget.Reservation, func(context.Context, int64) error) {
	r := b.Empty("the turn's history")
	return r, func(ctx context.Context, n int64) error { return r.Resize(ctx, historyMemoryFactor*n) }
}
