package utcp_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/internal/utcptest"
)

// A provider's error body used to be relayed to the model whole (up to
// 1,024 characters): HTML pages, stack traces, internal host names; then
// its message, through a redactor that missed much. Now an error shows the
// status and, where the operator opted in, its reason phrase and the
// error type and code an allowlist keeps: never free text.
func TestProviderErrorShowsOnlyTypeAndCode(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, ctype, body string
		want              any    // TransportError.Body
		msg               string // err.Error() after `provider answered 422 Unprocessable Entity`
	}{
		{"openai", "application/json", `{"error":{"message":"amount must be positive","type":"invalid_request_error","code":"amount_invalid"}}`,
			map[string]any{"type": "invalid_request_error", "code": "amount_invalid"}, `: {"code":"amount_invalid","type":"invalid_request_error"}`},
		{"top-level type and code", "application/json", `{"type":"validation","code":"E11000","trace":"at Pay.charge(Pay.java:42)"}`,
			map[string]any{"type": "validation", "code": "E11000"}, `: {"code":"E11000","type":"validation"}`},
		{"an error code string", "application/json", `{"error":"invalid_amount","error_description":"amount must be positive"}`,
			map[string]any{"code": "invalid_amount"}, `: {"code":"invalid_amount"}`},
		{"an error message string", "application/json", `{"error":"amount must be positive"}`, nil, ""},
		{"message field", "application/json", `{"message":"no such city","code":17}`, map[string]any{"code": "17"}, `: {"code":"17"}`},
		{"problem detail", "application/problem+json", `{"type":"https://example.com/probs/city","title":"Invalid","detail":"city is required"}`, nil, ""},
		{"a key-like type", "application/json", `{"type":"AKIAIOSFODNN7EXAMPLE"}`, nil, ""},
		{"several lines", "application/json", `{"error":"boom\n\tat db.query(db.go:12)"}`, nil, ""},
		{"plain text", "text/plain", "internal trouble at db-7.internal:5432", nil, ""},
		{"html", "text/html", "<html><body><h1>502 Bad Gateway</h1>nginx</body></html>", nil, ""},
		{"an array", "application/json", `["boom"]`, nil, ""},
		{"empty", "application/json", "", nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := utcptest.NewProvider(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.ctype)
				w.WriteHeader(http.StatusUnprocessableEntity)
				_, _ = w.Write([]byte(tc.body))
			})
			r := utcptest.NewRegistry(t, utcp.WithProviderMessages())
			utcptest.Register(t, r, "pay", utcptest.ManualOf("charge", nil, map[string]any{"call_template_type": "http", "url": p.URL}))
			_, err := r.Call(context.Background(), "pay.charge", nil)
			var te *utcp.TransportError
			if !errors.As(err, &te) || te.Reason != utcp.ReasonStatus || te.Status != 422 {
				t.Fatalf("got %v, want a status error 422", err)
			}
			if !reflect.DeepEqual(te.Body, tc.want) {
				t.Errorf("body: got %#v, want %#v", te.Body, tc.want)
			}
			if got, want := err.Error(), `tool "pay.charge": provider answered 422 Unprocessable Entity`+tc.msg; got != want {
				t.Errorf("message: got %q, want %q", got, want)
			}
			// The body itself stays behind Unwrap, for logs.
			if cause := errors.Unwrap(err); tc.body != "" && (cause == nil || !strings.Contains(cause.Error(), tc.body[:min(len(tc.body), 20)])) {
				t.Errorf("Unwrap: got %v, want the provider's body", cause)
			}
		})
	}
}

// By default an error shows the status code alone; opted in, its reason
// phrase and a safe type, never the message's hosts, addresses or keys.
func TestProviderErrorShowsNoMessage(t *testing.T) {
	t.Parallel()
	p := utcptest.NewProvider(t, func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.Host)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte(`{"error":{"type":"upstream_error","message":"upstream ` + r.Host + ` refused; ` + host + ` is down; db-7.internal.corp said sk-live-0123456789abcdefXYZ"}}`))
	})
	for _, tc := range []struct {
		name string
		opts []utcp.Option
		want string
	}{
		{"default", nil, `tool "svc.op": provider answered 502`},
		{"opted in", []utcp.Option{utcp.WithProviderMessages()}, `tool "svc.op": provider answered 502 Bad Gateway: {"type":"upstream_error"}`},
	} {
		r := utcptest.NewRegistry(t, tc.opts...)
		utcptest.Register(t, r, "svc", utcptest.ManualOf("op", nil, map[string]any{"call_template_type": "http", "url": p.URL}))
		_, err := r.Call(context.Background(), "svc.op", nil)
		if got := err.Error(); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}
