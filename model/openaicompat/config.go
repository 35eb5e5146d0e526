package openaicompat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v4"

	"github.com/exprd/exprd/model"
)

// Defaults and limits of a provider's settings.
const (
	// DefaultMaxRetries is how many times a request is retried after a 408,
	// 409, 429, 5xx or a connection error, when the config says nothing.
	DefaultMaxRetries = 2
	// MaxMaxRetries is the most retries a config may ask for.
	MaxMaxRetries = 10
	// DefaultMaxRetryDelay caps the backoff between attempts, and is the
	// longest Retry-After honoured: a server that asks for a longer wait
	// gets no retry, and the caller gets its [model.HTTPError] at once.
	DefaultMaxRetryDelay = 30 * time.Second
	// MaxMaxRetryDelay is the longest max_retry_delay a config may set.
	MaxMaxRetryDelay = 10 * time.Minute
)

// Config names the providers of a deployment. In YAML:
//
//	default: hosted
//	providers:
//	  hosted:
//	    base_url: https://api.openai.com/v1
//	    api_key_env: OPENAI_API_KEY
//	    model: gpt-4.1-mini
//	    params: {temperature: 0.2, max_tokens: 2048}
//	  local:
//	    base_url: http://127.0.0.1:11434/v1
//	    model: qwen3:8b
//	    params: {extra: {top_k: 40}}
type Config struct {
	// Default is the provider a request that names none gets; empty: the
	// first name in sorted order.
	Default   string                    `json:"default,omitempty"`
	Providers map[string]ProviderConfig `json:"providers"`
}

// ProviderConfig is one OpenAI-compatible endpoint and how to call it.
type ProviderConfig struct {
	// BaseURL is the API root, up to and including the version
	// (https://api.openai.com/v1, http://127.0.0.1:11434/v1 for Ollama,
	// http://127.0.0.1:8000/v1 for vLLM, http://127.0.0.1:8080/v1 for
	// llama.cpp). Required.
	BaseURL string `json:"base_url"`
	// APIKeyEnv names the environment variable that holds the API key, sent
	// as a bearer token; empty sends none (local servers). The key itself is
	// never in the config.
	APIKeyEnv string `json:"api_key_env,omitempty"`
	// Model is the model name sent with each request. Required.
	Model string `json:"model"`
	// Stream asks for replies streamed over SSE; default true. False sends
	// plain requests and replays each reply as one text delta and one delta
	// per tool call, for servers whose streamed tool calls are broken.
	Stream *bool `json:"stream,omitempty"`
	// StreamUsage asks a streamed reply for its token usage
	// (stream_options.include_usage); default true. Turn it off for a server
	// that refuses stream_options.
	StreamUsage *bool `json:"stream_usage,omitempty"`
	// MaxTokensField is the body field max_tokens is sent as: "max_tokens"
	// (default: what every compatible server knows) or
	// "max_completion_tokens" (what OpenAI's reasoning models require).
	MaxTokensField string `json:"max_tokens_field,omitempty"`
	// MaxRetries: see [DefaultMaxRetries]; 0 turns retries off.
	MaxRetries *int `json:"max_retries,omitempty"`
	// MaxRetryDelay: see [DefaultMaxRetryDelay]. A Go duration ("30s").
	MaxRetryDelay Duration `json:"max_retry_delay,omitempty"`
	// Timeout bounds each attempt, reading the reply included; zero (the
	// default) leaves it to the caller's context. A Go duration ("2m").
	Timeout Duration `json:"timeout,omitempty"`
	// Headers are sent with every request (never put a secret here).
	Headers map[string]string `json:"headers,omitempty"`
	// Params are the provider's sampling parameters; a request's own
	// [model.Params] override them field by field.
	Params model.Params `json:"params,omitempty"`
}

// Duration is a time.Duration written as a Go duration string ("1m30s").
type Duration time.Duration

// UnmarshalJSON accepts a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New("want a duration string such as \"30s\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration such as \"30s\"", s)
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// The max_tokens field names.
const (
	MaxTokensField           = "max_tokens"
	MaxCompletionTokensField = "max_completion_tokens"
)

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// LoadConfig reads a YAML or JSON config file (see [ParseConfig]).
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("model config: %w", err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig decodes a YAML or JSON config (JSON is YAML) strictly and
// validates it. Errors name the bad key as a path
// ("providers.local.params.temperature: ..."): an unknown key, a value of
// the wrong type or out of range, and an api_key, since keys come only from
// the environment; a duplicate key and a second document are errors too.
// The file is YAML 1.2: yes, no, on and off are strings, not booleans, and
// a date stays the text it was written as.
func ParseConfig(data []byte) (Config, error) {
	generic, err := decodeYAML(data)
	if err != nil {
		return Config{}, fmt.Errorf("model config: %w", err)
	}
	if generic == nil {
		return Config{}, errors.New("model config: empty")
	}
	js, err := json.Marshal(generic)
	if err != nil {
		return Config{}, fmt.Errorf("model config: %w", err)
	}
	if err := checkKeys("", generic, reflect.TypeFor[Config]()); err != nil {
		return Config{}, fmt.Errorf("model config: %w", err)
	}
	// Decode provider by provider, so that a type error names its provider.
	var top struct {
		Default   string                     `json:"default"`
		Providers map[string]json.RawMessage `json:"providers"`
	}
	if err := decodeStrict(js, &top, ""); err != nil {
		return Config{}, fmt.Errorf("model config: %w", err)
	}
	cfg := Config{Default: top.Default, Providers: make(map[string]ProviderConfig, len(top.Providers))}
	for name, raw := range top.Providers {
		var pc ProviderConfig
		if err := decodeStrict(raw, &pc, "providers."+name+"."); err != nil {
			return Config{}, fmt.Errorf("model config: %w", err)
		}
		cfg.Providers[name] = pc
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// decodeYAML decodes one YAML document into what encoding/json would make
// of the same document in JSON; nil for none.
func decodeYAML(data []byte) (any, error) {
	l, err := yaml.NewLoader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	switch err := l.Load(&doc); err {
	case nil:
	case io.EOF:
		return nil, nil
	default:
		return nil, err
	}
	switch err := l.Load(&yaml.Node{}); err {
	case io.EOF:
	case nil:
		return nil, errors.New("more than one YAML document")
	default:
		return nil, err
	}
	keepDates(&doc)
	var v any
	if err := doc.Decode(&v); err != nil {
		return nil, err
	}
	return jsonValue("", v)
}

// keepDates makes plain scalars that YAML reads as timestamps strings, as
// written: JSON has no time, and "2023-06-01" is a header's value, not
// midnight UTC.
func keepDates(n *yaml.Node) {
	if n.Kind == yaml.ScalarNode && n.Style == 0 && n.ShortTag() == "!!timestamp" {
		n.Tag = "!!str"
	}
	for _, c := range n.Content {
		keepDates(c)
	}
}

// jsonValue makes a decoded YAML value encodable as JSON: a mapping's keys
// strings, every number finite.
func jsonValue(path string, v any) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			c, err := jsonValue(join(path, k), e)
			if err != nil {
				return nil, err
			}
			x[k] = c
		}
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			key := fmt.Sprint(k)
			c, err := jsonValue(join(path, key), e)
			if err != nil {
				return nil, err
			}
			out[key] = c
		}
		return out, nil
	case []any:
		for i, e := range x {
			c, err := jsonValue(fmt.Sprintf("%s[%d]", path, i), e)
			if err != nil {
				return nil, err
			}
			x[i] = c
		}
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return nil, fmt.Errorf("%s: %v is not a finite number", path, x)
		}
	}
	return v, nil
}

// decodeStrict decodes JSON, naming a mistyped field by its path.
func decodeStrict(data []byte, v any, path string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &te) && te.Field != "":
		return fmt.Errorf("%s%s: want %s, not %s", path, te.Field, te.Type, te.Value)
	case errors.As(err, &te) && path != "":
		return fmt.Errorf("%s: want a mapping, not %s", strings.TrimSuffix(path, "."), te.Value)
	case path != "":
		return fmt.Errorf("%s %w", strings.TrimSuffix(path, "."), err)
	}
	return err
}

// checkKeys walks a decoded document against the struct it decodes into,
// so that an unknown or misplaced key, or a bad duration, is reported with
// its full path.
func checkKeys(path string, v any, t reflect.Type) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[Duration]() {
		// Its own decoder cannot say where it is.
		var d Duration
		b, _ := json.Marshal(v)
		if err := d.UnmarshalJSON(b); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return nil
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil // type mismatches are the decoder's to report
	}
	switch t.Kind() {
	case reflect.Struct:
		fields := map[string]reflect.Type{}
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name != "" && name != "-" {
				fields[name] = f.Type
			}
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := join(path, k)
			ft, ok := fields[k]
			switch {
			case k == "api_key":
				return fmt.Errorf("%s: API keys are read only from the environment: set api_key_env to the variable's name", p)
			case !ok:
				return fmt.Errorf("%s: unknown key", p)
			}
			if err := checkKeys(p, obj[k], ft); err != nil {
				return err
			}
		}
	case reflect.Map:
		if t.Elem().Kind() != reflect.Struct {
			return nil // free-form: headers, params.extra
		}
		for k, sub := range obj {
			if err := checkKeys(join(path, k), sub, t.Elem()); err != nil {
				return err
			}
		}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Validate reports the first bad value, naming its key.
func (c *Config) Validate() error {
	if len(c.Providers) == 0 {
		return errors.New("model config: providers: none configured")
	}
	names := c.names()
	for _, name := range names {
		pc := c.Providers[name]
		if name == "" {
			return errors.New("model config: providers: empty provider name")
		}
		if err := pc.Validate(); err != nil {
			return fmt.Errorf("model config: providers.%s.%w", name, err)
		}
	}
	if c.Default != "" {
		if _, ok := c.Providers[c.Default]; !ok {
			return fmt.Errorf("model config: default: no provider named %q (configured: %s)", c.Default, strings.Join(names, ", "))
		}
	}
	return nil
}

func (c *Config) names() []string {
	names := make([]string, 0, len(c.Providers))
	for n := range c.Providers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Validate reports the first bad value as "key: reason".
func (pc *ProviderConfig) Validate() error {
	if pc.BaseURL == "" {
		return errors.New("base_url: required")
	}
	u, err := url.Parse(pc.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("base_url: %q is not an absolute http(s) URL", pc.BaseURL)
	}
	if u.User != nil {
		return errors.New("base_url: holds credentials; put the key in the environment and name it in api_key_env")
	}
	if pc.Model == "" {
		return errors.New("model: required")
	}
	if pc.APIKeyEnv != "" && !envName.MatchString(pc.APIKeyEnv) {
		return fmt.Errorf("api_key_env: %q is not an environment variable name", pc.APIKeyEnv)
	}
	switch pc.MaxTokensField {
	case "", MaxTokensField, MaxCompletionTokensField:
	default:
		return fmt.Errorf("max_tokens_field: %q is neither %q nor %q", pc.MaxTokensField, MaxTokensField, MaxCompletionTokensField)
	}
	if r := pc.MaxRetries; r != nil && (*r < 0 || *r > MaxMaxRetries) {
		return fmt.Errorf("max_retries: %d is out of range [0, %d]", *r, MaxMaxRetries)
	}
	if d := time.Duration(pc.MaxRetryDelay); d < 0 || d > MaxMaxRetryDelay {
		return fmt.Errorf("max_retry_delay: %s is out of range [0, %s] (0: the default)", d, MaxMaxRetryDelay)
	}
	if d := time.Duration(pc.Timeout); d < 0 {
		return fmt.Errorf("timeout: %s is negative", d)
	}
	for k := range pc.Headers {
		if strings.EqualFold(k, "Authorization") {
			return fmt.Errorf("headers.%s: credentials belong in the environment: set api_key_env", k)
		}
	}
	if err := pc.Params.Validate(); err != nil {
		return fmt.Errorf("params.%w", err)
	}
	return nil
}

// NewRegistry builds a provider for each entry of a validated config and
// registers it under its name, the config's default as the default. The
// options apply to every provider. A provider whose api_key_env names an
// unset variable is an error, at once rather than at its first request.
func NewRegistry(cfg Config, opts ...Option) (*model.Registry, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	reg := model.NewRegistry()
	for _, name := range cfg.names() {
		p, err := newProvider(name, cfg.Providers[name], opts)
		if err != nil {
			_ = reg.Close()
			return nil, fmt.Errorf("model config: providers.%s.%w", name, err)
		}
		if err := reg.Register(name, p); err != nil {
			_ = reg.Close()
			return nil, err
		}
	}
	if cfg.Default != "" {
		if err := reg.SetDefault(cfg.Default); err != nil {
			_ = reg.Close()
			return nil, err
		}
	}
	return reg, nil
}
