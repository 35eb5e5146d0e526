package utcp_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/internal/utcptest"
	"github.com/exprd/exprd/utcp/manual"
)

func TestCallChecksArgumentsFirst(t *testing.T) {
	t.Parallel()
	p := utcptest.NewProvider(t, nil)
	r := utcptest.NewRegistry(t)
	inputs := map[string]any{
		"type":                 "object",
		"properties":           map[string]any{"a": map[string]any{"type": "number"}, "b": map[string]any{"type": "number"}},
		"required":             []any{"a", "b"},
		"additionalProperties": false,
	}
	utcptest.Register(t, r, "math", utcptest.ManualOf("add", inputs, map[string]any{"call_template_type": "http", "http_method": "POST", "url": p.URL + "/add"}))
	cases := []struct {
		name string
		args map[string]any
		want string
	}{
		{"missing b", map[string]any{"a": 1}, "at /: missing property 'b'"},
		{"wrong type", map[string]any{"a": 1, "b": "2"}, "at /b: got string, want number"},
		{"extra property", map[string]any{"a": 1, "b": 2, "c": 3}, "at /: additional properties 'c' not allowed"},
		{"typed Go values are normalised", map[string]any{"a": []int{1}, "b": 2}, "at /a: got array, want number"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.Call(context.Background(), "math.add", tc.args)
			var ia *manual.InvalidArgumentsError
			if !errors.As(err, &ia) {
				t.Fatalf("got %v, want *InvalidArgumentsError", err)
			}
			if got := strings.Join(ia.Problems, "; "); got != tc.want {
				t.Errorf("problems: got %q, want %q", got, tc.want)
			}
		})
	}
	if n := len(p.Requests()); n != 0 {
		t.Errorf("provider saw %d requests, want 0", n)
	}
	if _, err := r.Call(context.Background(), "math.add", map[string]any{"a": int64(2), "b": 3.5}); err != nil {
		t.Errorf("valid call: %v", err)
	}
	if got := p.Requests()[0].URI; got != "/add?a=2&b=3.5" {
		t.Errorf("request: got %s, want /add?a=2&b=3.5", got)
	}
}

func TestNotFoundListsCloseNames(t *testing.T) {
	t.Parallel()
	r := utcptest.NewRegistry(t)
	if _, err := r.Register(context.Background(), "", utcp.FromFile("testdata/manuals/math.json")); err != nil {
		t.Fatal(err)
	}
	utcptest.Register(t, r, "weather", `{"utcp_version": "1", "tools": [{"name": "forecast", "tool_call_template": {"call_template_type": "http", "url": "https://w.example"}}]}`)
	cases := []struct {
		name string
		want []string
	}{
		{"add", []string{"math.add"}},
		{"math.ad", []string{"math.add"}},
		{"weather.forcast", []string{"weather.forecast"}},
		{"nothing.like.it", nil},
		// At most a third of the name's length away: 8 letters more is at
		// it, 9 past it; a name of a MiB is compared with none (at its
		// length times each name's it would take minutes).
		{"weather.forecast" + strings.Repeat("x", 8), []string{"weather.forecast"}},
		{"weather.forecast" + strings.Repeat("x", 9), nil},
		{strings.Repeat("x", 1<<20), nil},
	}
	for _, tc := range cases {
		_, err := r.Call(context.Background(), tc.name, nil)
		var nf *utcp.NotFoundError
		if !errors.As(err, &nf) || !errors.Is(err, utcp.ErrNotFound) {
			t.Fatalf("%s: got %v, want *NotFoundError", tc.name, err)
		}
		if !reflect.DeepEqual(nf.Similar, tc.want) {
			t.Errorf("%s: similar: got %v, want %v", tc.name, nf.Similar, tc.want)
		}
	}
}

func TestLoadDir(t *testing.T) {
	t.Parallel()
	r := utcptest.NewRegistry(t, utcptest.EveryVariable)
	regs, err := r.LoadDir(context.Background(), "testdata/config")
	if err != nil {
		t.Fatalf("LoadDir: %v", err)
	}
	var got []string
	for _, reg := range regs {
		got = append(got, reg.Manual)
	}
	if want := []string{"notes", "pets", "weather"}; !reflect.DeepEqual(got, want) {
		t.Errorf("manuals: got %v, want %v", got, want)
	}
	want := []string{"notes.add_note", "pets.getPet", "weather.current", "weather.forecast"}
	var names []string
	for _, tool := range r.List() {
		names = append(names, tool.Name)
	}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("tools: got %v, want %v", names, want)
	}
}

func TestLoadDirRollsBack(t *testing.T) {
	t.Parallel()
	r := utcptest.NewRegistry(t, utcptest.EveryVariable)
	_, err := r.LoadDir(context.Background(), "testdata/config-bad")
	if err == nil || !strings.Contains(err.Error(), "b_broken.json") || !strings.Contains(err.Error(), "tools[0].tool_call_template.url: missing") {
		t.Fatalf("got %v, want the file and the path named", err)
	}
	if !errors.Is(err, manual.ErrInvalid) {
		t.Errorf("errors.Is(err, ErrInvalidManual): got false, want true")
	}
	if got := r.Manuals(); len(got) != 0 {
		t.Errorf("manuals after a failed LoadDir: got %v, want none", got)
	}
}

// TestConcurrentUse registers, calls, searches and deregisters at once; run
// with -race.
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	p := utcptest.NewProvider(t, nil)
	r := utcptest.NewRegistry(t)
	utcptest.Register(t, r, "stable", utcptest.ManualOf("op", nil, map[string]any{"call_template_type": "http", "url": p.URL}))
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(3)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("m%d", i)
			for range 5 {
				utcptest.Register(t, r, name, utcptest.ManualOf("op", nil, map[string]any{"call_template_type": "http", "url": p.URL}))
				if err := r.Deregister(name); err != nil {
					t.Errorf("Deregister: %v", err)
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range 10 {
				if _, err := r.Call(context.Background(), "stable.op", nil); err != nil {
					t.Errorf("Call: %v", err)
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range 10 {
				_ = r.Search("op", 5)
				_ = r.List()
			}
		}()
	}
	wg.Wait()
	if got := r.Manuals(); !reflect.DeepEqual(got, []string{"stable"}) {
		t.Errorf("manuals: got %v, want [stable]", got)
	}
}
