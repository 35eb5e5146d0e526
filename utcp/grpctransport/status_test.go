package grpctransport_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/exprd/exprd/utcp"
)

// Where the operator lets providers' messages through, a status message is
// shown only when it is short, one line of text (utcp.ProviderMessage),
// with addresses, host names and keys taken out; the code always is. The
// whole message stays behind Unwrap, for logs.
func TestStatusMessageShownOnlyWhenShort(t *testing.T) {
	t.Parallel()
	s, p := startProvider(t)
	r := newRegistry(t, utcp.WithProviderMessages())
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
		{"the provider's address", "cannot reach " + p.addr, map[string]any{"code": "FailedPrecondition", "message": "cannot reach [address]"}},
		{"an internal host and a key", "db-7.internal.corp:5432 refused (key sk-live-XYZ0123)", map[string]any{"code": "FailedPrecondition", "message": "[host] refused (key [secret])"}},
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
// By default a provider's status message reaches no one but the logs.
func TestStatusMessageHiddenByDefault(t *testing.T) {
	t.Parallel()
	s, _ := startProvider(t)
	r := newRegistry(t)
	registerManual(t, r, "m", map[string]map[string]any{"say": s.template(map[string]any{"tool_name": "say"})})
	_, err := r.Call(context.Background(), "m.say", map[string]any{"msg": "the account is closed"})
	te := transportError(t, err)
	if want := map[string]any{"code": "FailedPrecondition"}; !reflect.DeepEqual(te.Body, want) || strings.Contains(err.Error(), "closed") {
		t.Errorf("got %v (%q), want %v and no message", te.Body, err, want)
	}
}

func TestPlaintextRefusalSaysWhatToDo(t *testing.T) {
	t.Parallel()
	r := newRegistry(t)
	registerManual(t, r, "far", map[string]map[string]any{"add": {"call_template_type": "grpc", "host": "tools.example.com", "port": 443}})
	_, err := r.Call(context.Background(), "far.add", nil)
	want := `tool "far.add": without TLS only the hosts the operator lists may be reached: set use_ssl: true in the call template to reach this host over TLS`
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
}
