package openaicompat_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/exprd/exprd/model/openaicompat"
)

func TestLoadConfig(t *testing.T) {
	t.Parallel()
	cfg, err := openaicompat.LoadConfig("testdata/providers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	h, l := cfg.Providers["hosted"], cfg.Providers["local"]
	if cfg.Default != "local" || h.APIKeyEnv != "EXPRD_TEST_OPENAI_KEY" || *h.MaxRetries != 4 ||
		time.Duration(h.MaxRetryDelay) != 20*time.Second || time.Duration(h.Timeout) != 2*time.Minute ||
		*h.Params.Temperature != 0.2 || *h.Params.MaxTokens != 2048 || h.Headers["X-Team"] != "search" {
		t.Errorf("got hosted %+v", h)
	}
	if l.Model != "qwen3:8b" || *l.StreamUsage || *l.Params.TopP != 0.9 || l.Params.Extra["top_k"] != float64(40) || l.Params.Stop[0] != "</answer>" {
		t.Errorf("got local %+v", l)
	}
	env := func(name string) (string, bool) { return "sk-test", name == "EXPRD_TEST_OPENAI_KEY" }
	reg, err := openaicompat.NewRegistry(cfg, openaicompat.WithLookupEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	if got := strings.Join(reg.Names(), ","); got != "hosted,local" || reg.Default() != "local" {
		t.Errorf("got names %s and default %q, want hosted,local and local", got, reg.Default())
	}
	p, err := reg.Get("")
	if err != nil || p.(*openaicompat.Provider).Name() != "local" {
		t.Errorf("Get(\"\"): got %v, %v; want the local provider", p, err)
	}
	if _, err := reg.Get("gpt"); err == nil || !strings.Contains(err.Error(), "(configured: hosted, local)") {
		t.Errorf("Get(gpt): got %v, want an error listing the providers", err)
	}
}

// TestConfigYAML: anchors and merge keys work, a date is kept as written,
// and a mapping with a numeric key is read with the key as text.
func TestConfigYAML(t *testing.T) {
	t.Parallel()
	_, err := openaicompat.ParseConfig([]byte(`
common: &common {base_url: "http://127.0.0.1:8080/v1", max_retries: 3}
providers:
  a: {<<: *common, model: m, headers: {anthropic-version: 2023-06-01}}
  b: {<<: *common, model: n, params: {extra: {logit_bias: {50256: -100}}}}
`[1:]))
	if err == nil || !strings.Contains(err.Error(), "common: unknown key") {
		t.Fatalf("got %v, want the unknown top-level key refused", err)
	}
	cfg, err := openaicompat.ParseConfig([]byte(`
providers:
  a: &a {base_url: "http://127.0.0.1:8080/v1", max_retries: 3, model: m, headers: {anthropic-version: 2023-06-01}}
  b: {<<: *a, model: n, params: {extra: {logit_bias: {50256: -100}}}}
`[1:]))
	if err != nil {
		t.Fatal(err)
	}
	a, b := cfg.Providers["a"], cfg.Providers["b"]
	if got := a.Headers["anthropic-version"]; got != "2023-06-01" {
		t.Errorf("got header %q, want the date as written", got)
	}
	if b.BaseURL != a.BaseURL || *b.MaxRetries != 3 || b.Model != "n" {
		t.Errorf("got b %+v, want a's settings merged in and its own model", b)
	}
	if bias, _ := b.Params.Extra["logit_bias"].(map[string]any); bias["50256"] != float64(-100) {
		t.Errorf("got logit_bias %v, want {\"50256\": -100}", b.Params.Extra["logit_bias"])
	}
}

func TestLoadConfigJSON(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "models.json")
	err := os.WriteFile(path, []byte(`{"providers": {"vllm": {"base_url": "http://127.0.0.1:8000/v1", "model": "Qwen/Qwen3-8B", "stream": false}}}`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := openaicompat.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if *cfg.Providers["vllm"].Stream {
		t.Error("got stream true, want false")
	}
	reg, err := openaicompat.NewRegistry(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	if reg.Default() != "vllm" {
		t.Errorf("got default %q, want the only provider", reg.Default())
	}
	if _, err := openaicompat.LoadConfig(filepath.Join(t.TempDir(), "none.yaml")); err == nil {
		t.Error("got no error for a missing file")
	}
}

// TestConfigErrors: every bad config is refused with the path of the bad
// key; each limit at the limit and one past it.
func TestConfigErrors(t *testing.T) {
	t.Parallel()
	const base = "providers:\n  p:\n    base_url: http://127.0.0.1:8080/v1\n    model: m\n"
	tests := []struct {
		name, yaml, wantErr string
	}{
		{"valid", base, ""},
		{"empty", "", "model config: empty"},
		{"no providers", "providers: {}", "providers: none configured"},
		{"unknown top-level key", base + "defaults: p\n", "defaults: unknown key"},
		{"unknown provider key", base + "    temprature: 1\n", "providers.p.temprature: unknown key"},
		{"unknown params key", base + "    params: {temprature: 1}\n", "providers.p.params.temprature: unknown key"},
		{"a key in the file", base + "    api_key: sk-123\n", "providers.p.api_key: API keys are read only from the environment"},
		{"a key in the headers", base + "    headers: {Authorization: Bearer x}\n", "providers.p.headers.Authorization: credentials belong in the environment"},
		{"a key in the URL", "providers:\n  p: {base_url: 'http://u:pw@127.0.0.1/v1', model: m}\n", "providers.p.base_url: holds credentials"},
		{"duplicate key", base + "    model: n\n", `mapping key "model" already defined`},
		{"duplicate nested key", base + "    params: {temperature: 1, temperature: 2}\n", `mapping key "temperature" already defined`},
		{"two documents", base + "---\n" + base, "more than one YAML document"},
		{"only comments", "# nothing yet\n", "model config: empty"},
		{"null", "null\n", "model config: empty"},
		{"a YAML 1.1 boolean", base + "    stream: yes\n", "providers.p.stream: want bool, not string"},
		{"a number that is not finite", base + "    params: {temperature: .nan}\n", "providers.p.params.temperature: NaN is not a finite number"},
		{"an infinite number in a list", base + "    params: {extra: {weights: [1, .inf]}}\n", "providers.p.params.extra.weights[1]: +Inf is not a finite number"},
		{"no base_url", "providers:\n  p: {model: m}\n", "providers.p.base_url: required"},
		{"relative base_url", "providers:\n  p: {base_url: /v1, model: m}\n", `providers.p.base_url: "/v1" is not an absolute http(s) URL`},
		{"ftp base_url", "providers:\n  p: {base_url: 'ftp://x/v1', model: m}\n", "is not an absolute http(s) URL"},
		{"no model", "providers:\n  p: {base_url: 'http://x/v1'}\n", "providers.p.model: required"},
		{"bad env name", base + "    api_key_env: OPENAI-KEY\n", `providers.p.api_key_env: "OPENAI-KEY" is not an environment variable name`},
		{"bad max_tokens_field", base + "    max_tokens_field: tokens\n", "providers.p.max_tokens_field:"},
		{"max_retries at the limit", base + "    max_retries: 10\n", ""},
		{"max_retries past the limit", base + "    max_retries: 11\n", "providers.p.max_retries: 11 is out of range [0, 10]"},
		{"negative max_retries", base + "    max_retries: -1\n", "providers.p.max_retries: -1 is out of range"},
		{"max_retries not a number", base + "    max_retries: many\n", "providers.p.max_retries: want int"},
		{"max_retry_delay at the limit", base + "    max_retry_delay: 10m\n", ""},
		{"max_retry_delay past the limit", base + "    max_retry_delay: 10m1ns\n", "providers.p.max_retry_delay: 10m0.000000001s is out of range"},
		{"max_retry_delay not a duration", base + "    max_retry_delay: 30\n", "providers.p.max_retry_delay: want a duration string"},
		{"a provider not a mapping", "providers:\n  p: 5\n", "providers.p: want a mapping, not number"},
		{"providers not a mapping", "providers: [1]\n", "model config:"},
		{"timeout not a duration", base + "    timeout: soon\n", `providers.p.timeout: "soon" is not a duration`},
		{"negative timeout", base + "    timeout: -1s\n", "providers.p.timeout: -1s is negative"},
		{"temperature past the limit", base + "    params: {temperature: 2.5}\n", "providers.p.params.temperature: 2.5 is out of range [0, 2]"},
		{"extra sets a field", base + "    params: {extra: {stream: false}}\n", "providers.p.params.extra.stream: a field the provider sets itself"},
		{"unknown default", base + "default: q\n", `default: no provider named "q" (configured: p)`},
		{"not a mapping", "- a\n- b\n", "model config:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := openaicompat.ParseConfig([]byte(tt.yaml))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("got %v, want no error", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestNewRegistryErrors(t *testing.T) {
	t.Parallel()
	cfg := openaicompat.Config{Providers: map[string]openaicompat.ProviderConfig{
		"hosted": {BaseURL: "https://api.example.com/v1", Model: "m", APIKeyEnv: "EXPRD_UNSET_KEY"},
	}}
	unset := openaicompat.WithLookupEnv(func(string) (string, bool) { return "", false })
	_, err := openaicompat.NewRegistry(cfg, unset)
	if err == nil || !strings.Contains(err.Error(), "providers.hosted.api_key_env: environment variable EXPRD_UNSET_KEY is not set") {
		t.Errorf("got %v, want an error naming the unset variable", err)
	}
	empty := openaicompat.WithLookupEnv(func(string) (string, bool) { return "", true })
	if _, err := openaicompat.NewRegistry(cfg, empty); err == nil {
		t.Error("got no error for an empty key")
	}
	if _, err := openaicompat.NewRegistry(openaicompat.Config{}); err == nil {
		t.Error("got no error for an empty config")
	}
}

func TestOptionErrors(t *testing.T) {
	t.Parallel()
	cfg := openaicompat.ProviderConfig{BaseURL: "http://127.0.0.1:1/v1", Model: "m"}
	for _, opt := range []openaicompat.Option{openaicompat.WithHTTPClient(nil), openaicompat.WithLookupEnv(nil)} {
		if _, err := openaicompat.New("x", cfg, opt); err == nil || !strings.Contains(err.Error(), `provider "x"`) {
			t.Errorf("got %v, want an error naming the provider", err)
		}
	}
	if _, err := openaicompat.New("x", openaicompat.ProviderConfig{Model: "m"}); err == nil || !strings.Contains(err.Error(), "base_url: required") {
		t.Errorf("got %v, want base_url: required", err)
	}
}

func TestWithHTTPClient(t *testing.T) {
	t.Parallel()
	srv := serve(t, ok)
	var used bool
	c := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		used = true
		return http.DefaultTransport.RoundTrip(r)
	})}
	p := provider(t, srv, nil, openaicompat.WithHTTPClient(c))
	if _, _, err := turn(t, p, ask); err != nil {
		t.Fatal(err)
	}
	if !used {
		t.Error("the client given was not used")
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
