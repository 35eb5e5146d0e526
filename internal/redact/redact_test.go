package redact

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// cases are exact: in → want. They seed FuzzText too.
var cases = []struct {
	name, in, want string
	gone           []string // must not survive (checked besides want)
}{
	// The brief's examples.
	{name: "host port and key", in: "upstream says: db-7.internal.corp:5432 refused (key sk-live-XYZ)",
		want: "upstream says: [host] refused (key [secret])", gone: []string{"db-7", "internal.corp", "5432", "sk-live-XYZ"}},
	{name: "json host", in: `{"error":"database db-7.internal.corp:5432 unreachable"}`,
		want: `{"error":"database [host] unreachable"}`, gone: []string{"db-7", "corp", "5432"}},
	{name: "dial ipv4", in: "dial tcp 10.0.0.5:443: connect: connection refused",
		want: "dial tcp [address]: connect: connection refused"},
	{name: "metadata url", in: "GET http://169.254.169.254/latest/meta-data failed", want: "GET [url] failed"},
	{name: "bearer", in: "Authorization: Bearer abcdefghijklmnop", want: "Authorization: Bearer [secret]", gone: []string{"abcdefghijklmnop"}},
	{name: "api_key", in: "api_key=hunter2", want: "api_key=[secret]"},
	{name: "v6 bracket zone port", in: "[fe80::1%eth0]:80", want: "[address]"},
	{name: "v6 loopback", in: "::1", want: "[address]"},
	{name: "v6 doc", in: "2001:db8::1", want: "[address]"},
	{name: "email", in: "ops@corp.example", want: "[email]"},

	// Prose and numbers stay.
	{name: "prose", in: "amount must be positive", want: "amount must be positive"},
	{name: "decimals", in: "value 3.14 is over 2.5.", want: "value 3.14 is over 2.5."},
	{name: "final period", in: "step 2 failed.", want: "step 2 failed."},
	{name: "abbreviation", in: "e.g. a name", want: "e.g. a name"},
	{name: "time", in: "retry at 12:30", want: "retry at 12:30"},
	{name: "time with seconds", in: "retry at 12:30:45.123", want: "retry at 12:30:45.123"},
	{name: "ratio", in: "aspect 16:9 only", want: "aspect 16:9 only"},
	{name: "version", in: "version 1.2.3 is old", want: "version 1.2.3 is old"},
	{name: "rust path", in: "std::io::Error", want: "std::io::Error"},
	{name: "long word", in: "internationalization is hard", want: "internationalization is hard"},
	{name: "grpc status", in: "rpc error: code = Unavailable desc = connection error", want: "rpc error: code = Unavailable desc = connection error"},
	{name: "monkey is no key", in: "the monkey=banana", want: "the monkey=banana"},
	{name: "basic auth prose", in: "basic auth failed", want: "basic auth failed"},
	{name: "bearer token prose", in: "missing bearer token", want: "missing bearer token"},
	{name: "task-force", in: "risk-free task-force", want: "risk-free task-force"},
	{name: "ellipsis", in: "wait...what? U.S.A. Ph.D.", want: "wait...what? U.S.A. Ph.D."},
	{name: "utf8 prose", in: "échec: délai dépassé — réessayez", want: "échec: délai dépassé — réessayez"},

	// Addresses.
	{name: "v6 bracket port", in: "connect to [::1]:443 failed", want: "connect to [address] failed"},
	{name: "v6 zone bare", in: "fe80::1%eth0 unreachable", want: "[address] unreachable"},
	{name: "v4 mapped", in: "from ::ffff:10.0.0.1 denied", want: "from [address] denied"},
	{name: "v4 cidr", in: "10.0.0.0/8 is private", want: "[address] is private"},
	{name: "v4 in sentence", in: "peer 192.168.1.20.", want: "peer [address]."},
	{name: "five numbers", in: "1.2.3.4.5", want: "[address].5"},
	{name: "v6 then number", in: "fe80::1.2.3.4.5", want: "[address].5"},
	{name: "v4 with path", in: "POST 10.1.2.3:8080/v1/chat", want: "POST [url]"},

	// Hosts.
	{name: "api host", in: "api.openai.com returned 500", want: "[host] returned 500"},
	{name: "cluster host", in: "svc.ns.svc.cluster.local:8080 timed out", want: "[host] timed out"},
	{name: "localhost port", in: "localhost:8080", want: "[host]"},
	{name: "localhost", in: "dial localhost refused", want: "dial [host] refused"},
	{name: "file name", in: "open config.json: no such file", want: "open [host]: no such file"},
	{name: "host path", in: "see github.com/exprd/exprd/internal", want: "see [url]"},
	{name: "host then number", in: "at example.com.123", want: "at [host].123"},

	// URLs.
	{name: "url ipv6 userinfo", in: "https://user:pass@[::1]:8443/v1/x?y=1.", want: "[url]."},
	{name: "url parens", in: "see (https://example.com/a_(b)) now", want: "see ([url]) now"},
	{name: "url quoted", in: `"grpc://model:9000": unavailable`, want: `"[url]": unavailable`},

	// E-mail.
	{name: "email period", in: "contact ops@corp.example.", want: "contact [email]."},
	{name: "mailto", in: "mailto:first.last+tag@mail.corp.example", want: "mailto:[email]"},

	// Secrets.
	{name: "json key", in: `{"api_key": "abc123", "model": "x"}`, want: `{"api_key": "[secret]", "model": "x"}`},
	{name: "escaped json key", in: `{\"password\":\"s3cr3t\"}`, want: `{\"password\":\"[secret]\"}`},
	{name: "password colon", in: "password: hunter2", want: "password: [secret]"},
	{name: "header key", in: "X-Api-Key: abcdef", want: "X-Api-Key: [secret]"},
	{name: "camel key", in: "accessToken=xyz secretKey = 'q w'", want: "accessToken=[secret] secretKey = '[secret]'"},
	{name: "query token", in: "token=abc&user=1", want: "token=[secret]&user=1"},
	{name: "env key", in: "OPENAI_API_KEY=sk-proj-abc123 set", want: "OPENAI_API_KEY=[secret] set"},
	{name: "key bearer", in: "token: Bearer abc.def-123", want: "token: Bearer [secret]"},
	{name: "aws", in: "AKIAIOSFODNN7EXAMPLE leaked", want: "[secret] leaked"},
	{name: "google", in: "key AIzaSyA-1234567890abcdefghijklmnopqrstu", want: "key [secret]"},
	{name: "github", in: "ghp_abcdefghijklmnopqrstuvwxyz0123456789 revoked", want: "[secret] revoked"},
	{name: "slack", in: "xoxb-1234-5678-abcdef", want: "[secret]"},
	{name: "stripe", in: "sk_live_51HxYz and pk_test_abc", want: "[secret] and [secret]"},
	{name: "jwt", in: "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U expired",
		want: "jwt [secret] expired"},
	{name: "basic", in: "Authorization: Basic dXNlcjpwYXNz", want: "Authorization: Basic [secret]"},
	{name: "uuid blob", in: "id 123e4567-e89b-12d3-a456-426614174000 failed", want: "id [secret] failed"},
	{name: "hex blob", in: "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", want: "sha256 [secret]"},
	{name: "db name password", in: "db.example.com.password=x", want: "[host]=[secret]"},

	// Upstreams' messages as they come.
	{name: "openai bad key", in: "Incorrect API key provided: sk-proj-********************abcd. You can find your API key at https://platform.openai.com/account/api-keys.",
		want: "Incorrect API key provided: [secret]. You can find your API key at [url]."},
	{name: "go dial", in: `Post "https://api.openai.com/v1/chat/completions": dial tcp: lookup api.openai.com on 127.0.0.53:53: no such host`,
		want: `Post "[url]": dial tcp: lookup [host] on [address]: no such host`},
	{name: "mysql", in: "ERROR 1045 (28000): Access denied for user 'root'@'10.0.0.7' (using password: YES)",
		want: "ERROR 1045 (28000): Access denied for user 'root'@'[address]' (using password: [secret])"},
	{name: "redis url", in: "redis://:p4ss@cache.internal:6379/0 refused", want: "[url] refused"},
	{name: "path ending in token", in: "open /var/run/secrets/token: no such file or directory", want: "open /var/run/secrets/token: no such file or directory"},
	{name: "timestamp", in: "status 503 at 2024-05-01T12:30:45Z", want: "status 503 at 2024-05-01T12:30:45Z"},
	// Over-redaction, accepted: a key-like name and a separator make a value.
	{name: "token prose", in: "token: expired", want: "token: [secret]"},
	{name: "identifier", in: "(Client.Timeout exceeded)", want: "([host] exceeded)"},

	// Placeholders are kept.
	{name: "placeholders", in: "[url] [host] [address] [email] [secret] key=[secret]", want: "[url] [host] [address] [email] [secret] key=[secret]"},
	{name: "invalid utf8", in: "bad \xff\xfe byte at 10.0.0.1", want: "bad \uFFFD byte at [address]"},
}

func TestText(t *testing.T) {
	t.Parallel()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := Text(c.in)
			if got != c.want {
				t.Errorf("Text(%q): got %q, want %q", c.in, got, c.want)
			}
			for _, g := range c.gone {
				if strings.Contains(got, g) {
					t.Errorf("Text(%q) = %q: got %q in it, want it gone", c.in, got, g)
				}
			}
			if again := Text(got); again != got {
				t.Errorf("Text(%q): got %q, want %q (idempotent)", got, again, got)
			}
			if want := c.in == c.want; Clean(c.in) != want {
				t.Errorf("Clean(%q): got %v, want %v", c.in, !want, want)
			}
		})
	}
}

func TestValidUTF8(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"\xff", "a\xc3", "host\xe2\x82.example.com", "\xed\xa0\x80 ::1"} {
		if got := Text(in); !utf8.ValidString(got) {
			t.Errorf("Text(%q): got %q, want valid UTF-8", in, got)
		}
		if Clean(in) {
			t.Errorf("Clean(%q): got true, want false (invalid UTF-8 is replaced)", in)
		}
	}
}

// TestLinear runs inputs that would make a backtracking or rescanning
// matcher quadratic; at 256 KiB each, quadratic would take minutes.
func TestLinear(t *testing.T) {
	t.Parallel()
	const n = 256 << 10
	inputs := map[string]string{
		"letters":       strings.Repeat("a", n),
		"dotted":        strings.Repeat("a.", n/2),
		"quads":         strings.Repeat("1.2.3.4.", n/8),
		"quads dash":    strings.Repeat("1.2.3.4-", n/8),
		"quads plus":    strings.Repeat("1.2.3.4+", n/8),
		"keys":          strings.Repeat("sk-aaa+", n/7),
		"aws":           strings.Repeat("AKIAAAAAAAAAAAAAAAAA_", n/21),
		"jwt":           strings.Repeat("eyJa-", n/5),
		"colons":        strings.Repeat("a:", n/2),
		"v6 cuts":       strings.Repeat("fe80::1g", n/8),
		"quote":         `key="` + strings.Repeat(`key="`, n/5),
		"escaped quote": `key=\"` + strings.Repeat(`key=\"`, n/6),
		"key names":     strings.Repeat("x.key", n/5),
		"local":         strings.Repeat("a.b+", n/4) + "@",
		"at":            strings.Repeat("a@b.", n/4),
		"bearer":        strings.Repeat("bearer ", n/7),
		"brackets":      strings.Repeat("[", n),
		"url":           "http://" + strings.Repeat("(", n),
		"schemes":       strings.Repeat("a+b.c-", n/6),
		"blob":          strings.Repeat("a1/", n/3) + ".",
	}
	for name, in := range inputs {
		start := time.Now()
		out := Text(in)
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("Text(%s, %d bytes): got %v, want linear time", name, len(in), d)
		}
		if again := Text(out); again != out {
			t.Errorf("Text(%s): not idempotent", name)
		}
	}
}
