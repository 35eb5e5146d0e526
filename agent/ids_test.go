package agent_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/exprd/exprd/agent"
	"github.com/exprd/exprd/model"
)

// A tool call the model sent without an id gets one, so that its result
// can name it (a regression test: the next request used to be refused).
func TestCallsWithoutIDGetOne(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen [][]model.Message
	p := model.ProviderFunc(func(_ context.Context, req model.Request) (model.Stream, error) {
		mu.Lock()
		seen = append(seen, req.Messages)
		n := len(seen)
		mu.Unlock()
		if n == 1 {
			return model.NewResponseStream(model.Response{FinishReason: model.FinishToolCalls, Message: model.Assistant("",
				model.ToolCall{Name: "echo", Arguments: `{"x": 1}`})}), nil
		}
		return model.NewResponseStream(model.Response{FinishReason: model.FinishStop, Message: model.Assistant("done")}), nil
	})
	echo := agent.ExecutorFunc(func(_ context.Context, c agent.ToolCall) (agent.Result, error) {
		return agent.Result{Content: json.RawMessage(c.Arguments)}, nil
	})
	out, err := agent.Run(context.Background(), agent.Config{Provider: p, Messages: []model.Message{model.User("go")},
		Tools: []agent.Tool{{Name: "echo", Exec: echo}}})
	if err != nil {
		t.Fatal(err)
	}
	if out.Text != "done" || len(out.Steps) != 2 {
		t.Fatalf("got %q after %d steps, want done after 2", out.Text, len(out.Steps))
	}
	id := out.Steps[0].ToolCalls[0].ID
	last := seen[1][len(seen[1])-1]
	if id == "" || last.Role != model.RoleTool || last.ToolCallID != id {
		t.Errorf("got call id %q and last message %+v, want a tool result naming the id", id, last)
	}
}
