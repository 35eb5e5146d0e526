package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/exprd/exprd/agent"
	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/model/scripted"
)

// Prepare-step changes the messages, active tools, tool choice and model of
// its step only.
func TestPrepareStepChangesOneStep(t *testing.T) {
	t.Parallel()
	srv := serve(t, scripted.Turn{ToolCalls: []scripted.ToolCall{call("search", `{}`)}}, scripted.Turn{Text: "done"})
	cfg := config(t, srv, agent.Tool{Name: "search", Exec: fixed(`[]`)}, agent.Tool{Name: "buy", Exec: fixed(`{}`)})
	cfg.Model = "big"
	cfg.Hooks.PrepareStep = func(_ context.Context, p agent.PrepareStep) (agent.PrepareStep, error) {
		if p.Step == 0 {
			p.Messages = append(p.Messages, model.User("hint"))
			p.ActiveTools = []string{"search"}
			p.ToolChoice = model.ChooseTool("search")
			p.Model = "small"
		}
		return p, nil
	}
	run(t, cfg)
	reqs := srv.Requests()
	first, second := reqs[0].Chat, reqs[1].Chat
	if first.Model != "small" || len(first.Tools) != 1 || first.Tools[0].Function.Name != "search" ||
		first.LastUser() != "hint" || len(first.ToolChoice) == 0 {
		t.Errorf("first request: got model %q, %d tools, last user %q, tool choice %s; want small, search only, hint, search",
			first.Model, len(first.Tools), first.LastUser(), first.ToolChoice)
	}
	if second.Model != "big" || len(second.Tools) != 2 || second.LastUser() != "question" || len(second.ToolChoice) != 0 {
		t.Errorf("second request: got model %q, %d tools, last user %q, tool choice %s; want big, both, question, none",
			second.Model, len(second.Tools), second.LastUser(), second.ToolChoice)
	}
}

// What a prepare-step hook returns that the model package would refuse
// fails the turn with ErrHook naming the field, and nothing is sent.
func TestPrepareStepInvalidFailsTurn(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		edit  func(*agent.PrepareStep)
		field string
	}{
		{"an unknown active tool", func(p *agent.PrepareStep) { p.ActiveTools = []string{"nope"} }, "active_tools"},
		{"an active tool twice", func(p *agent.PrepareStep) { p.ActiveTools = []string{"search", "search"} }, "active_tools"},
		{"a tool choice naming an inactive tool", func(p *agent.PrepareStep) {
			p.ActiveTools, p.ToolChoice = []string{"search"}, model.ChooseTool("buy")
		}, "tool_choice.tool"},
		{"an unknown role", func(p *agent.PrepareStep) { p.Messages = append(p.Messages, model.Message{Role: "bot"}) }, "messages[1].role"},
		{"no messages", func(p *agent.PrepareStep) { p.Messages = nil }, "messages"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := serve(t, scripted.Turn{Text: "never"})
			cfg := config(t, srv, agent.Tool{Name: "search"}, agent.Tool{Name: "buy"})
			cfg.Hooks.PrepareStep = func(_ context.Context, p agent.PrepareStep) (agent.PrepareStep, error) {
				tc.edit(&p)
				return p, nil
			}
			_, err := agent.Run(context.Background(), cfg)
			var fe *agent.FieldError
			if !errors.Is(err, agent.ErrHook) || !errors.As(err, &fe) || fe.Field != tc.field {
				t.Errorf("got %v, want ErrHook naming %s", err, tc.field)
			}
			if n := len(srv.Requests()); n != 0 {
				t.Errorf("the model got %d requests, want 0", n)
			}
		})
	}
}

// A tool that is not active in a step is missing there.
func TestInactiveToolIsMissing(t *testing.T) {
	t.Parallel()
	srv := serve(t, scripted.Turn{ToolCalls: []scripted.ToolCall{call("buy", `{}`)}}, scripted.Turn{Text: "done"})
	buy := &counting{}
	cfg := config(t, srv, agent.Tool{Name: "search", Exec: fixed(`[]`)}, agent.Tool{Name: "buy", Exec: buy})
	cfg.Hooks.PrepareStep = func(_ context.Context, p agent.PrepareStep) (agent.PrepareStep, error) {
		p.ActiveTools = []string{"search"}
		return p, nil
	}
	out := run(t, cfg)
	wantError(t, out.Steps[0].Results[0], `there is no tool "buy"; the tools are: search`)
	if buy.n() != 0 {
		t.Errorf("buy ran %d times, want 0", buy.n())
	}
}

func TestPreToolCall(t *testing.T) {
	t.Parallel()
	t.Run("replaces the call", func(t *testing.T) {
		t.Parallel()
		srv := serve(t, scripted.Turn{ToolCalls: []scripted.ToolCall{callID("c1", "search", `{"q": "lamps"}`)}}, scripted.Turn{Text: "done"})
		search := &counting{}
		cfg := config(t, srv, agent.Tool{Name: "search", Parameters: json.RawMessage(objectSchema), Exec: search})
		cfg.Hooks.PreToolCall = func(_ context.Context, _ int, c agent.ToolCall) (agent.PreToolCall, error) {
			c.Arguments = json.RawMessage(`{"q": "desks"}`)
			return agent.PreToolCall{Call: c}, nil
		}
		out := run(t, cfg)
		if search.n() != 1 || string(search.calls[0].Arguments) != `{"q": "desks"}` {
			t.Errorf("got calls %+v, want the replaced one", search.calls)
		}
		// The step records the call as the model made it.
		if got := string(out.Steps[0].ToolCalls[0].Arguments); got != `{"q":"lamps"}` {
			t.Errorf("got step call arguments %s, want the model's", got)
		}
	})
	t.Run("returns a result for a tool without executor", func(t *testing.T) {
		t.Parallel()
		srv := serve(t, scripted.Turn{ToolCalls: []scripted.ToolCall{call("ask_user", `{}`)}}, scripted.Turn{Text: "done"})
		cfg := config(t, srv, agent.Tool{Name: "ask_user", Description: "Asks the user."})
		cfg.Hooks.PreToolCall = func(context.Context, int, agent.ToolCall) (agent.PreToolCall, error) {
			return agent.PreToolCall{Result: &agent.Result{Content: json.RawMessage(`"blue"`)}}, nil
		}
		cfg.Hooks.PostToolCall = func(context.Context, int, agent.ToolCall, agent.Result) (agent.Result, error) {
			t.Error("post-tool-call ran after pre-tool-call returned a result")
			return agent.Result{}, nil
		}
		out := run(t, cfg)
		if r := out.Steps[0].Results[0]; r.IsError || string(r.Content) != `"blue"` {
			t.Errorf("got %s (is_error %v), want the hook's result", r.Content, r.IsError)
		}
		if msgs := toolMessages(t, srv, 1); msgs[0].Content != `"blue"` {
			t.Errorf("got tool message %q, want the hook's result", msgs[0].Content)
		}
	})
	t.Run("another call id fails the turn", func(t *testing.T) {
		t.Parallel()
		srv := serve(t, scripted.Turn{ToolCalls: []scripted.ToolCall{callID("c1", "search", `{}`), callID("c2", "search", `{}`)}})
		search := &counting{}
		cfg := config(t, srv, agent.Tool{Name: "search", Exec: search})
		cfg.Hooks.PreToolCall = func(_ context.Context, _ int, c agent.ToolCall) (agent.PreToolCall, error) {
			if c.ID == "c2" {
				c.ID = "c9"
			}
			return agent.PreToolCall{Call: c}, nil
		}
		out, err := agent.Run(context.Background(), cfg)
		if !errors.Is(err, agent.ErrCallIDMismatch) || !errors.Is(err, agent.ErrHook) || out.StopReason != agent.StopError {
			t.Errorf("got %v, %s; want ErrCallIDMismatch, error", err, out.StopReason)
		}
	})
	t.Run("an error fails the turn", func(t *testing.T) {
		t.Parallel()
		srv := serve(t, scripted.Turn{ToolCalls: []scripted.ToolCall{call("search", `{}`)}})
		cfg := config(t, srv, agent.Tool{Name: "search", Exec: fixed(`1`)})
		boom := errors.New("client gone")
		cfg.Hooks.PreToolCall = func(context.Context, int, agent.ToolCall) (agent.PreToolCall, error) {
			return agent.PreToolCall{}, boom
		}
		if _, err := agent.Run(context.Background(), cfg); !errors.Is(err, boom) || !errors.Is(err, agent.ErrHook) {
			t.Errorf("got %v, want the hook's error wrapped with ErrHook", err)
		}
	})
}

// After a PreToolCall replacement, the history the model sees next holds
// the call as it ran, next to the result those arguments made (not the
// model's own call beside a result it did not make); a call the hook left
// alone stays as the model wrote it.
func TestPreToolCallReplacementInHistory(t *testing.T) {
	t.Parallel()
	srv := serve(t, scripted.Turn{ToolCalls: []scripted.ToolCall{callID("c1", "search", `{"q": "lamps"}`), callID("c2", "search", `{"q":"chairs"}`)}},
		scripted.Turn{Text: "done"})
	cfg := config(t, srv, agent.Tool{Name: "search", Parameters: json.RawMessage(objectSchema), Exec: agent.ExecutorFunc(
		func(_ context.Context, c agent.ToolCall) (agent.Result, error) {
			return agent.Result{Content: c.Arguments}, nil // the result echoes the arguments it ran with
		})})
	cfg.Hooks.PreToolCall = func(_ context.Context, _ int, c agent.ToolCall) (agent.PreToolCall, error) {
		if c.ID == "c1" {
			c.Arguments = json.RawMessage(`{"q":"desks"}`)
		}
		return agent.PreToolCall{Call: c}, nil
	}
	run(t, cfg)
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("got %d requests, want 2", len(reqs))
	}
	var calls []scripted.ChatToolCall
	for _, m := range reqs[1].Chat.Messages {
		if m.Role == "assistant" {
			calls = m.ToolCalls
		}
	}
	want := map[string]string{"c1": `{"q":"desks"}`, "c2": `{"q":"chairs"}`}
	if len(calls) != len(want) {
		t.Fatalf("got %d tool calls in the assistant message, want %d", len(calls), len(want))
	}
	for _, c := range calls {
		if c.Function.Arguments != want[c.ID] {
			t.Errorf("call %s: got arguments %s in the history, want %s", c.ID, c.Function.Arguments, want[c.ID])
		}
	}
	for _, m := range toolMessages(t, srv, 1) {
		if m.Content != want[m.ToolCallID] {
			t.Errorf("call %s: got result %s, want %s", m.ToolCallID, m.Content, want[m.ToolCallID])
		}
	}
}

func TestPostToolCallReplacesResult(t *testing.T) {
	t.Parallel()
	srv := serve(t, scripted.Turn{ToolCalls: []scripted.ToolCall{call("search", `{}`)}}, scripted.Turn{Text: "done"})
	cfg := config(t, srv, agent.Tool{Name: "search", Exec: fixed(`{"price": 10}`)})
	var saw atomic.Value
	cfg.Hooks.PostToolCall = func(_ context.Context, _ int, _ agent.ToolCall, r agent.Result) (agent.Result, error) {
		saw.Store(string(r.Content))
		return agent.Result{Content: json.RawMessage(`{"price": "redacted"}`)}, nil
	}
	var evResult atomic.Value
	cfg.Events.ToolResult = func(_ int, _ agent.ToolCall, r agent.Result) { evResult.Store(string(r.Content)) }
	out := run(t, cfg)
	if saw.Load() != `{"price": 10}` {
		t.Errorf("post-tool-call saw %v, want the tool's result", saw.Load())
	}
	if got := string(out.Steps[0].Results[0].Content); got != `{"price": "redacted"}` || evResult.Load() != got {
		t.Errorf("got result %s (event %v), want the hook's", got, evResult.Load())
	}
	if msgs := toolMessages(t, srv, 1); msgs[0].Content != `{"price": "redacted"}` {
		t.Errorf("the model got %q, want the hook's result", msgs[0].Content)
	}
}

func TestApproval(t *testing.T) {
	t.Parallel()
	for _, approve := range []bool{true, false} {
		name := map[bool]string{true: "approved runs", false: "denied is an error with the reason"}[approve]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := serve(t, scripted.Turn{ToolCalls: []scripted.ToolCall{call("buy", `{}`), call("search", `{}`)}}, scripted.Turn{Text: "done"})
			buy := &counting{}
			cfg := config(t, srv, agent.Tool{Name: "buy", Exec: buy, NeedsApproval: true}, agent.Tool{Name: "search", Exec: fixed(`1`)})
			var asked atomic.Int32
			cfg.Approve = func(_ context.Context, _ int, c agent.ToolCall) (bool, string, error) {
				asked.Add(1)
				if c.Name != "buy" {
					t.Errorf("asked to approve %s, want only buy", c.Name)
				}
				return approve, "too expensive", nil
			}
			out := run(t, cfg)
			if asked.Load() != 1 {
				t.Errorf("asked %d times, want 1", asked.Load())
			}
			if approve {
				if buy.n() != 1 || out.Steps[0].Results[0].IsError {
					t.Errorf("buy ran %d times, result %s; want it run", buy.n(), out.Steps[0].Results[0].Content)
				}
				return
			}
			wantError(t, out.Steps[0].Results[0], "denied: too expensive")
			if buy.n() != 0 {
				t.Errorf("buy ran %d times, want 0", buy.n())
			}
		})
	}
}

func TestApprovalErrorFailsTurn(t *testing.T) {
	t.Parallel()
	srv := serve(t, scripted.Turn{ToolCalls: []scripted.ToolCall{call("buy", `{}`)}})
	cfg := config(t, srv, agent.Tool{Name: "buy", Exec: fixed(`1`), NeedsApproval: true})
	cfg.Approve = func(context.Context, int, agent.ToolCall) (bool, string, error) {
		return false, "", errors.New("stream closed")
	}
	if _, err := agent.Run(context.Background(), cfg); !errors.Is(err, agent.ErrHook) {
		t.Errorf("got %v, want ErrHook", err)
	}
}
