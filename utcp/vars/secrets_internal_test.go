package vars

import (
	"encoding/base64"
	"net/url"
	"strings"
	"testing"
)

// TestSecretsConceal: every form of a bound value is replaced, the longer
// of two values that overlap whole; a slot keeps its last two values.
func TestSecretsConceal(t *testing.T) {
	t.Parallel()
	s := &Secrets{}
	s.Add("", "abcd-1234", "abcd-1234-longer", `q"u<o>te`)
	for _, tc := range []struct{ in, want string }{
		{"key abcd-1234 refused", "key [redacted] refused"},
		{"key abcd-1234-longer refused", "key [redacted] refused"},
		{"json q\\\"u\\u003co\\u003ete", "json [redacted]"},
		{"b64 " + base64.StdEncoding.EncodeToString([]byte("abcd-1234")), "b64 [redacted]"},
		{"query " + url.QueryEscape(`q"u<o>te`), "query [redacted]"},
		{"nothing bound here", "nothing bound here"},
	} {
		if got := s.Conceal(tc.in); got != tc.want {
			t.Errorf("Conceal(%q): got %q, want %q", tc.in, got, tc.want)
		}
		if s.Reveals(s.Conceal(tc.in)) {
			t.Errorf("Reveals(Conceal(%q)): true", tc.in)
		}
	}
	for _, tok := range []string{"token-one-1", "token-two-2", "token-three-3"} {
		s.Add("oauth2 entry", tok)
	}
	got := s.Conceal("token-one-1 token-two-2 token-three-3 abcd-1234")
	if want := "token-one-1 [redacted] [redacted] [redacted]"; got != want {
		t.Errorf("after three tokens: got %q, want %q (the last two kept, and the bound value)", got, want)
	}
	var none *Secrets
	if none.Conceal("x") != "x" || none.Reveals("x") {
		t.Errorf("a nil Secrets changed something")
	}
}

// TestSecretsOfAManual: a manual's Secrets hold every value the
// operator's sources bind to its name, and nothing bound to another.
func TestSecretsOfAManual(t *testing.T) {
	t.Parallel()
	v := NewResolver(map[string]string{"weather_KEY": "configured-1", "other_KEY": "other-value"},
		[]Loader{DotEnv{"weather_TOKEN": "dotenv-2"}, LoaderFunc(func(k string) (string, bool) { return "asked-3", k == "weather_ASKED" })})
	s := v.SecretsOf("weather")
	msg := "configured-1 dotenv-2 asked-3 other-value"
	if got, want := s.Conceal(msg), "[redacted] [redacted] asked-3 other-value"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if _, ok := v.lookup("weather", "ASKED"); !ok {
		t.Fatal("ASKED: not bound")
	}
	if got, want := s.Conceal(msg), "[redacted] [redacted] [redacted] other-value"; got != want {
		t.Errorf("once looked up: got %q, want %q", got, want)
	}
	if v.SecretsOf("weather") != s || strings.Contains(v.SecretsOf("other").Conceal("configured-1"), "redacted") {
		t.Errorf("a manual's Secrets are its own, made once")
	}
}

// TestSecretsWithholds: a type or code is withheld when it holds a bound
// value in any form (a short one too), or has 8 bytes in a row (its
// whole, when shorter, of at least MinConcealedBytes) in common with one.
func TestSecretsWithholds(t *testing.T) {
	t.Parallel()
	s := &Secrets{}
	s.Add("", "cobalt-harbor-lantern", "kkk")
	s.Add("oauth2 entry", "tok-ZZZZZZZZZZZZ-oauth2")
	for _, tc := range []struct {
		tok  string
		want bool
	}{
		{"cobalt-harbor-lantern", true},
		{"err_cobalt-harbor-lantern_x", true},
		{"harbor-lantern", true}, // a piece of it
		{"x-harbor-lant", true},  // 8 bytes of it
		{"cobalt", true},         // shorter than 8, all of it in a value
		{"tok-ZZZZZZZZZZZZ-oauth2", true},
		{"ZZZZZZZZ", true},
		{"kkk", true},        // a short value, whole
		{"kkk_denied", true}, // a short value, inside
		{base64.StdEncoding.EncodeToString([]byte("cobalt-harbor-lantern")), true},
		{"cob", false}, // shorter than MinConcealedBytes
		{"invalid_credentials", false},
		{"harbor_closed", false}, // "harbor" is 6 bytes in a row only
	} {
		if got := s.Withholds(tc.tok); got != tc.want {
			t.Errorf("Withholds(%q): got %v, want %v", tc.tok, got, tc.want)
		}
	}
	var none *Secrets
	if none.Withholds("cobalt-harbor-lantern") {
		t.Errorf("a nil Secrets withheld something")
	}
}
