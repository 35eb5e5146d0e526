package manual_test

import (
	"testing"

	"github.com/exprd/exprd/utcp/manual"
)

func TestPathParameterVariable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ url, want string }{
		{"https://a.example/{${ID}}", "{${ID}}"},
		{"https://a.example/{$ID}", "{$ID}"},
		{"https://a.example/x/{a${ID}b}/y", "{a${ID}b}"},
		{"https://a.example/${ID}/{id}", ""},
		{"https://a.example/${A}{b}${C}", ""},
		{"https://a.example/{id}", ""},
		{"https://a.example/{a$}", ""},
		{"https://${HOST}/{id}?k=${KEY}", ""},
	} {
		got, ok := manual.PathParameterVariable(tc.url)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("PathParameterVariable(%q): got %q %v, want %q", tc.url, got, ok, tc.want)
		}
	}
}
