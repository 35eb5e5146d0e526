package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/exprd/exprd/codemode"
	"github.com/exprd/exprd/server"
)

// runLimitsConfig is the flags of the server's maxima of AgentLoop turns
// and CodeMode runs (server.AgentLimits, WithCodeModeMaxTimeout).
type runLimitsConfig struct {
	agent              server.AgentLimits
	codeModeTimeout    time.Duration
	codeModeCandidates int
}

func (c *runLimitsConfig) flags(fs *flag.FlagSet) {
	a := &c.agent
	fs.IntVar(&a.MaxSteps, "agent-max-steps", server.DefaultAgentMaxSteps, "steps of one AgentLoop turn: the most max_steps may ask for, and every stop condition ends the turn after this many")
	fs.DurationVar(&a.MaxToolTimeout, "agent-max-tool-timeout", server.DefaultAgentMaxToolTimeout, "the most an AgentLoop turn's tool_timeout_ms, or a tool's timeout_ms, may ask for")
	fs.DurationVar(&a.MaxStepTimeout, "agent-max-step-timeout", server.DefaultAgentMaxStepTimeout, "the most an AgentLoop turn's step_timeout_ms may ask for")
	fs.DurationVar(&a.MaxTurnTimeout, "agent-max-turn-timeout", server.DefaultAgentMaxTurnTimeout, "the most an AgentLoop turn's turn_timeout_ms may ask for")
	fs.IntVar(&a.MaxCallsPerStep, "agent-max-calls-per-step", server.DefaultAgentMaxCallsPerStep, "tool calls of one AgentLoop step that run; the next one of a reply with more is an error result, the rest are left out")
	fs.Int64Var(&a.MaxHistoryBytes, "agent-max-history-bytes", server.DefaultAgentMaxHistoryBytes, "bytes of JSON one model request of an AgentLoop turn carries (system prompt, tools, messages); past it the turn ends RESOURCE_EXHAUSTED")
	fs.DurationVar(&c.codeModeTimeout, "codemode-max-timeout", server.DefaultCodeModeMaxTimeout, "the most a CodeMode request's timeout_ms may ask for")
	fs.IntVar(&c.codeModeCandidates, "codemode-candidates", 0, "how many ranked tools CodeMode's prompt mode offers the model (0: "+codemode.CandidateLimitEnv+" when set, else "+strconv.Itoa(codemode.DefaultCandidateLimit)+"), read at the start")
}

// candidates fills codeModeCandidates from go-utcp's variable when the
// flag left it unset: read once here, so that a bad value stops exprd at
// its start rather than failing requests.
func (c *runLimitsConfig) candidates(lookup func(string) (string, bool)) error {
	if c.codeModeCandidates != 0 {
		return nil
	}
	c.codeModeCandidates = codemode.DefaultCandidateLimit
	v, ok := lookup(codemode.CandidateLimitEnv)
	if !ok {
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return fmt.Errorf("%s=%q: want a positive integer", codemode.CandidateLimitEnv, v)
	}
	c.codeModeCandidates = n
	return nil
}

// validate wants every maximum positive, naming its flag.
func (c runLimitsConfig) validate() error {
	a := c.agent
	return errors.Join(notPositive([]positiveFlag{
		{"agent-max-steps", a.MaxSteps > 0, a.MaxSteps},
		{"agent-max-tool-timeout", a.MaxToolTimeout > 0, a.MaxToolTimeout},
		{"agent-max-step-timeout", a.MaxStepTimeout > 0, a.MaxStepTimeout},
		{"agent-max-turn-timeout", a.MaxTurnTimeout > 0, a.MaxTurnTimeout},
		{"agent-max-calls-per-step", a.MaxCallsPerStep > 0, a.MaxCallsPerStep},
		{"agent-max-history-bytes", a.MaxHistoryBytes > 0, a.MaxHistoryBytes},
		{"codemode-max-timeout", c.codeModeTimeout > 0, c.codeModeTimeout},
		{"codemode-candidates", c.codeModeCandidates > 0, c.codeModeCandidates},
	})...)
}
