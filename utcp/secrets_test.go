package utcp_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/internal/utcptest"
	"github.com/exprd/exprd/utcp/vars"
)

// shown is everything of a failed call a caller may read, and what the
// operator's log gets: the error's text (what a gRPC caller is told), its
// shown body, and the cause behind Unwrap.
func shown(err error) (caller, log string) {
	caller = err.Error()
	var te *utcp.TransportError
	if errors.As(err, &te) && te.Body != nil {
		raw, _ := json.Marshal(te.Body)
		caller += " " + string(raw)
	}
	if cause := errors.Unwrap(err); cause != nil {
		log = cause.Error()
	}
	return caller, log
}

// TestPathParametersAreTheTemplates: a URL template's {name} path
// parameters are the template's, as written, never text of a variable's
// value: a variable inside one is refused at registration (naming the
// parameter as written), and a value's braces are sent as %7B and %7D,
// not read as a parameter (which made "missing path parameter" quote part
// of a secret to every caller, or spliced an argument into it).
func TestPathParametersAreTheTemplates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		url      string // after the provider's URL
		value    string // of TOKEN
		args     map[string]any
		register string // the registration's error, "" when it registers
		call     string // the call's error, "" when it succeeds
		path     string // the path the provider got, decoded
	}{
		{name: "a variable as a path parameter's name", url: "/{${TOKEN}}", value: "s3cret-value-1",
			register: `tools[0].tool_call_template.url: the path parameter {${TOKEN}} holds a variable`},
		{name: "a variable inside a path parameter's name", url: "/items/{id_${TOKEN}}", value: "s3cret-value-2",
			register: `the path parameter {id_${TOKEN}} holds a variable`},
		{name: "a value holding braces", url: "/items/${TOKEN}", value: "s3cr{etpart}x",
			path: "/items/s3cr{etpart}x"},
		{name: "a value holding an argument's name", url: "/items/${TOKEN}/{id}", value: "ab{id}cd", args: map[string]any{"id": "7"},
			path: "/items/ab{id}cd/7"},
		{name: "a value holding braces, and a parameter missing", url: "/v/${TOKEN}/{id}", value: "k{ey}zz",
			call: `tool "m.t": invalid arguments: missing path parameter "id"`},
		{name: "a variable's braces are not a parameter", url: "/${TOKEN}/items/{id}", value: "plain-value-3", args: map[string]any{"id": "9"},
			path: "/plain-value-3/items/9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := utcptest.NewProvider(t, nil) // its own: the checks read its requests
			r := utcptest.NewRegistry(t, utcp.WithVariables(map[string]string{"m_TOKEN": tc.value}))
			manual := utcptest.ManualOf("t", nil, map[string]any{"call_template_type": "http", "url": p.URL + tc.url})
			_, err := r.Register(context.Background(), "m", utcp.FromText(manual).AllowProtocols(utcp.TypeHTTP))
			if tc.register != "" {
				if err == nil || !strings.Contains(err.Error(), tc.register) || strings.Contains(err.Error(), tc.value) {
					t.Fatalf("register: got %v, want %q without the value", err, tc.register)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			before := len(p.Requests())
			_, err = r.Call(context.Background(), "m.t", tc.args)
			if tc.call != "" {
				caller, log := shown(err)
				if caller != tc.call || strings.Contains(caller+log, "ey") || len(p.Requests()) != before {
					t.Fatalf("call: got %q (log %q), want %q, nothing sent", caller, log, tc.call)
				}
				return
			}
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			reqs := p.Requests()
			got, _ := url.PathUnescape(strings.SplitN(reqs[len(reqs)-1].URI, "?", 2)[0])
			if got != tc.path {
				t.Errorf("the provider got %s, want %s", got, tc.path)
			}
		})
	}
}

// echo is a provider that answers 401 with what it was sent: the
// Authorization header and the query, in plain text or in JSON (as its
// error's message and its type, beside a code of its own).
func echo(t *testing.T, plain bool, form func(string) string) *utcptest.Provider {
	return utcptest.NewProvider(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"access_token": "tok-`+strings.Repeat("Z", 12)+`-oauth2", "expires_in": 3600}`)
			return
		}
		got := r.Header.Get("Authorization") + " " + r.URL.RawQuery
		if form != nil {
			got = form(got)
		}
		if plain {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, "bad credentials: "+got)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		raw, _ := json.Marshal(map[string]any{"error": map[string]any{"message": "bad credentials: " + got, "type": got, "code": "invalid_credentials"}})
		_, _ = w.Write(raw)
	})
}

// TestProviderMessagesNeverShowBoundValues: with provider messages on, a
// provider that echoes the credentials it got (the Authorization header,
// an API key in the query, an OAuth2 token, Basic credentials; as sent,
// URL-decoded, or base64) shows none of them to the caller, nor to the
// log: every value bound to the manual, and its OAuth2 token, is replaced
// before anything else reads the message.
func TestProviderMessagesNeverShowBoundValues(t *testing.T) {
	t.Parallel()
	const key = "sk-live-Xq9+/b=é\"<>&k3y"
	const user, password = "svc-user", "pw-0123-secret"
	token := "tok-" + strings.Repeat("Z", 12) + "-oauth2"
	bearer := map[string]any{"auth_type": "api_key", "api_key": "Bearer ${KEY}", "var_name": "Authorization", "location": "header"}
	query := map[string]any{"auth_type": "api_key", "api_key": "${KEY}", "var_name": "api_key", "location": "query"}
	basic := map[string]any{"auth_type": "basic", "username": "${USER}", "password": "${PASSWORD}"}
	unescape := func(s string) string { u, _ := url.QueryUnescape(s); return u }
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	for _, tc := range []struct {
		name   string
		auth   func(p *utcptest.Provider) map[string]any
		form   func(string) string
		values []string
	}{
		{"the Authorization header", func(*utcptest.Provider) map[string]any { return bearer }, nil, []string{key}},
		{"the API key in the query, as sent", func(*utcptest.Provider) map[string]any { return query }, nil, []string{key}},
		{"the API key in the query, decoded", func(*utcptest.Provider) map[string]any { return query }, unescape, []string{key}},
		{"the API key, in base64", func(*utcptest.Provider) map[string]any { return bearer }, func(s string) string { return b64(strings.TrimPrefix(s, "Bearer ")) }, []string{key}},
		{"Basic credentials", func(*utcptest.Provider) map[string]any { return basic }, nil, []string{user, password, b64(user + ":" + password)}},
		{"the OAuth2 token", func(p *utcptest.Provider) map[string]any {
			return map[string]any{"auth_type": "oauth2", "token_url": p.URL + "/token", "client_id": "${USER}", "client_secret": "${PASSWORD}"}
		}, func(s string) string { return strings.TrimPrefix(s, "Bearer ") }, []string{token, password}},
	} {
		for _, plain := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, plain text %v", tc.name, plain), func(t *testing.T) {
				t.Parallel()
				p := echo(t, plain, tc.form)
				var logs bytes.Buffer
				r := utcptest.NewRegistry(t, utcp.WithProviderMessages(), utcp.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))),
					utcp.WithVariables(map[string]string{"m_KEY": key, "m_USER": user, "m_PASSWORD": password}))
				utcptest.Register(t, r, "m", utcptest.ManualOf("t", nil, map[string]any{"call_template_type": "http", "url": p.URL + "/t", "auth": tc.auth(p)}))
				_, err := r.Call(context.Background(), "m.t", map[string]any{"q": "1"})
				var te *utcp.TransportError
				if !errors.As(err, &te) || te.Status != http.StatusUnauthorized {
					t.Fatalf("got %v, want the provider's 401", err)
				}
				caller, log := shown(err)
				for _, v := range tc.values {
					if strings.Contains(caller, v) || strings.Contains(log, v) || strings.Contains(logs.String(), v) {
						t.Errorf("%q shown:\ncaller: %s\nlog: %s\n%s", v, caller, log, logs.String())
					}
				}
				if want := `{"code":"invalid_credentials"}`; !plain && !strings.HasSuffix(caller, want) {
					t.Errorf("caller: got %q, want only the provider's code shown (%s)", caller, want)
				}
				if !strings.Contains(log, vars.Concealed) {
					t.Errorf("log: got %q, want the credentials replaced by %s", log, vars.Concealed)
				}
			})
		}
	}
}

// TestBoundValuesWithholdTypeAndCode: a type or code that gives away a
// value bound to the manual (the value, a short one in it, a piece of a
// long one) is left out, though it is an identifier-like token; one that
// does not is shown.
func TestBoundValuesWithholdTypeAndCode(t *testing.T) {
	t.Parallel()
	long := "cobalt-harbor-lantern"
	short := strings.Repeat("k", vars.MinConcealedBytes-1)
	for _, tc := range []struct {
		name, value, typ, want string
	}{
		{"the value", long, long, `: {"code":"denied"}`},
		{"a piece of it", long, "harbor-lantern", `: {"code":"denied"}`},
		{"a short value, inside", short, "skkkies_grey", `: {"code":"denied"}`},
		{"neither", long, "quota_used_up", `: {"code":"denied","type":"quota_used_up"}`},
		{"a short value, not in it", short, "quota_used_up", `: {"code":"denied","type":"quota_used_up"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := utcptest.NewProvider(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusForbidden)
				raw, _ := json.Marshal(map[string]any{"type": tc.typ, "code": "denied"})
				_, _ = w.Write(raw)
			})
			r := utcptest.NewRegistry(t, utcp.WithProviderMessages(), utcp.WithVariables(map[string]string{"m_KEY": tc.value}))
			utcptest.Register(t, r, "m", utcptest.ManualOf("t", nil, map[string]any{"call_template_type": "http", "url": p.URL + "/t",
				"headers": map[string]any{"X-Key": "${KEY}"}}))
			_, err := r.Call(context.Background(), "m.t", nil)
			if got, want := err.Error(), `tool "m.t": provider answered 403 Forbidden`+tc.want; got != want {
				t.Errorf("got %q, want %q", got, want)
			}
		})
	}
}
