package grpctransport_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/exprd/exprd/utcp"
)

// A provider's status message is shown only when it is short, one line of
// text (utcp.ProviderMessage), its address taken out; the code always is.
// The whole message stays behind Unwrap, for logs.
func TestStatusMessageShownOnlyWhenShort(t *testing.T) {
	t.Parallel()
	s, p := startProvider(t)
	r := newRegistry(t)
	registerManual(t, r, "m", map[string]map[string]any{"say": s.template(map[string]any{"tool_name": "say"})})
	atLimit := strings.Repeat("m", utcp.MaxProviderMessageChars)
	cases := []struct {
		name, msg string
		want      map[string]any
	}{
		{"short", "the account is closed", map[string]any{"code": "FailedPrecondition", "message": "the account is closed"}},
		{"at the limit", atLimit, map[string]any{"code": "FailedPrecondition", "message": atLimit}},
		{"one past the limit", atLimit + "m", map[string]any{"code": "FailedPrecondition"}},
		{"a stack trace", "panic: boom\ngoroutine 1 [running]:\nmain.main()", map[string]any{"code": "FailedPrecondition"}},
		{"the provider's address", "cannot reach " + p.addr, map[string]any{"code": "FailedPrecondition", "message": "cannot reach [provider]"}},
		{"empty", "", map[string]any{"code": "FailedPrecondition"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.Call(context.Background(), "m.say", map[string]any{"msg": tc.msg})
			te := transportError(t, err)
			if te.Reason != utcp.ReasonStatus || te.Status != 400 || !reflect.DeepEqual(te.Body, tc.want) {
				t.Errorf("got %s %d %v, want status 400 %v", te.Reason, te.Status, te.Body, tc.want)
			}
			if cause := errors.Unwrap(err); tc.msg != "" && (cause == nil || !strings.Contains(cause.Error(), tc.msg)) {
				t.Errorf("Unwrap: got %v, want the whole message", cause)
			}
		})
	}
}

// Plaintext to a remote host is refused with what to do about it, in the
// template's own terms (no Go identifiers).
func TestPlaintextRefusalSaysWhatToDo(t *testing.T) {
	t.Parallel()
	r := newRegistry(t)
	registerManual(t, r, "far", map[string]map[string]any{"add": {"call_template_type": "grpc", "host": "tools.example.com", "port": 443}})
	_, err := r.Call(context.Background(), "far.add", nil)
	want := `utcp: tool "far.add": without TLS only loopback hosts (localhost, 127.0.0.1, ::1) may be reached: set use_ssl: true in the call template to reach this host over TLS`
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
}
