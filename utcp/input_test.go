package utcp_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/exprd/exprd/utcp"
)

func TestInputRequestCheckReply(t *testing.T) {
	t.Parallel()
	req, err := utcp.NewInputRequest("m.s.ask", "who?", []byte(`{"type":"object","properties":{"name":{"type":"string"},"note":{"type":"string"}},"required":["name"]}`))
	if err != nil {
		t.Fatal(err)
	}
	// content of exactly n bytes: {"name":"x","note":"..."}
	sized := func(n int) string {
		const head = `{"name":"x","note":""}`
		return `{"name":"x","note":"` + strings.Repeat("y", n-len(head)) + `"}`
	}
	cases := []struct {
		name    string
		action  utcp.InputAction
		content string
		want    error // nil: accepted
	}{
		{"accept", utcp.InputAccept, `{"name":"Ada"}`, nil},
		{"decline", utcp.InputDecline, "", nil},
		{"cancel", utcp.InputCancel, "", nil},
		{"content at MaxInputReplyBytes", utcp.InputAccept, sized(utcp.MaxInputReplyBytes), nil},
		{"one byte past it", utcp.InputAccept, sized(utcp.MaxInputReplyBytes + 1), utcp.ErrReplyTooLarge},
		{"not the schema", utcp.InputAccept, `{"name":3}`, utcp.ErrInvalidReply},
		{"missing a required property", utcp.InputAccept, `{}`, utcp.ErrInvalidReply},
		{"not an object", utcp.InputAccept, `["Ada"]`, utcp.ErrInvalidReply},
		{"not JSON", utcp.InputAccept, `{name`, utcp.ErrInvalidReply},
		{"content with decline", utcp.InputDecline, `{"name":"Ada"}`, utcp.ErrInvalidReply},
		{"no action", "", "", utcp.ErrInvalidReply},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := req.CheckReply(tc.action, []byte(tc.content))
			if !errors.Is(err, tc.want) || (tc.want == nil && r.Action != tc.action) {
				t.Fatalf("got %+v, %v; want %v", r, err, tc.want)
			}
		})
	}
}

func TestNewInputRequest(t *testing.T) {
	t.Parallel()
	schema := `{"type":"object"}`
	cases := []struct {
		name    string
		message string
		schema  string
		want    string // "": accepted
	}{
		{"at MaxInputRequestBytes", strings.Repeat("x", utcp.MaxInputRequestBytes-len(schema)), schema, ""},
		{"one byte past it", strings.Repeat("x", utcp.MaxInputRequestBytes-len(schema)+1), schema, "over the limit of 65536 (utcp.MaxInputRequestBytes)"},
		{"no schema", "who?", "", ""},
		{"a schema that is not an object", "who?", `[1]`, "its schema must be an object"},
		{"a schema that does not compile", "who?", `{"type":"nope"}`, "its schema"},
		{"a schema that is not JSON", "who?", `{`, "not JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := utcp.NewInputRequest("m.s.ask", tc.message, []byte(tc.schema))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("got %v, want it accepted", err)
			case tc.want != "" && (!errors.Is(err, utcp.ErrInputRequest) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an ErrInputRequest saying %q", err, tc.want)
			}
		})
	}
}
