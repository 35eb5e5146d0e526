package server_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
)

func TestUnaryCall(t *testing.T) {
	t.Parallel()
	c := startServer(t)
	settings := &exprdv1.Settings{Read: true, Functions: []*exprdv1.Function{clientFn("downloadCsv")}}
	tests := []struct {
		name       string
		state      string
		input      string
		wantAnswer string
		wantWrites []string
	}{
		{"writes and read", `{"n": 2}`, `{"steps": [{"set": "scopes.root.n", "expr": "scopes.root.n * 21"}], "read": "scopes.root.n"}`,
			`{"value":42}`, []string{"0 scopes.root.n 42"}},
		{"a confirm is declined", `{}`, `{"steps": [{"set": "scopes.root.a", "expr": "1"}, {"confirm": "ok?", "set": "scopes.root.b", "expr": "2"}]}`,
			`{"declined":true}`, []string{"0 scopes.root.a 1"}},
		{"a client-run function is unknown-reference", `{}`, `{"steps": [{"expr": "downloadCsv({rows: []})"}]}`,
			"unknown-reference", nil},
		{"no state is {}", ``, `{"read": "scopes.root"}`, `{"value":{}}`, nil},
		{"malformed input is for the model", `{}`, `{"steps": [`, "invalid-entry", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp, err := c.Call(context.Background(), &exprdv1.CallRequest{
				Settings: settings, StateJson: tt.state, InputJson: tt.input,
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.GetAnswerJson(); got != tt.wantAnswer && resp.GetReason() != tt.wantAnswer {
				t.Errorf("got answer %s, want %s", got, tt.wantAnswer)
			}
			var writes []string
			for _, w := range resp.GetWrites() {
				writes = append(writes, strings.Join([]string{string(rune('0' + w.GetStep())), w.GetPath(), w.GetValueJson()}, " "))
			}
			if strings.Join(writes, "|") != strings.Join(tt.wantWrites, "|") {
				t.Errorf("got writes %q, want %q", writes, tt.wantWrites)
			}
		})
	}
}

func TestUnaryCallBadRequests(t *testing.T) {
	t.Parallel()
	c := startServer(t)
	tests := []struct {
		name string
		req  *exprdv1.CallRequest
	}{
		{"state not JSON", &exprdv1.CallRequest{StateJson: `{`, InputJson: `{"steps": []}`}},
		{"state not an object", &exprdv1.CallRequest{StateJson: `3`, InputJson: `{"steps": []}`}},
		{"budget above the maximum", &exprdv1.CallRequest{Budgets: &exprdv1.Budgets{MaxIterations: 1 << 40}}},
		{"unknown server function", &exprdv1.CallRequest{Settings: &exprdv1.Settings{Functions: []*exprdv1.Function{{Name: "x", Runner: exprdv1.Function_RUNNER_SERVER}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := c.Call(context.Background(), tt.req)
			if status.Code(err) != codes.InvalidArgument {
				t.Errorf("got %v, want InvalidArgument", err)
			}
		})
	}
	if _, err := c.Describe(context.Background(), &exprdv1.DescribeRequest{Settings: &exprdv1.Settings{Functions: []*exprdv1.Function{{Name: "1bad", Runner: exprdv1.Function_RUNNER_CLIENT}}}}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("Describe with a bad function name: got %v, want InvalidArgument", err)
	}
}
