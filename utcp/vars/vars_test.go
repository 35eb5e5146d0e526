package vars_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/exprd/exprd/utcp/vars"
)

func TestNamespacedKey(t *testing.T) {
	t.Parallel()
	cases := []struct{ manual, name, want string }{
		{"demo_shop", "API_TOKEN", "demo__shop_API_TOKEN"},
		{"shop", "API_TOKEN", "shop_API_TOKEN"},
		{"a__b", "X", "a____b_X"},
	}
	for _, tc := range cases {
		if got := vars.NamespacedKey(tc.manual, tc.name); got != tc.want {
			t.Errorf("NamespacedKey(%q, %q): got %q, want %q", tc.manual, tc.name, got, tc.want)
		}
	}
}

func TestParseNamespacedKey(t *testing.T) {
	t.Parallel()
	cases := []struct {
		key, manual, name string
		ok                bool
	}{
		{"demo__shop_API_TOKEN", "demo_shop", "API_TOKEN", true},
		{"shop_API_TOKEN", "shop", "API_TOKEN", true},
		{"a____b_X", "a__b", "X", true},
		{"a___b", "a_", "b", true},
		{"TOKEN", "", "", false},
		{"_TOKEN", "", "", false},
		{"a_", "", "", false},
		{"a__b", "", "", false},
	}
	for _, tc := range cases {
		m, n, ok := vars.ParseNamespacedKey(tc.key)
		if m != tc.manual || n != tc.name || ok != tc.ok {
			t.Errorf("ParseNamespacedKey(%q): got %q, %q, %v; want %q, %q, %v", tc.key, m, n, ok, tc.manual, tc.name, tc.ok)
		}
		if ok && vars.NamespacedKey(m, n) != tc.key {
			t.Errorf("NamespacedKey(%q, %q) != %q", m, n, tc.key)
		}
	}
}

// An env-file value may refer to a key above it or to an environment
// variable the operator names, as python-dotenv expands it.
func TestParseDotEnvExpands(t *testing.T) {
	t.Setenv("EXPRD_TEST_GLOBAL_TOKEN", "from-env")
	in := strings.Join([]string{
		"GLOBAL=g1",
		"remap_API_TOKEN=${GLOBAL}",
		`quoted_T="pre-${EXPRD_TEST_GLOBAL_TOKEN}-post"`,
		"single_T='${GLOBAL} kept'",
		"default_T=${EXPRD_TEST_NOT_SET_ANYWHERE:-fallback}",
		"dollar_T=$GLOBAL",
	}, "\n")
	got, err := vars.ParseDotEnv(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := vars.DotEnv{"GLOBAL": "g1", "remap_API_TOKEN": "g1", "quoted_T": "pre-from-env-post", "single_T": "${GLOBAL} kept", "default_T": "fallback", "dollar_T": "$GLOBAL"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v, want %#v", got, want)
	}
	_, err = vars.ParseDotEnv(strings.NewReader("A=1\nB=${EXPRD_TEST_NOT_SET_ANYWHERE}"))
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("an unresolved reference: got %v, want an error naming line 2", err)
	}
}

func TestParseDotEnv(t *testing.T) {
	t.Parallel()
	in := strings.Join([]string{
		"# comment",
		"",
		"A=plain",
		"export B = spaced  # trailing comment",
		`C="double \"quoted\"\nline"`,
		"D='single $NOT #kept'",
		`E="multi`,
		`line"`,
		"F=",
		"G=a=b",
	}, "\n")
	got, err := vars.ParseDotEnv(strings.NewReader(in))
	if err != nil {
		t.Fatalf("ParseDotEnv: %v", err)
	}
	want := vars.DotEnv{"A": "plain", "B": "spaced", "C": "double \"quoted\"\nline", "D": "single $NOT #kept", "E": "multi\nline", "F": "", "G": "a=b"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v, want %#v", got, want)
	}
	if _, ok := got.Lookup("F"); ok {
		t.Errorf("an empty value must not count as set")
	}
	for _, bad := range []string{"no equals sign", `X="unterminated`, "X='open", "1 2=3"} {
		if _, err := vars.ParseDotEnv(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseDotEnv(%q): got no error, want one", bad)
		}
	}
}
