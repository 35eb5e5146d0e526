package redact

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// boundKey is a value bound to the manual that Token alone would accept:
// only hidden keeps it out.
const boundKey = "cobalt-harbor-lantern"

func hiddenKey(s string) bool { return strings.Contains(s, boundKey) }

// probes are what an upstream's error may say and no caller may read.
var probes = []string{
	"connect to db:5432 failed",
	"password is hunter2",
	"account 123456789012 denied",
	"host api.internal.corp unreachable",
	"token sk-live-abc123def456",
	"Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
	"user admin@corp.example",
	"10.0.3.7:8080 refused",
	"/var/lib/secret/key.pem missing",
	"AKIAIOSFODNN7EXAMPLE",
	"key=" + boundKey,
	"Traceback (most recent call last):\n  File \"/app/x.py\", line 3, in <module>",
	"SELECT * FROM users WHERE id = 7",
	"postgres://u:p@h/db",
	"x-api-key: " + boundKey,
	// Parts of the above that are identifier-shaped.
	"sk-live-abc123def456",
	"123456789012",
	"acct_123456789012",
	"10.0.3.7",
	"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
	boundKey,
	"err_" + boundKey,
}

// Every probe is hidden wherever it sits: as the free-text message, as the
// error's type or code, as an OAuth2-style error string, as a plain-text
// or HTML body.
func TestFieldsHideTheProbes(t *testing.T) {
	t.Parallel()
	safe := map[string]any{"type": "invalid_request_error", "code": "invalid_api_key"}
	for _, p := range probes {
		for _, tc := range []struct {
			shape string
			body  any
			want  map[string]any
		}{
			{"message", obj(`{"error":{"message":%s,"type":"invalid_request_error","code":"invalid_api_key"}}`, p), safe},
			{"detail", obj(`{"detail":%s,"message":%[1]s,"type":"invalid_request_error","code":"invalid_api_key"}`, p), safe},
			{"error.type", obj(`{"error":{"message":"bad","type":%s,"code":"invalid_api_key"}}`, p), map[string]any{"code": "invalid_api_key"}},
			{"error.code", obj(`{"error":{"message":"bad","type":"invalid_request_error","code":%s}}`, p), map[string]any{"type": "invalid_request_error"}},
			{"type", obj(`{"type":%s,"code":"invalid_api_key"}`, p), map[string]any{"code": "invalid_api_key"}},
			{"code", obj(`{"type":"invalid_request_error","code":%s}`, p), map[string]any{"type": "invalid_request_error"}},
			{"error string", obj(`{"error":%s}`, p), nil},
			{"plain text", p, nil},
			{"html", "<html><body><h1>500</h1>" + p + "</body></html>", nil},
		} {
			got := Fields(tc.body, hiddenKey)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%q as %s: got %v, want %v", p, tc.shape, got, tc.want)
			}
			if raw, _ := json.Marshal(got); strings.Contains(string(raw), boundKey) {
				t.Errorf("%q as %s: the bound key shown: %s", p, tc.shape, raw)
			}
		}
	}
}

// The shapes read, and what is kept of each.
func TestFieldsKeep(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
		want       map[string]any
	}{
		{"openai", `{"error":{"message":"Incorrect API key provided: sk-pr****","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
			map[string]any{"type": "invalid_request_error", "code": "invalid_api_key"}},
		{"openai, code null", `{"error":{"message":"You exceeded your quota","type":"insufficient_quota","code":null}}`,
			map[string]any{"type": "insufficient_quota"}},
		{"anthropic: the nested type first", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			map[string]any{"type": "overloaded_error"}},
		{"top-level type and code", `{"type":"validation_error","code":"E11000","message":"duplicate key"}`,
			map[string]any{"type": "validation_error", "code": "E11000"}},
		{"oauth2 error string", `{"error":"invalid_grant","error_description":"refresh token expired"}`,
			map[string]any{"code": "invalid_grant"}},
		{"a numeric code", `{"error":{"code":400,"message":"Invalid JSON payload","status":"INVALID_ARGUMENT"}}`,
			map[string]any{"code": "400"}},
		{"a negative code", `{"code":-32600,"message":"Invalid Request"}`, map[string]any{"code": "-32600"}},
		{"error.code before code", `{"error":{"code":"rate_limit_exceeded"},"code":"other"}`, map[string]any{"code": "rate_limit_exceeded"}},
		{"code before the error string", `{"error":"Unauthorized","code":"token_expired"}`, map[string]any{"code": "token_expired"}},
		{"a dotted name", `{"type":"java.lang.IllegalStateException"}`, map[string]any{"type": "java.lang.IllegalStateException"}},
		{"a refused code is not replaced by the next", `{"code":"AKIAIOSFODNN7EXAMPLE","error":"invalid_grant"}`, nil},
		{"a fractional code", `{"code":1.5}`, nil},
		{"a huge code", `{"code":1e300}`, nil},
		{"a boolean", `{"type":true,"code":false}`, nil},
		{"an object", `{"type":{"x":"y"}}`, nil},
		{"no fields", `{"message":"no such city"}`, nil},
		{"an array", `["invalid_grant"]`, nil},
		{"a JSON string", `"invalid_grant"`, nil},
	} {
		var parsed any
		if err := json.Unmarshal([]byte(tc.body), &parsed); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := Fields(parsed, hiddenKey); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	n := json.Number("429")
	if got := Fields(map[string]any{"code": n}, nil); !reflect.DeepEqual(got, map[string]any{"code": "429"}) {
		t.Errorf("a json.Number code: got %v", got)
	}
}

func TestToken(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"invalid_request_error", true},
		{"INVALID_ARGUMENT", true},
		{"ThrottlingException", true},
		{"rate-limit.exceeded", true},
		{"E11000", true},
		{"oauth2", true},
		{"429", true},
		{"-32600", true},
		{"1.5", true},
		{"gpt-4o-mini", true},
		{strings.Repeat("a", MaxTokenBytes), true},
		{strings.Repeat("a", MaxTokenBytes+1), false},
		{"", false},
		{"-_.", false},
		{"AKIAIOSFODNN7EXAMPLE", false},
		{"sk-live-abc123def456", false},
		{"123456789012", false},
		{"1234567", false},
		{"10.0.3.7", false},
		{"1.2.3", false},
		{"db:5432", false},
		{"admin@corp.example", false},
		{"two words", false},
		{"line\nbreak", false},
		{"café", false},
		{"a/b", false},
		{"key=value", false},
	} {
		if got := Token(tc.in); got != tc.want {
			t.Errorf("Token(%q): got %v, want %v", tc.in, got, tc.want)
		}
	}
}

// obj is format with s, as a JSON string, in its %s, decoded.
func obj(format, s string) any {
	raw, _ := json.Marshal(s)
	var v any
	if err := json.Unmarshal([]byte(fmt.Sprintf(format, raw)), &v); err != nil {
		panic(err)
	}
	return v
}
