package utcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/internal/utcptest"
	"github.com/exprd/exprd/utcp/manual"
	"github.com/exprd/exprd/utcp/vars"
)

// toolNames lists the registry's tools by full name.
func toolNames(r *utcp.Registry) []string {
	var names []string
	for _, t := range r.List() {
		names = append(names, t.Name)
	}
	return names
}

// A refused Replace used to leave no manual at all: the old one was
// deregistered before the new one was read. Now the old manual and its
// tools stay exactly as they were, whatever fails.
func TestReplaceRefusedKeepsOldManual(t *testing.T) {
	t.Parallel()
	p := utcptest.NewProvider(t, nil)
	down := utcptest.NewProvider(t, nil)
	down.Close()
	v1 := utcptest.ManualOf("forecast", nil, map[string]any{"call_template_type": "http", "url": p.URL + "/v1"})
	cases := []struct {
		name string
		src  utcp.Source
		want error
	}{
		{"a tool without url", utcp.FromText(`{"utcp_version": "1.0.1", "tools": [{"name": "forecast", "tool_call_template": {"call_template_type": "http"}}]}`).AllowProtocols("http"), manual.ErrInvalid},
		{"not JSON", utcp.FromText(`{"utcp_version": `).AllowProtocols("http"), manual.ErrInvalid},
		{"every tool filtered out", utcp.FromText(v1), manual.ErrInvalid},
		{"a missing variable", utcp.FromURL("http://127.0.0.1:1/${NOPE}"), vars.ErrNotFound},
		{"the provider is down", utcp.FromURL(down.URL + "/utcp"), utcp.ErrTransport},
		{"plain http to a remote host", utcp.FromURL("http://tools.example.com/utcp"), utcp.ErrTransport},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := utcptest.NewRegistry(t)
			utcptest.Register(t, r, "weather", v1)
			before, _ := r.Tool("weather.forecast")
			_, err := r.Replace(context.Background(), "weather", tc.src)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Replace: got %v, want %v", err, tc.want)
			}
			if got, want := toolNames(r), []string{"weather.forecast"}; !reflect.DeepEqual(got, want) {
				t.Errorf("tools after a refused replace: got %v, want %v", got, want)
			}
			if after, _ := r.Tool("weather.forecast"); after != before {
				t.Errorf("the tool changed: got %p, want the old one %p", after, before)
			}
			if _, err := r.Call(context.Background(), "weather.forecast", nil); err != nil {
				t.Errorf("calling the old tool: %v", err)
			}
			if got := r.Manuals(); !reflect.DeepEqual(got, []string{"weather"}) {
				t.Errorf("manuals: got %v, want [weather]", got)
			}
		})
	}
}

func TestReplace(t *testing.T) {
	t.Parallel()
	p := utcptest.NewProvider(t, nil)
	tmpl := map[string]any{"call_template_type": "http", "url": p.URL}
	r := utcptest.NewRegistry(t)
	// With no manual of that name, Replace registers it.
	reg, err := r.Replace(context.Background(), "my-api", utcp.FromText(utcptest.ManualOf("old", nil, tmpl)).AllowProtocols("http"))
	if err != nil || reg.Manual != "my_api" {
		t.Fatalf("Replace of a new name: got %v, %v; want my_api registered", reg, err)
	}
	// The name as given finds the manual registered under its normal form.
	reg, err = r.Replace(context.Background(), "my-api", utcp.FromText(utcptest.ManualOf("new", nil, tmpl)).AllowProtocols("http"))
	if err != nil {
		t.Fatalf("Replace: %v", err)
	}
	if want := []string{"my_api.new"}; !reflect.DeepEqual(reg.Tools, want) || !reflect.DeepEqual(toolNames(r), want) {
		t.Errorf("tools: got %v (registry %v), want %v", reg.Tools, toolNames(r), want)
	}
	if _, err := r.Tool("my_api.old"); !errors.Is(err, utcp.ErrNotFound) {
		t.Errorf("the old tool: got %v, want ErrNotFound", err)
	}
	// Register still refuses the name.
	_, err = r.Register(context.Background(), "my-api", utcp.FromText(utcptest.ManualOf("x", nil, tmpl)).AllowProtocols("http"))
	if !errors.Is(err, utcp.ErrAlreadyExists) {
		t.Errorf("Register of a taken name: got %v, want ErrAlreadyExists", err)
	}
}

// Readers during replacements see the old manual or the new one, whole:
// never neither, never a mix. Run with -race.
func TestReplaceConcurrentReaders(t *testing.T) {
	t.Parallel()
	p := utcptest.NewProvider(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	})
	call := func(name string) map[string]any {
		return map[string]any{"name": name, "description": "Looks up the weather.", "tool_call_template": map[string]any{"call_template_type": "http", "url": p.URL}}
	}
	v1 := mustManual(t, []any{call("a"), call("b")})
	v2 := mustManual(t, []any{call("a"), call("b"), call("c")})
	bad := `{"utcp_version": "1.0.1", "tools": [{"name": "a", "tool_call_template": {"call_template_type": "http"}}]}`
	sets := [][]string{{"w.a", "w.b"}, {"w.a", "w.b", "w.c"}}
	r := utcptest.NewRegistry(t)
	utcptest.Register(t, r, "w", v1)

	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer stop.Store(true)
		for i := range 30 {
			m := []string{v2, bad, v1}[i%3]
			_, err := r.Replace(context.Background(), "w", utcp.FromText(m).AllowProtocols("http"))
			if (m == bad) != (err != nil) {
				t.Errorf("Replace %d: got %v", i, err)
			}
		}
	}()
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				got := toolNames(r)
				if !slices.ContainsFunc(sets, func(s []string) bool { return slices.Equal(s, got) }) {
					t.Errorf("List during a replace: got %v, want one of %v", got, sets)
					return
				}
				if _, err := r.Call(context.Background(), "w.a", nil); err != nil {
					t.Errorf("Call during a replace: %v", err)
					return
				}
				if n := len(r.Search("weather", 10)); n != 2 && n != 3 {
					t.Errorf("Search during a replace: got %d tools, want 2 or 3", n)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// A manual's name is accepted back in the form it was registered under:
// `my-api` finds `my_api` everywhere a manual's name is taken.
func TestManualNameNormalisedEverywhere(t *testing.T) {
	t.Parallel()
	p := utcptest.NewProvider(t, nil)
	r := utcptest.NewRegistry(t)
	reg := utcptest.Register(t, r, "my-api", utcptest.ManualOf("get", nil, map[string]any{"call_template_type": "http", "url": p.URL}))
	if reg.Manual != "my_api" || !reflect.DeepEqual(reg.Tools, []string{"my_api.get"}) {
		t.Fatalf("registration: got %s %v, want my_api [my_api.get]", reg.Manual, reg.Tools)
	}
	for _, name := range []string{"my_api.get", "my-api.get", "my api.get"} {
		tool, err := r.Tool(name)
		if err != nil || tool.Name != "my_api.get" {
			t.Errorf("Tool(%q): got %v, %v; want my_api.get", name, tool, err)
		}
		if _, err := r.Call(context.Background(), name, nil); err != nil {
			t.Errorf("Call(%q): %v", name, err)
		}
	}
	for in, want := range map[string]string{"my-api.get": "my_api.get", "my api.a.b": "my_api.a.b", "get": "get", "": "", "my_api.get": "my_api.get", "é.get": "_.get"} {
		if got := utcp.NormalizeToolName(in); got != want {
			t.Errorf("NormalizeToolName(%q): got %q, want %q", in, got, want)
		}
	}

	if _, err := r.Tool("my-api.nope"); !errors.Is(err, utcp.ErrNotFound) {
		t.Errorf("an unknown tool of the manual: got %v, want ErrNotFound", err)
	}
	removed, err := r.Remove("my-api")
	if err != nil || removed.Manual != "my_api" || !reflect.DeepEqual(removed.Tools, []string{"my_api.get"}) {
		t.Fatalf("Remove(my-api): got %v, %v; want my_api [my_api.get]", removed, err)
	}
	var nf *utcp.NotFoundError
	if err := r.Deregister("my-api"); !errors.As(err, &nf) || nf.Name != "my_api" || nf.Kind != "manual" {
		t.Errorf("Deregister twice: got %v, want a NotFoundError for manual my_api", err)
	}
}

func mustManual(t *testing.T, tools []any) string {
	t.Helper()
	raw, err := json.Marshal(map[string]any{"utcp_version": "1.0.1", "tools": tools})
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// Every tool call normalises its tool's name: a name already normal costs
// nothing.
func TestNormalizeToolNameAllocs(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = utcp.NormalizeToolName("my_api.get") }); n != 0 {
		t.Errorf("NormalizeToolName of a normal name: %v allocations, want 0", n)
	}
}
