package openaicompat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/exprd/exprd/model"
)

// MaxReplyBytes bounds a reply: a non-streamed reply's body, a streamed
// reply's text, refusal, tool names and arguments together. A larger one is
// [model.ErrReplyTooLarge].
const MaxReplyBytes = 8 << 20

// chatPath is the endpoint, relative to the base URL.
const chatPath = "chat/completions"

var sdkPlatformHeaders = []string{
	"X-Stainless-Arch", "X-Stainless-Lang", "X-Stainless-Os", "X-Stainless-Package-Version",
	"X-Stainless-Runtime", "X-Stainless-Runtime-Version",
}

// Option configures how providers are built.
type Option func(*options) error

type options struct {
	httpClient *http.Client
	lookupEnv  func(string) (string, bool)
}

// WithHTTPClient sends the requests through c. Default: a client of the
// provider's own over a clone of [http.DefaultTransport], whose idle
// connections [Provider.Close] releases. Redirects are not followed either
// way. A nil client is an error.
func WithHTTPClient(c *http.Client) Option {
	return func(o *options) error {
		if c == nil {
			return errors.New("WithHTTPClient: nil client")
		}
		o.httpClient = c
		return nil
	}
}

// WithLookupEnv reads api_key_env's variable through f. Default:
// [os.LookupEnv]. A nil f is an error.
func WithLookupEnv(f func(string) (string, bool)) Option {
	return func(o *options) error {
		if f == nil {
			return errors.New("WithLookupEnv: nil function")
		}
		o.lookupEnv = f
		return nil
	}
}

// Provider is a [model.Provider] for one OpenAI-compatible endpoint. It is
// safe for concurrent use.
type Provider struct {
	name           string
	model          string
	stream         bool
	streamUsage    bool
	maxTokensField string
	params         model.Params
	client         openai.Client
	transport      *http.Transport // owned, closed by Close; nil with WithHTTPClient
}

var (
	_ model.Provider = (*Provider)(nil)
	_ io.Closer      = (*Provider)(nil)
)

// New builds the provider named name from its settings. Errors name the bad
// setting: an invalid value, or an api_key_env whose variable is not set.
func New(name string, cfg ProviderConfig, opts ...Option) (*Provider, error) {
	p, err := newProvider(name, cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("openaicompat: provider %q: %w", name, err)
	}
	return p, nil
}

func newProvider(name string, cfg ProviderConfig, opts []Option) (*Provider, error) {
	o := options{lookupEnv: os.LookupEnv}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var key string
	if cfg.APIKeyEnv != "" {
		v, ok := o.lookupEnv(cfg.APIKeyEnv)
		if !ok || v == "" {
			return nil, fmt.Errorf("api_key_env: environment variable %s is not set", cfg.APIKeyEnv)
		}
		key = v
	}
	p := &Provider{
		name:           name,
		model:          cfg.Model,
		stream:         cfg.Stream == nil || *cfg.Stream,
		streamUsage:    cfg.StreamUsage == nil || *cfg.StreamUsage,
		maxTokensField: cfg.MaxTokensField,
		params:         cfg.Params,
	}
	if p.maxTokensField == "" {
		p.maxTokensField = MaxTokensField
	}
	client := o.httpClient
	if client == nil {
		client = &http.Client{Transport: http.DefaultTransport}
		if t, ok := http.DefaultTransport.(*http.Transport); ok {
			p.transport = t.Clone()
			client.Transport = p.transport
		}
	}
	// A redirect would carry the key to another origin: refuse them all.
	noRedirect := *client
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	maxRetries, retryDelay := DefaultMaxRetries, DefaultMaxRetryDelay
	if cfg.MaxRetries != nil {
		maxRetries = *cfg.MaxRetries
	}
	if cfg.MaxRetryDelay > 0 {
		retryDelay = time.Duration(cfg.MaxRetryDelay)
	}
	// The SDK's own retry loop is used: it retries 408, 409, 429, 5xx and
	// connection errors, never once a 200 has arrived, honours Retry-After
	// and Retry-After-Ms (seconds or HTTP-date) up to the max delay, backs
	// off exponentially with jitter otherwise, and waits on the request's
	// context. See retry.go for what is added to it.
	sdk := []option.RequestOption{
		option.WithBaseURL(cfg.BaseURL),
		option.WithHTTPClient(&noRedirect),
		option.WithMaxRetries(maxRetries),
		option.WithMaxRetryDelay(retryDelay),
	}
	if key != "" {
		sdk = append(sdk, option.WithAPIKey(key))
	}
	if cfg.Timeout > 0 {
		sdk = append(sdk, option.WithRequestTimeout(time.Duration(cfg.Timeout)))
	}
	// The SDK's platform headers tell OpenAI about the client; no server
	// needs them, and with them a request's header map outgrows Go's small
	// map and costs some 12µs a turn more to build, clone and parse.
	for _, h := range sdkPlatformHeaders {
		sdk = append(sdk, option.WithHeaderDel(h))
	}
	for k, v := range cfg.Headers {
		sdk = append(sdk, option.WithHeader(k, v))
	}
	// Not openai.NewClient: it would also read OPENAI_API_KEY, OPENAI_BASE_URL
	// and friends from the environment, and hand a hosted key to a local
	// server. The config is the only source. Client.Post is the SDK's
	// documented way to send a body of one's own.
	p.client = openai.Client{Options: sdk}
	return p, nil
}

// Name is the provider's name in its registry.
func (p *Provider) Name() string { return p.name }

// Close releases the idle connections of the provider's own transport.
func (p *Provider) Close() error {
	if p.transport != nil {
		p.transport.CloseIdleConnections()
	}
	return nil
}

// Stream sends the turn and returns its reply. See the package doc for how
// replies are read.
func (p *Provider) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	if err := req.Validate(); err != nil {
		return nil, p.wrap(err)
	}
	body, err := p.buildBody(&req)
	if err != nil {
		return nil, p.wrap(err)
	}
	tr := &tracker{}
	sctx, cancel := context.WithCancel(ctx)
	var raw *http.Response
	if err := p.client.Post(sctx, chatPath, body, &raw, option.WithMiddleware(tr.middleware)); err != nil {
		cancel()
		return nil, p.requestErr(ctx, err, tr)
	}
	if raw == nil || raw.Body == nil {
		cancel()
		return nil, p.wrap(fmt.Errorf("%w: no response body", model.ErrStreamCut))
	}
	if raw.StatusCode < 200 || raw.StatusCode > 299 {
		// A redirect: the SDK hands back any status below 400.
		cancel()
		_ = raw.Body.Close()
		return nil, p.wrap(&model.HTTPError{StatusCode: raw.StatusCode, Attempts: tr.attempts})
	}
	// The reply's type decides how to read it, not what was asked for:
	// some servers ignore "stream".
	if mt, _, _ := mime.ParseMediaType(raw.Header.Get("Content-Type")); mt == "text/event-stream" {
		return newChatStream(sctx, cancel, p, raw.Body), nil
	}
	defer cancel()
	defer raw.Body.Close()
	var cc openai.ChatCompletion
	if err := decodeBody(raw.Body, &cc); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, p.wrap(ctxErr)
		}
		return nil, p.wrap(err)
	}
	return p.completionStream(&cc)
}

func (p *Provider) completionStream(cc *openai.ChatCompletion) (model.Stream, error) {
	resp, err := responseFromCompletion(cc)
	if err != nil {
		return nil, p.wrap(err)
	}
	return model.NewResponseStream(resp), nil
}

func decodeBody(r io.Reader, cc *openai.ChatCompletion) error {
	body, err := io.ReadAll(io.LimitReader(r, MaxReplyBytes+1))
	if err != nil {
		return fmt.Errorf("%w: %w", model.ErrStreamCut, err)
	}
	if len(body) > MaxReplyBytes {
		return fmt.Errorf("%w: a body larger than %d bytes", model.ErrReplyTooLarge, MaxReplyBytes)
	}
	if err := json.Unmarshal(body, cc); err != nil {
		return fmt.Errorf("%w: %w", model.ErrMalformedChunk, err)
	}
	return nil
}

func (p *Provider) wrap(err error) error {
	return fmt.Errorf("model provider %q: %w", p.name, err)
}
