package grpctransport_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/exprd/exprd/utcp"
)

// A status's message is free text: never shown, whether the operator lets
// providers' messages through or not (then the HTTP status's reason
// phrase is); the code always is. The whole message stays behind Unwrap,
// for logs.
func TestStatusMessageNeverShown(t *testing.T) {
	t.Parallel()
	s, p := startProvider(t)
	for _, show := range []bool{false, true} {
		var opts []utcp.Option
		if show {
			opts = append(opts, utcp.WithProviderMessages())
		}
		r := newRegistry(t, opts...)
		registerManual(t, r, "m", map[string]map[string]any{"say": s.template(map[string]any{"tool_name": "say"})})
		for _, msg := range []string{
			"the account is closed",
			"panic: boom\ngoroutine 1 [running]:\nmain.main()",
			"cannot reach " + p.addr,
			"db-7.internal.corp:5432 refused (key sk-live-XYZ0123)",
			"invalid_argument",
			"",
		} {
			_, err := r.Call(context.Background(), "m.say", map[string]any{"msg": msg})
			te := transportError(t, err)
			want := map[string]any{"code": "FailedPrecondition"}
			if te.Reason != utcp.ReasonStatus || te.Status != 400 || !reflect.DeepEqual(te.Body, want) {
				t.Errorf("%q (messages %v): got %s %d %v, want status 400 %v", msg, show, te.Reason, te.Status, te.Body, want)
			}
			wantText := `tool "m.say": provider answered 400: {"code":"FailedPrecondition"}`
			if show {
				wantText = `tool "m.say": provider answered 400 Bad Request: {"code":"FailedPrecondition"}`
			}
			if err.Error() != wantText {
				t.Errorf("%q (messages %v): got %q, want %q", msg, show, err, wantText)
			}
			if cause := errors.Unwrap(err); msg != "" && (cause == nil || !strings.Contains(cause.Error(), msg)) {
				t.Errorf("Unwrap: got %v, want the whole message", cause)
			}
		}
	}
}

// Plaintext to a remote host is refused with what to do about it, in the
// template's own terms (no Go identifiers).
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
