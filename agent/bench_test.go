package agent_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/exprd/exprd/agent"
	"github.com/exprd/exprd/internal/testkit/benchpair"
	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/model/scripted"
)

// BenchmarkTwoStepTurn measures the loop's own overhead: a two-step turn
// (two tool calls that return at once, then an answer) against the
// scripted server, run by agent.Run ("agent") and by a plain Go loop
// calling model.Complete and the tools directly ("plain"). The difference
// per op, halved, is the loop's cost per step.
func BenchmarkTwoStepTurn(b *testing.B) {
	srv := serveScript(b, scripted.Script{Loop: true, Turns: []scripted.Turn{
		{Text: "Let me look.", ToolCalls: []scripted.ToolCall{callID("c1", "search", `{"q": "lamps"}`), callID("c2", "search", `{"q": "desks"}`)},
			Usage: &scripted.Usage{PromptTokens: 20, CompletionTokens: 9, TotalTokens: 29}},
		{Text: "Two lamps and a desk.", Usage: &scripted.Usage{PromptTokens: 40, CompletionTokens: 6, TotalTokens: 46}},
	}})
	p := provider(b, srv)
	exec := fixed(`{"items": ["p01", "p02"]}`)
	tool := agent.Tool{Name: "search", Description: "Searches products.", Parameters: json.RawMessage(objectSchema), Exec: exec}
	messages := []model.Message{model.User("Which lamps are cheap?")}
	ctx := context.Background()

	cfg := agent.Config{Provider: p, Messages: messages, Tools: []agent.Tool{tool}}
	viaAgent := func(b *testing.B) {
		out, err := agent.Run(ctx, cfg)
		if err != nil || len(out.Steps) != 2 {
			b.Fatalf("got %d steps, %v", len(out.Steps), err)
		}
	}
	tools := []model.Tool{{Name: tool.Name, Description: tool.Description, Parameters: tool.Parameters}}
	plain := func(b *testing.B) {
		{
			msgs := append([]model.Message(nil), messages...)
			steps := 0
			for {
				resp, err := model.Complete(ctx, p, model.Request{Messages: msgs, Tools: tools})
				if err != nil {
					b.Fatal(err)
				}
				steps++
				msgs = append(msgs, resp.Message)
				if len(resp.Message.ToolCalls) == 0 {
					break
				}
				for _, c := range resp.Message.ToolCalls {
					r, err := exec.Execute(ctx, agent.ToolCall{ID: c.ID, Name: c.Name, Arguments: json.RawMessage(c.Arguments)})
					if err != nil {
						b.Fatal(err)
					}
					msgs = append(msgs, model.ToolResult(c.ID, string(r.Content)))
				}
			}
			if steps != 2 {
				b.Fatalf("got %d steps, want 2", steps)
			}
		}
	}
	b.Run("agent", func(b *testing.B) {
		for b.Loop() {
			viaAgent(b)
		}
	})
	b.Run("plain", func(b *testing.B) {
		for b.Loop() {
			plain(b)
		}
	})
	// The two, one after the other in each iteration, so that the load of
	// a shared machine falls on both alike: "ratio" is agent/plain.
	b.Run("interleaved", func(b *testing.B) { benchpair.Interleave(b, viaAgent, plain) })
}
