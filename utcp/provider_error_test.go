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
// 1,024 characters): HTML pages, stack traces, internal host names. Now an
// error shows the status and, where the operator opted in, at most the
// provider's own short message.
func TestProviderErrorShowsOnlyAShortMessage(t *testing.T) {
	t.Parallel()
	atLimit := strings.Repeat("m", utcp.MaxProviderMessageChars)
	cases := []struct {
		name, ctype, body string
		want              any    // TransportError.Body
		msg               string // err.Error() after `provider answered 422`
	}{
		{"error field", "application/json", `{"error":"amount must be positive","trace":"at Pay.charge(Pay.java:42)"}`,
			map[string]any{"error": "amount must be positive"}, `: {"error":"amount must be positive"}`},
		{"message field", "application/json", `{"message":"no such city","code":17}`,
			map[string]any{"message": "no such city"}, `: {"message":"no such city"}`},
		{"error.message", "application/json", `{"error":{"message":"quota used up","type":"quota"}}`,
			map[string]any{"error": "quota used up"}, `: {"error":"quota used up"}`},
		{"problem detail", "application/problem+json", `{"title":"Invalid","detail":"city is required"}`,
			map[string]any{"detail": "city is required"}, `: {"detail":"city is required"}`},
		{"at the limit", "application/json", `{"error":"` + atLimit + `"}`,
			map[string]any{"error": atLimit}, `: {"error":"` + atLimit + `"}`},
		{"one past the limit", "application/json", `{"error":"` + atLimit + `m"}`, nil, ""},
		{"several lines", "application/json", `{"error":"boom\n\tat db.query(db.go:12)"}`, nil, ""},
		{"not a string", "application/json", `{"error":true}`, nil, ""},
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
			if got, want := err.Error(), `tool "pay.charge": provider answered 422`+tc.msg; got != want {
				t.Errorf("message: got %q, want %q", got, want)
			}
			// The body itself stays behind Unwrap, for logs.
			if cause := errors.Unwrap(err); tc.body != "" && (cause == nil || !strings.Contains(cause.Error(), tc.body[:min(len(tc.body), 20)])) {
				t.Errorf("Unwrap: got %v, want the provider's body", cause)
			}
		})
	}
}

// Hosts, addresses and keys are taken out of the message a provider may
// show; by default it shows none.
func TestProviderErrorRedacts(t *testing.T) {
	t.Parallel()
	p := utcptest.NewProvider(t, func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.Host)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte(`{"error":"upstream ` + r.Host + ` refused; ` + host + ` is down; db-7.internal.corp said sk-live-0123456789abcdefXYZ"}`))
	})
	for _, tc := range []struct {
		name string
		opts []utcp.Option
		want string
	}{
		{"default", nil, `tool "svc.op": provider answered 502`},
		{"opted in", []utcp.Option{utcp.WithProviderMessages()},
			`tool "svc.op": provider answered 502: {"error":"upstream [address] refused; [address] is down; [host] said [secret]"}`},
	} {
		r := utcptest.NewRegistry(t, tc.opts...)
		utcptest.Register(t, r, "svc", utcptest.ManualOf("op", nil, map[string]any{"call_template_type": "http", "url": p.URL}))
		_, err := r.Call(context.Background(), "svc.op", nil)
		if got := err.Error(); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestProviderMessage(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{"  division by zero ", "division by zero"},
		{strings.Repeat("é", utcp.MaxProviderMessageChars/2), strings.Repeat("é", utcp.MaxProviderMessageChars/2)},
		{strings.Repeat("é", utcp.MaxProviderMessageChars/2) + "x", ""},
		{"line one\nline two", ""},
		{"tab\tseparated", ""},
		{"bad \xff utf-8", ""},
		{"", ""},
	}
	for _, tc := range cases {
		if got := utcp.ProviderMessage(tc.in); got != tc.want {
			t.Errorf("ProviderMessage(%q): got %q, want %q", tc.in, got, tc.want)
		}
	}
}
