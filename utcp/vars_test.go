package utcp_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/exprd/exprd/utcp"
)

func TestNamespacedKey(t *testing.T) {
	t.Parallel()
	cases := []struct{ manual, name, want string }{
		{"demo_shop", "API_TOKEN", "demo__shop_API_TOKEN"},
		{"shop", "API_TOKEN", "shop_API_TOKEN"},
		{"a__b", "X", "a____b_X"},
	}
	for _, tc := range cases {
		if got := utcp.NamespacedKey(tc.manual, tc.name); got != tc.want {
			t.Errorf("NamespacedKey(%q, %q): got %q, want %q", tc.manual, tc.name, got, tc.want)
		}
	}
}

func TestVariablesLookupOrderAndNamespacing(t *testing.T) {
	t.Parallel()
	p := newProvider(t, nil)
	dir := t.TempDir()
	envFile := filepath.Join(dir, ".env")
	if err := os.WriteFile(envFile, []byte("# keys\nexport demo__shop_FROM_FILE=file-value\ndemo__shop_BOTH=file\nAPI_TOKEN=bare-name-is-never-used\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	environ := map[string]string{"demo__shop_FROM_ENV": "env-value", "demo__shop_BOTH": "env", "demo__shop_CONFIGURED": "env"}
	r := newRegistry(t,
		utcp.WithVariables(map[string]string{"demo__shop_CONFIGURED": "config-value"}),
		utcp.WithDotEnvFile(envFile),
		utcp.WithLookupEnv(func(k string) (string, bool) { v, ok := environ[k]; return v, ok }),
	)
	register(t, r, "demo-shop", manualOf("op", nil, map[string]any{
		"call_template_type": "http",
		"url":                p.URL + "/x",
		"headers": map[string]any{
			"X-Configured": "${CONFIGURED}",
			"X-File":       "$FROM_FILE",
			"X-Env":        "pre-${FROM_ENV}-post",
			"X-Both":       "${BOTH}",
			"X-Ref":        "$ref stays $ref ${NOPE}",
		},
	}))
	if _, err := r.Call(context.Background(), "demo_shop.op", nil); err != nil {
		t.Fatalf("Call: %v", err)
	}
	h := p.requests()[0].Header
	want := map[string]string{
		"X-Configured": "config-value",
		"X-File":       "file-value",
		"X-Env":        "pre-env-value-post",
		"X-Both":       "file",
		"X-Ref":        "$ref stays $ref ${NOPE}",
	}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("%s: got %q, want %q", k, got, v)
		}
	}
}

func TestUnresolvedVariableIsAnErrorNamingTheKey(t *testing.T) {
	t.Parallel()
	p := newProvider(t, nil)
	r := newRegistry(t, utcp.WithLookupEnv(func(k string) (string, bool) {
		if k == "API_TOKEN" {
			return "bare", true
		}
		return "", false
	}))
	register(t, r, "demo_shop", manualOf("op", nil, map[string]any{
		"call_template_type": "http", "url": p.URL,
		"auth": map[string]any{"auth_type": "api_key", "api_key": "Bearer ${API_TOKEN}", "var_name": "Authorization"},
	}))
	_, err := r.Call(context.Background(), "demo_shop.op", nil)
	var vn *utcp.VariableNotFoundError
	if !errors.As(err, &vn) || vn.Key != "demo__shop_API_TOKEN" {
		t.Fatalf("got %v, want VariableNotFoundError for demo__shop_API_TOKEN", err)
	}
	if got := len(p.requests()); got != 0 {
		t.Errorf("provider saw %d requests, want 0: an unresolved variable is never sent", got)
	}
}

func TestToolTemplatesResolvedOnEveryCall(t *testing.T) {
	t.Parallel()
	p := newProvider(t, nil)
	var mu sync.Mutex
	token := "first"
	r := newRegistry(t, utcp.WithVariableLoader(utcp.VariableLoaderFunc(func(k string) (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		if k == "svc_TOKEN" {
			return token, true
		}
		return "", false
	})))
	register(t, r, "svc", manualOf("op", nil, map[string]any{"call_template_type": "http", "url": p.URL, "headers": map[string]any{"X-Token": "$TOKEN"}}))
	for _, want := range []string{"first", "second"} {
		mu.Lock()
		token = want
		mu.Unlock()
		if _, err := r.Call(context.Background(), "svc.op", nil); err != nil {
			t.Fatalf("Call: %v", err)
		}
		reqs := p.requests()
		if got := reqs[len(reqs)-1].Header.Get("X-Token"); got != want {
			t.Errorf("X-Token: got %q, want %q", got, want)
		}
	}
}

func TestDiscoveryTemplateResolvedAtRegistration(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, utcp.WithLookupEnv(func(string) (string, bool) { return "", false }))
	tmpl := `{"name": "remote", "call_template_type": "http", "url": "https://${HOST}/utcp"}`
	_, err := r.Register(context.Background(), "", utcp.FromTemplate([]byte(tmpl)))
	var vn *utcp.VariableNotFoundError
	if !errors.As(err, &vn) || vn.Key != "remote_HOST" {
		t.Errorf("got %v, want VariableNotFoundError for remote_HOST", err)
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
	got, err := utcp.ParseDotEnv(strings.NewReader(in))
	if err != nil {
		t.Fatalf("ParseDotEnv: %v", err)
	}
	want := utcp.DotEnv{"A": "plain", "B": "spaced", "C": "double \"quoted\"\nline", "D": "single $NOT #kept", "E": "multi\nline", "F": "", "G": "a=b"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v, want %#v", got, want)
	}
	if _, ok := got.Lookup("F"); ok {
		t.Errorf("an empty value must not count as set")
	}
	for _, bad := range []string{"no equals sign", `X="unterminated`, "X='open", "1 2=3"} {
		if _, err := utcp.ParseDotEnv(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseDotEnv(%q): got no error, want one", bad)
		}
	}
}
