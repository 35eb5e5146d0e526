package httptransport

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/manual"
)

// OAuth2 token cache settings.
const (
	// DefaultTokenLifetime is how long a token without expires_in is kept
	// (the SDK's value).
	DefaultTokenLifetime = time.Hour
	// TokenRefreshMargin: a token is fetched anew this long before it
	// expires (or at half its life, when that is shorter), so a request never
	// leaves with a token about to lapse.
	TokenRefreshMargin = 30 * time.Second
	// maxTokenResponseBytes bounds a token endpoint's answer.
	maxTokenResponseBytes = 64 << 10
)

// Option configures the transports Transports makes. An invalid value
// makes Transports fail.
type Option func(*config) error

type config struct {
	now func() time.Time
}

// WithClock reads the time OAuth2 tokens are cached by from now (for tests
// that let a token's life pass). Default: time.Now.
func WithClock(now func() time.Time) Option {
	return func(c *config) error {
		if now == nil {
			return errors.New("httptransport: WithClock(nil)")
		}
		c.now = now
		return nil
	}
}

// Transports returns the transports of the http, streamable_http and sse
// call templates, by type, configured by opts: give them to a registry
// with utcp.WithTransports. They build nothing but the parsed template
// (the registry's HTTP client does the rest); the OAuth2 tokens they fetch
// are cached in the registry's Env.Shared, one cache for the three.
func Transports(opts ...Option) (map[string]utcp.TransportFactory, error) {
	c := &config{now: time.Now}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	return map[string]utcp.TransportFactory{
		utcp.TypeHTTP:           c.newHTTP,
		utcp.TypeStreamableHTTP: c.newStreamable,
		utcp.TypeSSE:            c.newSSE,
	}, nil
}

// tokens is the registry's OAuth2 token cache for transports of c, kept in
// env.Shared (a transport built without one gets a cache of its own).
func (c *config) tokens(env utcp.Env) (*tokenCache, error) {
	if env.Shared == nil {
		return newTokenCache(c.now), nil
	}
	cl, err := env.Shared.Get(fmt.Sprintf("httptransport.tokens/%p", c), func() (io.Closer, error) {
		return newTokenCache(c.now), nil
	})
	if err != nil {
		return nil, err
	}
	return cl.(*tokenCache), nil
}

// prepare finishes a decoded template for env: its static URL checked,
// its OAuth2 token cache found.
func (c *config) prepare(spec *httpSpec, env utcp.Env) error {
	if err := spec.prepareStaticURL(env); err != nil {
		return err
	}
	if a := spec.auth; a != nil && a.Type == manual.AuthBasic {
		// What the Authorization header carries, which a provider may echo.
		env.ConcealAlso("", basicCredentials(a.Username, a.Password))
	}
	if spec.auth != nil && spec.auth.Type == manual.AuthOAuth2 {
		tokens, err := c.tokens(env)
		if err != nil {
			return err
		}
		spec.tokens = tokens
	}
	return nil
}
