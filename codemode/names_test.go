package codemode_test

import (
	"context"
	"testing"

	"github.com/exprd/exprd/codemode"
	"github.com/exprd/exprd/demo/providers"
	"github.com/exprd/exprd/internal/egress"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/utcpall"
)

// A manual registered as "my-math" holds my_math.* tools. The whitelist,
// the calls and the approvals take either spelling, as the registry does.
func TestToolNamesEitherSpelling(t *testing.T) {
	t.Parallel()
	m, err := providers.StartMath()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	reg, err := utcpall.New(utcp.WithEgress(egress.MustParse("loopback")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	if _, err := reg.Register(context.Background(), "my-math", utcp.FromURL(m.URL()+"/utcp")); err != nil {
		t.Fatal(err)
	}
	rt, err := codemode.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, code string
		tools      []string
		approve    []string
		wantErr    bool
	}{
		{"as registered", `codemode.CallTool("my-math.add", {"a": 1, "b": 2})`, []string{"my-math.add"}, nil, false},
		{"normalised in the code", `codemode.CallTool("my_math.add", {"a": 1, "b": 2})`, []string{"my-math.add"}, nil, false},
		{"normalised in the whitelist", `codemode.CallTool("my-math.add", {"a": 1, "b": 2})`, []string{"my_math.add"}, nil, false},
		{"computed name", `codemode.CallTool("my-" + "math.add", {"a": 1, "b": 2})`, []string{"my_math.add"}, nil, false},
		{"approval in the other spelling", `codemode.CallTool("my-math.add", {"a": 1, "b": 2})`, []string{"my_math.add"}, []string{"my_math.add"}, true},
		{"another tool", `codemode.CallTool("my-math.multiply", {"a": 1, "b": 2})`, []string{"my-math.add"}, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			opts := codemode.RunOptions{Tools: tc.tools, NeedsApproval: tc.approve}
			if tc.approve != nil {
				opts.Approve = func(context.Context, string, map[string]any) (bool, error) { return false, nil }
			}
			_, err := rt.Run(context.Background(), tc.code, opts)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Run: %v, want an error: %v", err, tc.wantErr)
			}
		})
	}
}
