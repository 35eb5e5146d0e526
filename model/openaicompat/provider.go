package openaicompat

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/exprd/exprd/membudget"
	"github.com/exprd/exprd/model"
)

// MaxReplyBytes bounds a reply: a non-streamed reply's body, a streamed
// reply's text, refusal, tool names and arguments together. A larger one is
// [model.ErrReplyTooLarge].
const MaxReplyBytes = 8 << 20

// CallBytes is what each tool call of a streamed reply counts toward
// MaxReplyBytes besides its name and arguments: what the call holds while
// the reply is assembled (its slot, its entry by wire index, its deltas),
// so that a reply of many empty calls is bounded as one of much text is
// (a reply of 500,000 one-letter calls held 242 MiB; now a reply holds at
// most MaxReplyBytes/CallBytes, 32,768, calls).
const CallBytes = 256

// DefaultIdleConns is how many idle connections to its server a provider
// keeps for reuse: as many as its turns in flight at once may use, so
// that a wave of streaming turns does not open a fresh connection for
// each (http.DefaultTransport keeps 2 a host: 100 turns at once then
// opened 98 connections again at every wave). An idle connection costs a
// file descriptor and its buffers (about 10 KiB) until the transport's
// idle timeout (90 s) closes it.
const DefaultIdleConns = 1024

// chatPath is the endpoint, relative to the base URL.
const chatPath = "chat/completions"

// Option configures how providers are built.
type Option func(*options) error

type options struct {
	httpClient *http.Client
	idleConns  int
	maxConns   int
	tlsConfig  *tls.Config
	lookupEnv  func(string) (string, bool)
	memory     *membudget.Budget
}

// replyMemory is what reading a reply may hold in the memory budget: twice
// its bytes (the bytes and what is decoded from them), up to twice the
// most a reply keeps (MaxReplyBytes) and one event line (MaxEventBytes).
const replyMemory = 2 * (MaxReplyBytes + MaxEventBytes)

// WithMemoryBudget reserves what reading a reply holds from b before it
// is read, up to replyMemory a reply; a reply the budget cannot hold
// fails with b's *membudget.ExhaustedError. Default: none.
func WithMemoryBudget(b *membudget.Budget) Option {
	return func(o *options) error {
		o.memory = b
		return nil
	}
}

// WithIdleConns keeps at most n idle connections to the server for reuse
// (default DefaultIdleConns), over the provider's own transport; with
// WithHTTPClient the client's transport decides. n must be positive.
func WithIdleConns(n int) Option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("WithIdleConns(%d): want a positive count", n)
		}
		o.idleConns = n
		return nil
	}
}

// WithMaxConns opens at most n connections to the server at once
// (dialing, in use or idle), over the provider's own transport; with
// WithHTTPClient the client's transport decides. 0, the default, is no
// limit. Over HTTP/2 it bounds the connections a burst of turns dials
// before the server's answer says it speaks HTTP/2: without it, a burst of
// n turns started at once dials about n connections and keeps the spare
// ones, though each could carry the server's limit of streams (250 for Go's
// server). Over HTTP/1.1 it bounds the turns in flight to the server: the
// others wait for a connection. n must not be negative.
func WithMaxConns(n int) Option {
	return func(o *options) error {
		if n < 0 {
			return fmt.Errorf("WithMaxConns(%d): want 0 (no limit) or a positive count", n)
		}
		o.maxConns = n
		return nil
	}
}

// WithTLSConfig dials the server's TLS with a clone of c (its RootCAs, for
// a server whose certificate a private CA signs), over the provider's own
// transport; with WithHTTPClient the client's transport decides. HTTP/2 is
// still offered by ALPN, as without it (Go turns it off by default once a
// TLS config is set). A nil c is an error.
func WithTLSConfig(c *tls.Config) Option {
	return func(o *options) error {
		if c == nil {
			return errors.New("WithTLSConfig: nil config")
		}
		o.tlsConfig = c.Clone()
		return nil
	}
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
	endpoint       string      // the base URL's chat/completions
	header         http.Header // every request's, read-only once built
	client         *http.Client
	maxRetries     int
	maxRetryDelay  time.Duration
	timeout        time.Duration   // per attempt; 0: none
	transport      *http.Transport // owned, closed by Close; nil with WithHTTPClient
	memory         *membudget.Budget
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
	base, err := url.Parse(cfg.BaseURL) // Validate has parsed it
	if err != nil {
		return nil, fmt.Errorf("base_url: %w", err)
	}
	if !strings.HasSuffix(base.Path, "/") {
		base.Path += "/"
	}
	p.endpoint = base.ResolveReference(&url.URL{Path: chatPath}).String()
	p.header = http.Header{
		"Content-Type": {"application/json"},
		"Accept":       {"application/json"},
		"User-Agent":   {userAgent},
	}
	if key != "" {
		p.header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range cfg.Headers {
		p.header.Set(k, v)
	}
	client := o.httpClient
	if client == nil {
		client = &http.Client{Transport: http.DefaultTransport}
		if t, ok := http.DefaultTransport.(*http.Transport); ok {
			p.transport = t.Clone()
			idle := cmp.Or(o.idleConns, DefaultIdleConns)
			p.transport.MaxIdleConns, p.transport.MaxIdleConnsPerHost = idle, idle
			p.transport.MaxConnsPerHost = o.maxConns
			// An https server that offers HTTP/2 gets it, by ALPN: its
			// turns in flight share a connection. Go drops HTTP/2 from a
			// transport given its own TLS config unless told to keep it.
			// Never cleartext HTTP/2 (h2c): a plain http server gets
			// HTTP/1.1, which every server speaks.
			p.transport.ForceAttemptHTTP2 = true
			if o.tlsConfig != nil {
				p.transport.TLSClientConfig = o.tlsConfig
			}
			client.Transport = p.transport
		}
	}
	// A redirect would carry the key to another origin: refuse them all.
	noRedirect := *client
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	p.client = &noRedirect
	p.maxRetries, p.maxRetryDelay = DefaultMaxRetries, DefaultMaxRetryDelay
	if cfg.MaxRetries != nil {
		p.maxRetries = *cfg.MaxRetries
	}
	if cfg.MaxRetryDelay > 0 {
		p.maxRetryDelay = time.Duration(cfg.MaxRetryDelay)
	}
	p.timeout = time.Duration(cfg.Timeout)
	p.memory = o.memory
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
	sctx, cancel := context.WithCancel(ctx)
	raw, attempts, stop, err := p.send(sctx, body)
	if err != nil {
		cancel()
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, p.wrap(ctxErr)
		}
		return nil, p.wrap(err)
	}
	if stop != nil { // the attempt's own timeout, which the reply's reading keeps
		outer := cancel
		cancel = func() { stop(); outer() }
	}
	if raw.StatusCode < 200 || raw.StatusCode > 299 {
		// A redirect, not followed.
		cancel()
		_ = raw.Body.Close()
		return nil, p.wrap(&model.HTTPError{StatusCode: raw.StatusCode, Attempts: attempts})
	}
	reply := membudget.NewReadCloser(sctx, raw.Body, p.memory.Empty("a model's reply"), 2, replyMemory)
	// The reply's type decides how to read it, not what was asked for:
	// some servers ignore "stream".
	if mt, _, _ := mime.ParseMediaType(raw.Header.Get("Content-Type")); mt == "text/event-stream" {
		return newChatStream(sctx, cancel, p, reply), nil
	}
	defer cancel()
	defer reply.Close()
	var wc wireCompletion
	if err := decodeBody(reply, &wc); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, p.wrap(ctxErr)
		}
		return nil, p.wrap(err)
	}
	resp, err := responseFromCompletion(&wc)
	if err != nil {
		return nil, p.wrap(err)
	}
	return model.NewResponseStream(resp), nil
}

func decodeBody(r io.Reader, wc *wireCompletion) error {
	body, err := io.ReadAll(io.LimitReader(r, MaxReplyBytes+1))
	if err != nil {
		return fmt.Errorf("%w: %w", model.ErrStreamCut, err)
	}
	if len(body) > MaxReplyBytes {
		return fmt.Errorf("%w: a body larger than %d bytes", model.ErrReplyTooLarge, MaxReplyBytes)
	}
	if err := json.Unmarshal(body, wc); err != nil {
		return fmt.Errorf("%w: %w", model.ErrMalformedChunk, err)
	}
	return nil
}

func (p *Provider) wrap(err error) error {
	return fmt.Errorf("model provider %q: %w", p.name, err)
}
