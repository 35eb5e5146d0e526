package model_test

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/exprd/exprd/model"
)

func TestCompleteDrainsStream(t *testing.T) {
	t.Parallel()
	want := model.Response{
		ID:           "r1",
		Message:      model.Assistant("On it.", model.ToolCall{ID: "c1", Name: "search", Arguments: `{"q":"x"}`}),
		FinishReason: model.FinishToolCalls,
		Usage:        model.Usage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5},
	}
	p := model.ProviderFunc(func(context.Context, model.Request) (model.Stream, error) {
		return model.NewResponseStream(want), nil
	})
	got, err := model.Complete(context.Background(), p, model.Request{Messages: []model.Message{model.User("x")}})
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != want.ID || got.Message.Content != "On it." || got.Message.ToolCalls[0].ID != "c1" || got.Usage != want.Usage {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestResponseStreamEvents(t *testing.T) {
	t.Parallel()
	r := model.Response{Message: model.Assistant("hi",
		model.ToolCall{ID: "a", Name: "f", Arguments: "{}"}, model.ToolCall{ID: "b", Name: "g", Arguments: `{"x":1}`})}
	s := model.NewResponseStream(r)
	var got []model.Event
	for {
		ev, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
	}
	want := []model.Event{
		model.TextDelta{Text: "hi"},
		model.ToolCallDelta{Index: 0, ID: "a", Name: "f", Arguments: "{}"},
		model.ToolCallDelta{Index: 1, ID: "b", Name: "g", Arguments: `{"x":1}`},
	}
	if len(got) != len(want)+1 {
		t.Fatalf("got %d events, want %d", len(got), len(want)+1)
	}
	for i, w := range want {
		if got[i] != w {
			t.Errorf("event %d: got %#v, want %#v", i, got[i], w)
		}
	}
	if _, ok := got[len(got)-1].(model.Response); !ok {
		t.Errorf("last event: got %T, want model.Response", got[len(got)-1])
	}
	if _, err := s.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("Recv after the end: got %v, want io.EOF", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func TestResponseStreamClosedEarly(t *testing.T) {
	t.Parallel()
	s := model.NewResponseStream(model.Response{Message: model.Assistant("hi")})
	_ = s.Close()
	if _, err := s.Recv(); !errors.Is(err, model.ErrStreamClosed) {
		t.Errorf("got %v, want ErrStreamClosed", err)
	}
}

type cutStream struct{ sent bool }

func (s *cutStream) Recv() (model.Event, error) {
	if !s.sent {
		s.sent = true
		return model.TextDelta{Text: "par"}, nil
	}
	return nil, io.EOF
}

func (*cutStream) Close() error { return nil }

func TestCompleteErrors(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	tests := []struct {
		name string
		p    model.ProviderFunc
		want error
	}{
		{"provider fails", func(context.Context, model.Request) (model.Stream, error) { return nil, boom }, boom},
		{"stream ends without a response", func(context.Context, model.Request) (model.Stream, error) { return &cutStream{}, nil }, model.ErrStreamCut},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := model.Complete(context.Background(), tt.p, model.Request{})
			if !errors.Is(err, tt.want) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestHTTPError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err       model.HTTPError
		text      string
		temporary bool
	}{
		{model.HTTPError{StatusCode: 429, Message: "slow down", RetryAfter: 2e9, Attempts: 3},
			"model server answered 429 Too Many Requests: slow down (after 3 attempts) (retry after 2s)", true},
		{model.HTTPError{StatusCode: 503, Attempts: 1}, "model server answered 503 Service Unavailable", true},
		{model.HTTPError{StatusCode: 400, Message: "bad"}, "model server answered 400 Bad Request: bad", false},
		{model.HTTPError{StatusCode: 401}, "model server answered 401 Unauthorized", false},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.text {
			t.Errorf("got %q, want %q", got, tt.text)
		}
		if got := tt.err.Temporary(); got != tt.temporary {
			t.Errorf("%d: got Temporary %v, want %v", tt.err.StatusCode, got, tt.temporary)
		}
	}
}
