package agent_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/exprd/exprd/agent"
	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/model/openaicompat"
	"github.com/exprd/exprd/model/scripted"
)

// A two-step turn: the model calls a client-run tool, reads its result and
// answers.
func ExampleRun() {
	srv, err := scripted.Start(scripted.Script{Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{{ID: "c1", Name: "budget", Arguments: json.RawMessage(`{}`)}}},
		{Text: "Your budget is 30."},
	}})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	p, err := openaicompat.New("scripted", openaicompat.ProviderConfig{BaseURL: srv.BaseURL(), Model: "any"})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	budget := agent.ExecutorFunc(func(context.Context, agent.ToolCall) (agent.Result, error) {
		return agent.Result{Content: json.RawMessage(`{"budget":30}`)}, nil
	})
	out, err := agent.Run(context.Background(), agent.Config{
		Provider: p,
		Messages: []model.Message{model.User("What can I spend?")},
		Tools:    []agent.Tool{{Name: "budget", Description: "The user's budget.", Exec: budget}},
		Events: agent.Events{
			ToolResult: func(step int, c agent.ToolCall, r agent.Result) {
				fmt.Printf("step %d: %s → %s\n", step, c.Name, r.Content)
			},
		},
	})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s after %d steps: %s\n", out.StopReason, len(out.Steps), out.Text)
	// Output:
	// step 0: budget → {"budget":30}
	// completed after 2 steps: Your budget is 30.
}
