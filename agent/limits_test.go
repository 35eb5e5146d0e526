package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exprd/exprd/agent"
	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/model/scripted"
)

// blocking is an executor that waits for its context and reports when it
// saw it end.
func blocking(ended chan<- error) agent.Executor {
	return agent.ExecutorFunc(func(ctx context.Context, _ agent.ToolCall) (agent.Result, error) {
		<-ctx.Done()
		if ended != nil {
			ended <- ctx.Err()
		}
		return agent.Result{}, ctx.Err()
	})
}

// A tool's own timeout overrides Config.ToolTimeout; each is tested at the
// limit and past it. A tool that runs within its timeout answers at once;
// one past it waits for its context to end.
func TestToolTimeouts(t *testing.T) {
	t.Parallel()
	// within reports the timeout its context was given; past never
	// answers before its context ends.
	within := agent.ExecutorFunc(func(ctx context.Context, _ agent.ToolCall) (agent.Result, error) {
		d, _ := ctx.Deadline()
		return agent.Result{Content: json.RawMessage(fmt.Sprintf(`{"seconds": %.0f}`, time.Until(d).Seconds()))}, nil
	})
	past := blocking(nil)
	tests := []struct {
		name        string
		toolTimeout time.Duration // Tool.Timeout
		cfgTimeout  time.Duration // Config.ToolTimeout
		exec        agent.Executor
		want        string // the result, or the error's text
	}{
		{"within config timeout", 0, 10 * time.Second, within, `{"seconds": 10}`},
		{"past config timeout", 0, 30 * time.Millisecond, past, "timed out after 30ms"},
		{"tool timeout overrides config", 10 * time.Second, 30 * time.Millisecond, within, `{"seconds": 10}`},
		{"past tool timeout", 30 * time.Millisecond, 10 * time.Second, past, "timed out after 30ms"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := serve(t, scripted.Turn{ToolCalls: []scripted.ToolCall{call("sleep", `{}`)}}, scripted.Turn{Text: "done"})
			cfg := config(t, srv, agent.Tool{Name: "sleep", Exec: tc.exec, Timeout: tc.toolTimeout})
			cfg.ToolTimeout = tc.cfgTimeout
			out := run(t, cfg)
			if r := out.Steps[0].Results[0]; r.IsError {
				wantError(t, r, tc.want)
			} else if string(r.Content) != tc.want {
				t.Errorf("got %s, want %s", r.Content, tc.want)
			}
			if out.Text != "done" {
				t.Errorf("got text %q, want the loop to go on", out.Text)
			}
		})
	}
}

// A tool past its timeout is answered at once, even when its executor
// does not return when its context ends; the turn ends only once the
// executor has returned. Each executor here is held until the turn's last
// step has finished: by then its call has long been answered.
func TestToolPastTimeoutIsAnsweredAndJoined(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// wait is what the executor waits for before it waits to be
		// released.
		wait func(ctx context.Context)
	}{
		{"it ignores its context", func(context.Context) {}},
		{"it returns after its context ends", func(ctx context.Context) { <-ctx.Done() }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			release := make(chan struct{})
			var returned atomic.Bool
			srv := serve(t, scripted.Turn{ToolCalls: []scripted.ToolCall{call("stuck", `{}`)}}, scripted.Turn{Text: "done"})
			cfg := config(t, srv, agent.Tool{Name: "stuck", Timeout: 30 * time.Millisecond,
				Exec: agent.ExecutorFunc(func(ctx context.Context, _ agent.ToolCall) (agent.Result, error) {
					tc.wait(ctx)
					<-release
					returned.Store(true)
					return agent.Result{}, nil
				})})
			cfg.Events.StepFinished = func(s agent.Step) {
				if s.Index == 1 {
					close(release)
				}
			}
			out := run(t, cfg)
			wantError(t, out.Steps[0].Results[0], "timed out")
			if !returned.Load() {
				t.Error("Run returned before the executor it started")
			}
		})
	}
}

func TestStepTimeout(t *testing.T) {
	t.Parallel()
	t.Run("model call past it fails the turn", func(t *testing.T) {
		t.Parallel()
		srv := serve(t, scripted.Turn{Text: "late", DelayMS: 2000})
		cfg := config(t, srv)
		cfg.StepTimeout = 50 * time.Millisecond
		out, err := agent.Run(context.Background(), cfg)
		if !errors.Is(err, agent.ErrStepTimeout) || out.StopReason != agent.StopStepTimeout {
			t.Errorf("got %v, %s; want ErrStepTimeout, step-timeout", err, out.StopReason)
		}
	})
	t.Run("tools past it are error results", func(t *testing.T) {
		t.Parallel()
		srv := serve(t, scripted.Turn{ToolCalls: []scripted.ToolCall{call("hang", `{}`)}}, scripted.Turn{Text: "done"})
		ended := make(chan error, 1)
		cfg := config(t, srv, agent.Tool{Name: "hang", Exec: blocking(ended)})
		cfg.StepTimeout = 100 * time.Millisecond
		out := run(t, cfg)
		wantError(t, out.Steps[0].Results[0], "the step outlived 100ms")
		if err := <-ended; !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("the tool saw %v, want its deadline", err)
		}
		if out.Text != "done" {
			t.Errorf("got text %q, want the next step to run", out.Text)
		}
	})
}

func TestTurnTimeout(t *testing.T) {
	t.Parallel()
	srv := serveScript(t, scripted.Script{Loop: true, Turns: []scripted.Turn{{ToolCalls: []scripted.ToolCall{call("hang", `{}`)}}}})
	ended := make(chan error, 1)
	cfg := config(t, srv, agent.Tool{Name: "hang", Exec: blocking(ended)})
	cfg.TurnTimeout = 100 * time.Millisecond
	start := time.Now()
	out, err := agent.Run(context.Background(), cfg)
	if !errors.Is(err, agent.ErrTurnTimeout) || out.StopReason != agent.StopTurnTimeout {
		t.Errorf("got %v, %s; want ErrTurnTimeout, turn-timeout", err, out.StopReason)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Run took %s, want it to end near the turn timeout", d)
	}
	if err := <-ended; err == nil {
		t.Error("the running tool was not cancelled")
	}
}

// An abort (the caller's context) cancels the model request and every
// running tool, and Run returns the context's error.
func TestAbort(t *testing.T) {
	t.Parallel()
	t.Run("during the model call", func(t *testing.T) {
		t.Parallel()
		srv := serve(t, scripted.Turn{Text: "a long answer that streams slowly", ChunkDelayMS: 200})
		cfg := config(t, srv)
		ctx, cancel := context.WithCancel(context.Background())
		cfg.Events.TextDelta = func(int, string) { cancel() }
		out, err := agent.Run(ctx, cfg)
		if !errors.Is(err, context.Canceled) || out.StopReason != agent.StopCancelled {
			t.Fatalf("got %v, %s; want context.Canceled, cancelled", err, out.StopReason)
		}
		deadline := time.Now().Add(5 * time.Second)
		for !srv.Requests()[0].Aborted {
			if time.Now().After(deadline) {
				t.Fatal("the model request was not cancelled")
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	t.Run("during the tools", func(t *testing.T) {
		t.Parallel()
		srv := serve(t, scripted.Turn{ToolCalls: []scripted.ToolCall{call("hang", `{}`), call("hang", `{}`)}}, scripted.Turn{Text: "never"})
		ended := make(chan error, 2)
		ctx, cancel := context.WithCancel(context.Background())
		// The abort comes once both tools run.
		var started atomic.Int32
		hang := agent.ExecutorFunc(func(ctx context.Context, c agent.ToolCall) (agent.Result, error) {
			if started.Add(1) == 2 {
				cancel()
			}
			return blocking(ended).Execute(ctx, c)
		})
		cfg := config(t, srv, agent.Tool{Name: "hang", Exec: hang})
		out, err := agent.Run(ctx, cfg)
		if err != context.Canceled || out.StopReason != agent.StopCancelled || len(out.Steps) != 0 {
			t.Errorf("got %v, %s, %d steps; want context.Canceled itself, cancelled, none", err, out.StopReason, len(out.Steps))
		}
		for range 2 {
			if err := <-ended; !errors.Is(err, context.Canceled) {
				t.Errorf("a tool saw %v, want context.Canceled", err)
			}
		}
		if got := len(srv.Requests()); got != 1 {
			t.Errorf("got %d model requests, want 1", got)
		}
	})
}

func TestModelErrorFailsTurn(t *testing.T) {
	t.Parallel()
	srv := serve(t, scripted.Turn{Error: &scripted.ErrorReply{Status: 400}})
	out, err := agent.Run(context.Background(), config(t, srv))
	var he *model.HTTPError
	if !errors.Is(err, agent.ErrModel) || !errors.As(err, &he) || he.StatusCode != 400 || out.StopReason != agent.StopError {
		t.Errorf("got %v, %s; want ErrModel wrapping the 400", err, out.StopReason)
	}
}

func TestInvalidConfig(t *testing.T) {
	t.Parallel()
	srv := serve(t, scripted.Turn{Text: "never"})
	good := config(t, srv)
	msgs := func(m ...model.Message) func(*agent.Config) {
		return func(c *agent.Config) { c.Messages = append([]model.Message{model.User("question")}, m...) }
	}
	tests := []struct {
		name  string
		edit  func(*agent.Config)
		field string
	}{
		{"no provider", func(c *agent.Config) { c.Provider = nil }, "provider"},
		{"no messages", func(c *agent.Config) { c.Messages = nil }, "messages"},
		{"tool without name", func(c *agent.Config) { c.Tools = []agent.Tool{{}} }, "tools[0].name"},
		{"duplicate tool", func(c *agent.Config) { c.Tools = []agent.Tool{{Name: "a"}, {Name: "a"}} }, "tools[1].name"},
		{"parameters not JSON", func(c *agent.Config) { c.Tools = []agent.Tool{{Name: "a", Parameters: json.RawMessage(`{`)}} }, "tools[0].parameters"},
		{"parameters not an object", func(c *agent.Config) { c.Tools = []agent.Tool{{Name: "a", Parameters: json.RawMessage(`[]`)}} }, "tools[0].parameters"},
		{"parameters not a schema", func(c *agent.Config) {
			c.Tools = []agent.Tool{{Name: "a", Parameters: json.RawMessage(`{"type": 7}`)}}
		}, "tools[0].parameters"},
		{"needs approval without Approve", func(c *agent.Config) { c.Tools = []agent.Tool{{Name: "a", NeedsApproval: true}} }, "tools[0].needs_approval"},
		{"negative tool timeout", func(c *agent.Config) { c.Tools = []agent.Tool{{Name: "a", Timeout: -1}} }, "tools[0].timeout"},
		{"negative parallelism", func(c *agent.Config) { c.Parallelism = -1 }, "parallelism"},
		{"negative step timeout", func(c *agent.Config) { c.StepTimeout = -time.Second }, "step_timeout"},
		// What the model package would refuse to send.
		{"unknown role", msgs(model.Message{Role: "bot", Content: "hi"}), "messages[1].role"},
		{"tool message without its call id", msgs(model.Message{Role: model.RoleTool, Content: "{}"}), "messages[1].tool_call_id"},
		{"user message with a call id", msgs(model.Message{Role: model.RoleUser, ToolCallID: "c1"}), "messages[1].tool_call_id"},
		{"assistant call without id", msgs(model.Assistant("", model.ToolCall{Name: "a"})), "messages[1].tool_calls[0].id"},
		{"assistant call without name", msgs(model.Assistant("", model.ToolCall{ID: "c1"})), "messages[1].tool_calls[0].name"},
		{"tool choice names no tool", func(c *agent.Config) {
			c.Tools, c.ToolChoice = []agent.Tool{{Name: "a"}}, model.ChooseTool("b")
		}, "tool_choice.tool"},
		{"tool choice required without tools", func(c *agent.Config) { c.ToolChoice = model.ToolChoice{Mode: model.ToolChoiceRequired} }, "tool_choice"},
		{"tool choice of an unknown mode", func(c *agent.Config) { c.ToolChoice = model.ToolChoice{Mode: "sometimes"} }, "tool_choice"},
	}
	for _, tc := range tests {
		cfg := good
		tc.edit(&cfg)
		_, err := agent.Run(context.Background(), cfg)
		var fe *agent.FieldError
		if !errors.Is(err, agent.ErrInvalidConfig) || !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%s: got %v, want ErrInvalidConfig naming %s", tc.name, err, tc.field)
		}
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("the model got %d requests, want 0", n)
	}
}
