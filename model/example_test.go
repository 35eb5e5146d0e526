package model_test

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/exprd/exprd/model"
)

// A provider as a function: here a canned reply, as a test of an agent
// might use.
func ExampleProviderFunc() {
	p := model.ProviderFunc(func(_ context.Context, req model.Request) (model.Stream, error) {
		return model.NewResponseStream(model.Response{
			Message:      model.Assistant("You said: " + req.Messages[len(req.Messages)-1].Content),
			FinishReason: model.FinishStop,
		}), nil
	})
	resp, err := model.Complete(context.Background(), p, model.Request{Messages: []model.Message{model.User("hello")}})
	if err != nil {
		panic(err)
	}
	fmt.Println(resp.Message.Content, resp.FinishReason)
	// Output: You said: hello stop
}

// Reading a reply as it streams.
func ExampleStream() {
	s := model.NewResponseStream(model.Response{
		Message:      model.Assistant("Let me look.", model.ToolCall{ID: "call_1", Name: "search", Arguments: `{"q":"lamps"}`}),
		FinishReason: model.FinishToolCalls,
	})
	defer s.Close()
	for {
		ev, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			panic(err)
		}
		switch ev := ev.(type) {
		case model.TextDelta:
			fmt.Printf("text %q\n", ev.Text)
		case model.ToolCallDelta:
			fmt.Printf("call %d %s %s %s\n", ev.Index, ev.ID, ev.Name, ev.Arguments)
		case model.Response:
			fmt.Println("finish", ev.FinishReason, "calls", len(ev.Message.ToolCalls))
		}
	}
	// Output:
	// text "Let me look."
	// call 0 call_1 search {"q":"lamps"}
	// finish tool-calls calls 1
}

// Providers by name; a request picks one.
func ExampleRegistry() {
	r := model.NewRegistry()
	_ = r.Register("local", model.ProviderFunc(func(context.Context, model.Request) (model.Stream, error) {
		return model.NewResponseStream(model.Response{Message: model.Assistant("hi")}), nil
	}))
	_, err := r.Get("hosted")
	fmt.Println(err)
	// Output: unknown model provider "hosted" (configured: local)
}
