package utcp_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/internal/utcptest"
	"github.com/exprd/exprd/utcp/vars"
)

func TestVariablesLookupOrderAndNamespacing(t *testing.T) {
	t.Parallel()
	p := utcptest.NewProvider(t, nil)
	dir := t.TempDir()
	envFile := filepath.Join(dir, ".env")
	if err := os.WriteFile(envFile, []byte("# keys\nexport demo__shop_FROM_FILE=file-value\ndemo__shop_BOTH=file\nAPI_TOKEN=bare-name-is-never-used\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	later := vars.DotEnv{"demo__shop_FROM_LOADER": "loader-value", "demo__shop_BOTH": "loader", "demo__shop_CONFIGURED": "loader"}
	r := utcptest.NewRegistry(t,
		utcp.WithVariables(map[string]string{"demo__shop_CONFIGURED": "config-value"}),
		utcp.WithDotEnvFile(envFile),
		utcp.WithVariableLoader(later),
	)
	utcptest.Register(t, r, "demo-shop", utcptest.ManualOf("op", nil, map[string]any{
		"call_template_type": "http",
		"url":                p.URL + "/x",
		"headers": map[string]any{
			"X-Configured": "${CONFIGURED}",
			"X-File":       "$FROM_FILE",
			"X-Loader":     "pre-${FROM_LOADER}-post",
			"X-Both":       "${BOTH}",
			"X-Ref":        "$ref stays $ref ${NOPE}",
		},
	}))
	if _, err := r.Call(context.Background(), "demo_shop.op", nil); err != nil {
		t.Fatalf("Call: %v", err)
	}
	h := p.Requests()[0].Header
	want := map[string]string{
		"X-Configured": "config-value",
		"X-File":       "file-value",
		"X-Loader":     "pre-loader-value-post",
		"X-Both":       "file",
		"X-Ref":        "$ref stays $ref ${NOPE}",
	}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("%s: got %q, want %q", k, got, v)
		}
	}
}

// A variable with no value bound to the manual is refused when the manual
// is registered, naming the variable and where it appears; nothing is
// registered and nothing is sent.
func TestUnboundVariableRefusedAtRegistration(t *testing.T) {
	t.Parallel()
	p := utcptest.NewProvider(t, nil)
	r := utcptest.NewRegistry(t, utcp.WithVariables(map[string]string{"API_TOKEN": "bare", "other_API_TOKEN": "another manual's"}))
	utcptest.Register(t, r, "demo_shop", utcptest.ManualOf("ok", nil, map[string]any{"call_template_type": "http", "url": p.URL}))
	cases := []struct {
		name string
		tmpl map[string]any
		path string
	}{
		{"url", map[string]any{"call_template_type": "http", "url": p.URL + "/${API_TOKEN}"}, "tools[0].tool_call_template.url"},
		{"header", map[string]any{"call_template_type": "http", "url": p.URL, "headers": map[string]any{"X-K": "$API_TOKEN"}}, `tools[0].tool_call_template.headers["X-K"]`},
		{"auth", map[string]any{"call_template_type": "http", "url": p.URL,
			"auth": map[string]any{"auth_type": "api_key", "api_key": "Bearer ${API_TOKEN}", "var_name": "Authorization"}}, "tools[0].tool_call_template.auth.api_key"},
		{"basic", map[string]any{"call_template_type": "http", "url": p.URL,
			"auth": map[string]any{"auth_type": "basic", "username": "u", "password": "${API_TOKEN}"}}, "tools[0].tool_call_template.auth.password"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := r.Register(context.Background(), "demo_shop2", utcp.FromText(utcptest.ManualOf("op", nil, tc.tmpl)).AllowProtocols("http"))
			var vn *vars.NotFoundError
			if !errors.As(err, &vn) || vn.Key != "demo__shop2_API_TOKEN" || vn.Name != "API_TOKEN" || vn.Path != tc.path {
				t.Fatalf("got %v (%+v), want VariableNotFoundError for API_TOKEN at %s", err, vn, tc.path)
			}
			if _, err := r.Tool("demo_shop2.op"); err == nil {
				t.Errorf("the manual was registered")
			}
		})
	}
	if got := len(p.Requests()); got != 0 {
		t.Errorf("provider saw %d requests, want 0: an unbound variable is never sent", got)
	}
}

// A key binds one (manual, variable) pair: the manual `a` cannot reach
// the manual `a_b`'s C by asking for the variable `_b_C`, though both
// spell the key a__b_C.
func TestNamespacedKeyBindsOnePair(t *testing.T) {
	t.Parallel()
	p := utcptest.NewProvider(t, nil)
	r := utcptest.NewRegistry(t, utcp.WithVariables(map[string]string{"a__b_C": "secret-of-a_b"}))
	_, err := r.Register(context.Background(), "a", utcp.FromText(utcptest.ManualOf("op", nil, map[string]any{
		"call_template_type": "http", "url": p.URL + "/?k=${_b_C}"})).AllowProtocols("http"))
	if !errors.Is(err, vars.ErrNotFound) {
		t.Fatalf("got %v, want ErrVariableNotFound", err)
	}
	utcptest.Register(t, r, "a_b", utcptest.ManualOf("op", nil, map[string]any{"call_template_type": "http", "url": p.URL + "/?k=${C}"}))
	if _, err := r.Call(context.Background(), "a_b.op", nil); err != nil {
		t.Fatal(err)
	}
	if got := p.Requests()[0].Query; got != "k=secret-of-a_b" {
		t.Errorf("query: got %q", got)
	}
}

// The process environment is a source only for the keys the operator
// lists: a manual named after an environment variable's prefix reaches
// nothing.
func TestEnvironmentOnlyForListedKeys(t *testing.T) {
	t.Setenv("EXFIL_API_KEY", "process-secret")
	t.Setenv("listed_API_KEY", "listed-value")
	p := utcptest.NewProvider(t, nil)
	r := utcptest.NewRegistry(t, utcp.WithEnv("listed_API_KEY"))
	_, err := r.Register(context.Background(), "EXFIL", utcp.FromText(utcptest.ManualOf("t", nil, map[string]any{
		"call_template_type": "http", "url": p.URL + "/?k=${API_KEY}"})).AllowProtocols("http"))
	if !errors.Is(err, vars.ErrNotFound) {
		t.Fatalf("got %v, want ErrVariableNotFound", err)
	}
	utcptest.Register(t, r, "listed", utcptest.ManualOf("t", nil, map[string]any{"call_template_type": "http", "url": p.URL, "headers": map[string]any{"X-K": "${API_KEY}"}}))
	if _, err := r.Call(context.Background(), "listed.t", nil); err != nil {
		t.Fatal(err)
	}
	reqs := p.Requests()
	if len(reqs) != 1 || reqs[0].Header.Get("X-K") != "listed-value" {
		t.Errorf("provider saw %+v, want one request with X-K: listed-value", reqs)
	}
	if _, err := utcp.New(utcp.WithEnv("unset_NOT_THERE_AT_ALL")); err == nil {
		t.Errorf("WithEnv of an unset key: got no error")
	}
	if _, err := utcp.New(utcp.WithEnv("NOSEPARATOR")); err == nil {
		t.Errorf("WithEnv of a key binding no manual: got no error")
	}
}

func TestSecretDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, v := range map[string]string{"svc_TOKEN": "s3cret\n", "..data": "skipped", ".hidden": "skipped"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p := utcptest.NewProvider(t, nil)
	r := utcptest.NewRegistry(t, utcp.WithSecretDir(dir))
	utcptest.Register(t, r, "svc", utcptest.ManualOf("op", nil, map[string]any{"call_template_type": "http", "url": p.URL, "headers": map[string]any{"X-Token": "$TOKEN"}}))
	if _, err := r.Call(context.Background(), "svc.op", nil); err != nil {
		t.Fatal(err)
	}
	if got := p.Requests()[0].Header.Get("X-Token"); got != "s3cret" {
		t.Errorf("X-Token: got %q, want s3cret", got)
	}
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "not-a-key"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := utcp.New(utcp.WithSecretDir(bad)); err == nil {
		t.Errorf("a file name that is not a key: got no error")
	}
	if _, err := utcp.New(utcp.WithSecretDir(filepath.Join(bad, "missing"))); err == nil {
		t.Errorf("a missing directory: got no error")
	}
}

func TestToolTemplatesResolvedOnEveryCall(t *testing.T) {
	t.Parallel()
	p := utcptest.NewProvider(t, nil)
	var mu sync.Mutex
	token := "first"
	r := utcptest.NewRegistry(t, utcp.WithVariableLoader(vars.LoaderFunc(func(k string) (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		if k == "svc_TOKEN" {
			return token, true
		}
		return "", false
	})))
	utcptest.Register(t, r, "svc", utcptest.ManualOf("op", nil, map[string]any{"call_template_type": "http", "url": p.URL, "headers": map[string]any{"X-Token": "$TOKEN"}}))
	for _, want := range []string{"first", "second"} {
		mu.Lock()
		token = want
		mu.Unlock()
		if _, err := r.Call(context.Background(), "svc.op", nil); err != nil {
			t.Fatalf("Call: %v", err)
		}
		reqs := p.Requests()
		if got := reqs[len(reqs)-1].Header.Get("X-Token"); got != want {
			t.Errorf("X-Token: got %q, want %q", got, want)
		}
	}
}

func TestDiscoveryTemplateResolvedAtRegistration(t *testing.T) {
	t.Parallel()
	r := utcptest.NewRegistry(t)
	tmpl := `{"name": "remote", "call_template_type": "http", "url": "https://${HOST}/utcp"}`
	_, err := r.Register(context.Background(), "", utcp.FromTemplate([]byte(tmpl)))
	var vn *vars.NotFoundError
	if !errors.As(err, &vn) || vn.Key != "remote_HOST" || vn.Path != "url" {
		t.Errorf("got %v, want VariableNotFoundError for remote_HOST at url", err)
	}
}

// A secrets directory is bounded: files of MaxSecretBytes and
// MaxSecretFiles of them are read, one byte or one file more is refused.
func TestSecretDirBounds(t *testing.T) {
	t.Parallel()
	dir := func(t *testing.T, files, size int) string {
		d := t.TempDir()
		for i := range files {
			if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("m_K%d", i)), []byte(strings.Repeat("x", size)), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	for _, tc := range []struct {
		name        string
		files, size int
		ok          bool
	}{
		{"a file at the byte limit", 1, vars.MaxSecretBytes, true},
		{"a file one byte past it", 1, vars.MaxSecretBytes + 1, false},
		{"files at the count limit", vars.MaxSecretFiles, 1, true},
		{"one file past it", vars.MaxSecretFiles + 1, 1, false},
	} {
		_, err := utcp.New(utcp.WithSecretDir(dir(t, tc.files, tc.size)))
		if (err == nil) != tc.ok {
			t.Errorf("%s: got %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}
