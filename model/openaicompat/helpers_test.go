package openaicompat_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/model/openaicompat"
	"github.com/exprd/exprd/model/scripted"
)

// serve starts a scripted server until the test ends.
func serve(t *testing.T, turns ...scripted.Turn) *scripted.Server {
	t.Helper()
	srv, err := scripted.Start(scripted.Script{Turns: turns})
	if err != nil {
		t.Fatalf("scripted.Start: %v", err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// provider is a provider for srv; edit changes its settings first.
func provider(t *testing.T, srv *scripted.Server, edit func(*openaicompat.ProviderConfig), opts ...openaicompat.Option) *openaicompat.Provider {
	t.Helper()
	cfg := openaicompat.ProviderConfig{BaseURL: srv.BaseURL(), Model: "test-model"}
	if edit != nil {
		edit(&cfg)
	}
	p, err := openaicompat.New("test", cfg, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

var ask = model.Request{Messages: []model.Message{model.User("Which lamps are cheap?")}}

// drain reads a stream to its end: its events before the Response, the
// Response, and the error that ended it (nil after a Response and io.EOF).
func drain(t *testing.T, s model.Stream) ([]model.Event, model.Response, error) {
	t.Helper()
	defer s.Close()
	var evs []model.Event
	var resp model.Response
	got := false
	for {
		ev, err := s.Recv()
		if errors.Is(err, io.EOF) {
			if !got {
				t.Fatal("got io.EOF without a Response")
			}
			return evs, resp, nil
		}
		if err != nil {
			return evs, resp, err
		}
		if got {
			t.Fatalf("got event %#v after the Response", ev)
		}
		if r, ok := ev.(model.Response); ok {
			resp, got = r, true
			continue
		}
		evs = append(evs, ev)
	}
}

// turn runs one streamed turn to its end.
func turn(t *testing.T, p model.Provider, req model.Request) ([]model.Event, model.Response, error) {
	t.Helper()
	s, err := p.Stream(context.Background(), req)
	if err != nil {
		return nil, model.Response{}, err
	}
	return drain(t, s)
}

// waitFor polls cond until it holds or a few seconds pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func ptr[T any](v T) *T { return &v }
