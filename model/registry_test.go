package model_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/exprd/exprd/model"
)

type closer struct {
	model.ProviderFunc
	closed *int
	err    error
}

func (c closer) Close() error {
	*c.closed++
	return c.err
}

func nop(context.Context, model.Request) (model.Stream, error) { return nil, errors.New("nop") }

func TestRegistry(t *testing.T) {
	t.Parallel()
	r := model.NewRegistry()
	if _, err := r.Get(""); err == nil || !strings.Contains(err.Error(), "no providers are configured") {
		t.Fatalf("empty registry: got %v, want an error saying no providers are configured", err)
	}
	closed := 0
	for _, name := range []string{"local", "hosted"} {
		if err := r.Register(name, closer{model.ProviderFunc(nop), &closed, nil}); err != nil {
			t.Fatalf("Register(%q): %v", name, err)
		}
	}
	if got := r.Default(); got != "local" {
		t.Errorf("got default %q, want %q (the first registered)", got, "local")
	}
	if got := r.Names(); strings.Join(got, ",") != "hosted,local" {
		t.Errorf("got names %v, want [hosted local]", got)
	}
	if _, err := r.Get("hosted"); err != nil {
		t.Errorf("Get(hosted): got %v, want no error", err)
	}
	_, err := r.Get("gpt")
	var unknown *model.UnknownProviderError
	if !errors.As(err, &unknown) || !errors.Is(err, model.ErrUnknownProvider) {
		t.Fatalf("Get(gpt): got %v, want an *UnknownProviderError", err)
	}
	if want := `unknown model provider "gpt" (configured: hosted, local)`; err.Error() != want {
		t.Errorf("got %q, want %q", err.Error(), want)
	}
	if err := r.SetDefault("hosted"); err != nil {
		t.Fatalf("SetDefault: %v", err)
	}
	if err := r.SetDefault("nope"); !errors.Is(err, model.ErrUnknownProvider) {
		t.Errorf("SetDefault(nope): got %v, want ErrUnknownProvider", err)
	}
	for _, tt := range []struct {
		name string
		p    model.Provider
		want string
	}{
		{"", model.ProviderFunc(nop), "empty provider name"},
		{"x", nil, "nil provider"},
		{"local", model.ProviderFunc(nop), "name already taken"},
	} {
		if err := r.Register(tt.name, tt.p); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Register(%q): got %v, want an error saying %q", tt.name, err, tt.want)
		}
	}
	if err := r.Close(); err != nil || closed != 2 {
		t.Errorf("Close: got %v and %d providers closed, want nil and 2", err, closed)
	}
}

func TestRegistryCloseJoinsErrors(t *testing.T) {
	t.Parallel()
	r := model.NewRegistry()
	n := 0
	_ = r.Register("a", closer{model.ProviderFunc(nop), &n, errors.New("boom")})
	_ = r.Register("b", model.ProviderFunc(nop))
	if err := r.Close(); err == nil || !strings.Contains(err.Error(), `close "a": boom`) {
		t.Errorf("got %v, want the error of provider a", err)
	}
}
