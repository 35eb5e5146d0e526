package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/exprd/exprd/agent"
	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/model/openaicompat"
	"github.com/exprd/exprd/model/scripted"
)

// serve starts a scripted model server for the turns until the test ends.
func serve(t testing.TB, turns ...scripted.Turn) *scripted.Server {
	t.Helper()
	return serveScript(t, scripted.Script{Turns: turns})
}

func serveScript(t testing.TB, s scripted.Script) *scripted.Server {
	t.Helper()
	srv, err := scripted.Start(s)
	if err != nil {
		t.Fatalf("scripted.Start: %v", err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// provider is an OpenAI-compatible provider for srv, without retries.
func provider(t testing.TB, srv *scripted.Server) *openaicompat.Provider {
	t.Helper()
	zero := 0
	p, err := openaicompat.New("test", openaicompat.ProviderConfig{BaseURL: srv.BaseURL(), Model: "test-model", MaxRetries: &zero})
	if err != nil {
		t.Fatalf("openaicompat.New: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// config is a turn asking question of srv's model with tools.
func config(t testing.TB, srv *scripted.Server, tools ...agent.Tool) agent.Config {
	t.Helper()
	return agent.Config{Provider: provider(t, srv), Messages: []model.Message{model.User("question")}, Tools: tools}
}

func call(name, args string) scripted.ToolCall {
	return scripted.ToolCall{Name: name, Arguments: json.RawMessage(args)}
}

func callID(id, name, args string) scripted.ToolCall {
	return scripted.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
}

// fixed is an executor answering content.
func fixed(content string) agent.Executor {
	return agent.ExecutorFunc(func(context.Context, agent.ToolCall) (agent.Result, error) {
		return agent.Result{Content: json.RawMessage(content)}, nil
	})
}

// counting is an executor answering content that counts its calls.
type counting struct {
	mu    sync.Mutex
	calls []agent.ToolCall
	reply string
}

func (c *counting) Execute(_ context.Context, call agent.ToolCall) (agent.Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, call)
	reply := c.reply
	if reply == "" {
		reply = `{"ok":true}`
	}
	return agent.Result{Content: json.RawMessage(reply)}, nil
}

func (c *counting) n() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.calls)
}

// toolMessages returns the tool messages of the request n srv got.
func toolMessages(t *testing.T, srv *scripted.Server, n int) []scripted.ChatMessage {
	t.Helper()
	reqs := srv.Requests()
	if len(reqs) <= n {
		t.Fatalf("got %d requests, want more than %d", len(reqs), n)
	}
	var out []scripted.ChatMessage
	for _, m := range reqs[n].Chat.Messages {
		if m.Role == "tool" {
			out = append(out, m)
		}
	}
	return out
}

// wantError checks r is an error result whose message contains want.
func wantError(t *testing.T, r agent.Result, want string) {
	t.Helper()
	var body struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(r.Content, &body); err != nil || !r.IsError {
		t.Fatalf("got result %s (is_error %v), want an error result", r.Content, r.IsError)
	}
	if !strings.Contains(body.Error, want) {
		t.Errorf("got error %q, want it to contain %q", body.Error, want)
	}
}

func run(t *testing.T, cfg agent.Config) agent.Outcome {
	t.Helper()
	out, err := agent.Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return out
}

const objectSchema = `{"type":"object","required":["q"],"properties":{"q":{"type":"string"}},"additionalProperties":false}`
