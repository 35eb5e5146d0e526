package openaicompat_test

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/model/openaicompat"
	"github.com/exprd/exprd/model/scripted"
)

// A turn against the demo model, streamed: its text and its tool call
// arrive piece by piece, then the whole Response.
func ExampleProvider_Stream() {
	srv, err := scripted.Demo()
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	p, err := openaicompat.New("demo", openaicompat.ProviderConfig{BaseURL: srv.BaseURL(), Model: "exprd-demo"})
	if err != nil {
		panic(err)
	}
	defer p.Close()

	s, err := p.Stream(context.Background(), model.Request{
		Messages: []model.Message{model.User("Select the five cheapest products.")},
		Tools:    []model.Tool{{Name: "expr", Description: "Runs steps on the UI state."}},
	})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	deltas := 0
	for {
		ev, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			panic(err)
		}
		switch ev := ev.(type) {
		case model.TextDelta, model.ToolCallDelta:
			deltas++
		case model.Response:
			fmt.Println(ev.Message.Content)
			for _, c := range ev.Message.ToolCalls {
				fmt.Println(c.Name, c.Arguments)
			}
			fmt.Println(ev.FinishReason, ev.Usage.TotalTokens, deltas > 2)
		}
	}
	// Output:
	// I'll select the five cheapest products.
	// expr {"steps":[{"set":"scopes.root.selected","expr":"fromPairs(map(sortBy(scopes.root.products.items, .price)[:5], [.id, true]))"}]}
	// tool-calls 470 true
}

// Providers from a config, picked by name.
func ExampleParseConfig() {
	cfg, err := openaicompat.ParseConfig([]byte(`
default: local
providers:
  local:
    base_url: http://127.0.0.1:11434/v1
    model: qwen3:8b
    params: {temperature: 0.2}
`))
	if err != nil {
		panic(err)
	}
	reg, err := openaicompat.NewRegistry(cfg)
	if err != nil {
		panic(err)
	}
	defer reg.Close()
	fmt.Println(reg.Names(), reg.Default())

	_, err = openaicompat.ParseConfig([]byte(`
providers:
  hosted: {base_url: "https://api.openai.com/v1", model: gpt-4.1, api_key: sk-123}
`))
	fmt.Println(err)
	// Output:
	// [local] local
	// model config: providers.hosted.api_key: API keys are read only from the environment: set api_key_env to the variable's name
}
