package userinput_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/exprd/exprd/utcp/userinput"
)

func TestRequestCheckReply(t *testing.T) {
	t.Parallel()
	req, err := userinput.NewRequest("m.s.ask", "who?", []byte(`{"type":"object","properties":{"name":{"type":"string"},"note":{"type":"string"}},"required":["name"]}`))
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
		action  userinput.Action
		content string
		want    error // nil: accepted
	}{
		{"accept", userinput.Accept, `{"name":"Ada"}`, nil},
		{"decline", userinput.Decline, "", nil},
		{"cancel", userinput.Cancel, "", nil},
		{"content at MaxReplyBytes", userinput.Accept, sized(userinput.MaxReplyBytes), nil},
		{"one byte past it", userinput.Accept, sized(userinput.MaxReplyBytes + 1), userinput.ErrReplyTooLarge},
		{"not the schema", userinput.Accept, `{"name":3}`, userinput.ErrInvalidReply},
		{"missing a required property", userinput.Accept, `{}`, userinput.ErrInvalidReply},
		{"not an object", userinput.Accept, `["Ada"]`, userinput.ErrInvalidReply},
		{"not JSON", userinput.Accept, `{name`, userinput.ErrInvalidReply},
		{"content with decline", userinput.Decline, `{"name":"Ada"}`, userinput.ErrInvalidReply},
		{"no action", "", "", userinput.ErrInvalidReply},
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

func TestNewRequest(t *testing.T) {
	t.Parallel()
	schema := `{"type":"object"}`
	cases := []struct {
		name    string
		message string
		schema  string
		want    string // "": accepted
	}{
		{"at MaxRequestBytes", strings.Repeat("x", userinput.MaxRequestBytes-len(schema)), schema, ""},
		{"one byte past it", strings.Repeat("x", userinput.MaxRequestBytes-len(schema)+1), schema, "over the limit of 65536 (userinput.MaxRequestBytes)"},
		{"no schema", "who?", "", ""},
		{"a schema that is not an object", "who?", `[1]`, "its schema must be an object"},
		{"a schema that does not compile", "who?", `{"type":"nope"}`, "its schema"},
		{"a schema that is not JSON", "who?", `{`, "not JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := userinput.NewRequest("m.s.ask", tc.message, []byte(tc.schema))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("got %v, want it accepted", err)
			case tc.want != "" && (!errors.Is(err, userinput.ErrRequest) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an ErrRequest saying %q", err, tc.want)
			}
		})
	}
}
