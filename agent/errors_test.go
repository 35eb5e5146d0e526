package agent_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/exprd/exprd/agent"
	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/model/scripted"
)

// The errors Run returns are typed, carry what a caller maps them with
// (which hook, which step and call, which model the request named, which
// timeout), and read as plain sentences without a package prefix.
func TestRunErrorsAreTyped(t *testing.T) {
	t.Parallel()
	hookFails := errors.New("the client went away")
	tests := []struct {
		name  string
		turns []scripted.Turn
		edit  func(*agent.Config)
		check func(t *testing.T, err error)
	}{
		{"a pre_tool_call hook's error", []scripted.Turn{{ToolCalls: []scripted.ToolCall{callID("c1", "search", `{}`)}}},
			func(c *agent.Config) {
				c.Hooks.PreToolCall = func(context.Context, int, agent.ToolCall) (agent.PreToolCall, error) {
					return agent.PreToolCall{}, hookFails
				}
			},
			func(t *testing.T, err error) {
				var he *agent.HookError
				if !errors.As(err, &he) || he.Hook != agent.HookPreToolCall || he.Step != 0 || he.CallID != "c1" || !errors.Is(err, hookFails) {
					t.Errorf("got %v, want a *HookError of pre_tool_call, step 0, call c1, wrapping the hook's error", err)
				}
			}},
		{"a prepare_step hook's error", []scripted.Turn{{Text: "never"}},
			func(c *agent.Config) {
				c.Hooks.PrepareStep = func(_ context.Context, p agent.PrepareStep) (agent.PrepareStep, error) { return p, hookFails }
			},
			func(t *testing.T, err error) {
				var he *agent.HookError
				if !errors.As(err, &he) || he.Hook != agent.HookPrepareStep || he.CallID != "" || !errors.Is(err, agent.ErrHook) {
					t.Errorf("got %v, want a *HookError of prepare_step", err)
				}
			}},
		{"the model named by the config", []scripted.Turn{{Error: &scripted.ErrorReply{Status: 404}}},
			func(c *agent.Config) { c.Model = "gpt-nope" },
			func(t *testing.T, err error) {
				var me *agent.ModelError
				var he *model.HTTPError
				if !errors.As(err, &me) || me.Model != "gpt-nope" || me.ModelFromHook || !errors.As(err, &he) || he.StatusCode != 404 {
					t.Errorf("got %v, want a *ModelError naming gpt-nope, from the config, wrapping the 404", err)
				}
			}},
		{"the model a hook chose", []scripted.Turn{{Error: &scripted.ErrorReply{Status: 404}}},
			func(c *agent.Config) {
				c.Model = "big"
				c.Hooks.PrepareStep = func(_ context.Context, p agent.PrepareStep) (agent.PrepareStep, error) {
					p.Model = "small"
					return p, nil
				}
			},
			func(t *testing.T, err error) {
				var me *agent.ModelError
				if !errors.As(err, &me) || me.Model != "small" || !me.ModelFromHook {
					t.Errorf("got %v, want a *ModelError naming small, from the hook", err)
				}
			}},
		{"the provider's own model", []scripted.Turn{{Error: &scripted.ErrorReply{Status: 500}}}, nil,
			func(t *testing.T, err error) {
				var me *agent.ModelError
				if !errors.As(err, &me) || me.Model != "" || me.ModelFromHook {
					t.Errorf("got %v, want a *ModelError naming no model", err)
				}
			}},
		{"a step timeout", []scripted.Turn{{Text: "late", DelayMS: 2000}},
			func(c *agent.Config) { c.StepTimeout = 20 * time.Millisecond },
			func(t *testing.T, err error) {
				var te *agent.TimeoutError
				if !errors.As(err, &te) || te.Turn || te.Timeout != 20*time.Millisecond || errors.Is(err, agent.ErrTurnTimeout) {
					t.Errorf("got %v, want a step's *TimeoutError of 20ms", err)
				}
			}},
		{"a turn timeout", []scripted.Turn{{Text: "late", DelayMS: 2000}},
			func(c *agent.Config) { c.TurnTimeout = 20 * time.Millisecond },
			func(t *testing.T, err error) {
				var te *agent.TimeoutError
				if !errors.As(err, &te) || !te.Turn || te.Timeout != 20*time.Millisecond || errors.Is(err, agent.ErrStepTimeout) {
					t.Errorf("got %v, want the turn's *TimeoutError of 20ms", err)
				}
			}},
		{"an invalid config", []scripted.Turn{{Text: "never"}},
			func(c *agent.Config) { c.Parallelism = -1 },
			func(t *testing.T, err error) {
				var fe *agent.FieldError
				if !errors.Is(err, agent.ErrInvalidConfig) || !errors.As(err, &fe) || fe.Field != "parallelism" {
					t.Errorf("got %v, want ErrInvalidConfig naming parallelism", err)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := serve(t, tc.turns...)
			cfg := config(t, srv, agent.Tool{Name: "search", Exec: fixed(`{}`)})
			if tc.edit != nil {
				tc.edit(&cfg)
			}
			_, err := agent.Run(context.Background(), cfg)
			if err == nil {
				t.Fatal("got no error")
			}
			tc.check(t, err)
			if strings.Contains(err.Error(), "agent:") {
				t.Errorf("got %q, want no package prefix", err)
			}
		})
	}
}
