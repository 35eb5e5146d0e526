package toolscope_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/manual"
	"github.com/exprd/exprd/utcp/toolscope"
)

func TestViewSees(t *testing.T) {
	t.Parallel()
	names := []string{"math.add", "math.multiply", "catalog.get", "catalog.get_many", "catalog.search", "my_api.get", "mathx.add"}
	tests := []struct {
		name   string
		scopes []string
		all    bool
		want   []string
	}{
		{"no scopes", nil, true, names},
		{"no tools: scope", []string{"mcp", "codemode", "*"}, true, names},
		{"a manual", []string{"codemode", "tools:math"}, false, []string{"math.add", "math.multiply"}},
		{"a manual, as registered", []string{"tools:my-api"}, false, []string{"my_api.get"}},
		{"a tool", []string{"tools:catalog.get"}, false, []string{"catalog.get"}},
		{"a prefix", []string{"tools:catalog.get*"}, false, []string{"catalog.get", "catalog.get_many"}},
		{"a prefix across manuals", []string{"tools:math*"}, false, []string{"math.add", "math.multiply", "mathx.add"}},
		{"everything", []string{"tools:*"}, false, names},
		{"two scopes", []string{"tools:math", "tools:catalog.search"}, false, []string{"math.add", "math.multiply", "catalog.search"}},
		{"an empty pattern", []string{"tools:"}, false, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := toolscope.Of(tt.scopes)
			if v.All() != tt.all {
				t.Errorf("All() = %v, want %v", v.All(), tt.all)
			}
			if got := v.Filter(names); !slices.Equal(got, tt.want) {
				t.Errorf("Filter = %v, want %v", got, tt.want)
			}
			if (v.Func() == nil) != tt.all {
				t.Errorf("Func() is nil: %v, want %v", v.Func() == nil, tt.all)
			}
			if got := v.Sees("my-api.get"); got != slices.Contains(tt.want, "my_api.get") {
				t.Errorf(`Sees("my-api.get") = %v: the name is matched as the registry normalises it`, got)
			}
		})
	}
}

func TestViewInContext(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if !toolscope.FromContext(ctx).All() {
		t.Error("a context without a view sees only some tools; want all")
	}
	if got := toolscope.WithView(ctx, toolscope.Of(nil)); got != ctx {
		t.Error("carrying a view of every tool made a new context")
	}
	v := toolscope.FromContext(toolscope.WithView(ctx, toolscope.Of([]string{"tools:math"})))
	if v.All() || !v.Sees("math.add") || v.Sees("catalog.get") {
		t.Errorf("the view carried is not tools:math's")
	}
}

type fakeRegistry map[string]bool

func (r fakeRegistry) Tool(name string) (*manual.Tool, error) {
	if r[name] {
		return &manual.Tool{Name: name}, nil
	}
	return nil, &utcp.NotFoundError{Kind: "tool", Name: name, Similar: []string{"math.add", "catalog.get"}}
}

func TestViewTool(t *testing.T) {
	t.Parallel()
	reg := fakeRegistry{"math.add": true, "catalog.get": true}
	v := toolscope.Of([]string{"tools:math"})
	if _, err := v.Tool(reg, "math.add"); err != nil {
		t.Errorf("a tool it sees: %v", err)
	}
	for _, name := range []string{"catalog.get", "math.ad"} {
		_, err := v.Tool(reg, name)
		var nf *utcp.NotFoundError
		if !errors.As(err, &nf) || !errors.Is(err, utcp.ErrNotFound) || nf.Name != name {
			t.Fatalf("%s: got %v, want a NotFoundError naming it", name, err)
		}
		if slices.Contains(nf.Similar, "catalog.get") {
			t.Errorf("%s: the error suggests catalog.get, which the view does not see: %v", name, err)
		}
	}
	_, err := toolscope.Of(nil).Tool(reg, "math.ad")
	var nf *utcp.NotFoundError
	if !errors.As(err, &nf) || len(nf.Similar) != 2 {
		t.Errorf("a view of every tool changed the registry's error: %v", err)
	}
}
