package utcp

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/exprd/exprd/internal/egress"
	"github.com/exprd/exprd/membudget"
	"github.com/exprd/exprd/utcp/vars"
)

// Registry defaults.
const (
	// DefaultTimeout is a call's deadline when its template sets no
	// `timeout` (the caller's deadline still wins when it is sooner). It
	// also bounds a discovery request.
	DefaultTimeout = 10 * time.Second
	// DefaultMaxResponseBytes caps a response body, a manual, and a
	// stream's line or event.
	DefaultMaxResponseBytes = 8 << 20
	// DefaultMaxIdleConnsPerHost keeps warm connections to each provider.
	DefaultMaxIdleConnsPerHost = 32
	// DefaultMaxManuals bounds the manuals registered at once.
	DefaultMaxManuals = 256
	// DefaultMaxTools bounds the tools registered at once, over every
	// manual.
	DefaultMaxTools = 10_000
)

// Option configures a Registry. An invalid value makes New fail.
type Option func(*config) error

type config struct {
	timeout      time.Duration
	maxResponse  int64
	memory       *membudget.Budget
	maxManuals   int
	maxTools     int
	wrap         func(http.RoundTripper) http.RoundTripper
	egress       *egress.Policy
	resolver     *net.Resolver
	showMessages bool
	logger       *slog.Logger
	variables    map[string]string
	loaders      []vars.Loader
	factories    map[string]TransportFactory
	converter    Converter
	index        Index
	observers    []CallObserver
}

func defaultConfig() config {
	return config{
		timeout:     DefaultTimeout,
		maxResponse: DefaultMaxResponseBytes,
		maxManuals:  DefaultMaxManuals,
		maxTools:    DefaultMaxTools,
		egress:      egress.Public(),
		variables:   map[string]string{},
		factories:   defaultFactories(),
	}
}

// WithTimeout sets the deadline of a call whose template has no `timeout`.
// Default DefaultTimeout (10 s).
func WithTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("utcp: WithTimeout(%s): must be positive", d)
		}
		c.timeout = d
		return nil
	}
}

// WithMaxResponseBytes caps response bodies, manuals and stream lines.
// Default DefaultMaxResponseBytes (8 MiB).
func WithMaxResponseBytes(n int64) Option {
	return func(c *config) error {
		if n <= 0 {
			return fmt.Errorf("utcp: WithMaxResponseBytes(%d): must be positive", n)
		}
		c.maxResponse = n
		return nil
	}
}

// WithMaxManuals bounds the manuals registered at once (default
// DefaultMaxManuals); a registration past it is a *LimitError.
func WithMaxManuals(n int) Option {
	return func(c *config) error {
		if n <= 0 {
			return fmt.Errorf("utcp: WithMaxManuals(%d): must be positive", n)
		}
		c.maxManuals = n
		return nil
	}
}

// WithMaxTools bounds the tools registered at once over every manual
// (default DefaultMaxTools); a registration that would pass it is a
// *LimitError.
func WithMaxTools(n int) Option {
	return func(c *config) error {
		if n <= 0 {
			return fmt.Errorf("utcp: WithMaxTools(%d): must be positive", n)
		}
		c.maxTools = n
		return nil
	}
}

// WithRoundTripper wraps the registry's HTTP transport (for tracing, say):
// wrap gets the transport that dials through the egress policy and
// returns the one requests go through. It must not dial by other means.
// Default: none.
func WithRoundTripper(wrap func(http.RoundTripper) http.RoundTripper) Option {
	return func(c *config) error {
		if wrap == nil {
			return errors.New("utcp: WithRoundTripper(nil)")
		}
		c.wrap = wrap
		return nil
	}
}

// WithEgress sets where the registry may connect on a client's behalf:
// every connection of every transport (tool calls, manual and OpenAPI
// fetches, OAuth2 token requests, redirects) is checked on its resolved
// address, and plain http:// or plaintext gRPC may reach only the hosts
// the policy lists. Default: egress.Public(), public addresses only, over
// TLS.
func WithEgress(p *egress.Policy) Option {
	return func(c *config) error {
		if p == nil {
			return errors.New("utcp: WithEgress(nil)")
		}
		c.egress = p
		return nil
	}
}

// WithResolver resolves providers' host names through r (default
// net.DefaultResolver). The egress policy judges what it answers.
func WithResolver(r *net.Resolver) Option {
	return func(c *config) error {
		c.resolver = r
		return nil
	}
}

// WithLogger logs what a failed call's caller is not shown (the
// provider's body, the address a refused name resolved to) at Warn.
// Default: none.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		c.logger = l
		return nil
	}
}

// WithProviderMessages lets what an allowlist chooses of a provider's
// error answer reach the caller: its status's reason phrase, and the
// error type and code of its JSON body when each is a short
// identifier-like token that gives away no value bound to the manual
// (Env.ProviderFields). Its free text (a message, a plain-text or HTML
// body) never does. Default: off; an error shows only what failed and the
// status code.
func WithProviderMessages() Option {
	return func(c *config) error {
		c.showMessages = true
		return nil
	}
}

// WithVariables adds configured variables, the first place a ${VAR} is
// looked up (under its namespaced key, e.g. "demo__shop_API_TOKEN").
func WithVariables(vars map[string]string) Option {
	return func(c *config) error {
		for k, v := range vars {
			c.variables[k] = v
		}
		return nil
	}
}

// WithVariableLoader adds a source looked up after the configured
// variables, in the order added. It must be the operator's: a source a
// client can write to would let a manual read it.
func WithVariableLoader(l vars.Loader) Option {
	return func(c *config) error {
		if l == nil {
			return errors.New("utcp: WithVariableLoader(nil)")
		}
		c.loaders = append(c.loaders, l)
		return nil
	}
}

// WithDotEnvFile loads a .env file (see vars.ParseDotEnv) as a variable loader.
// A file that cannot be read or parsed makes New fail.
func WithDotEnvFile(path string) Option {
	return func(c *config) error {
		env, err := vars.LoadDotEnv(path)
		if err != nil {
			return fmt.Errorf("utcp: WithDotEnvFile: %w", err)
		}
		c.loaders = append(c.loaders, env)
		return nil
	}
}

// WithSecretDir loads a directory of files as a variable loader, one
// variable a file: its name is the namespaced key, its content the value
// (a Kubernetes Secret mounted as a volume). It is read once, here; a
// directory that cannot be read makes New fail.
func WithSecretDir(dir string) Option {
	return func(c *config) error {
		env, err := vars.LoadSecretDir(dir)
		if err != nil {
			return fmt.Errorf("utcp: WithSecretDir: %w", err)
		}
		c.loaders = append(c.loaders, env)
		return nil
	}
}

// WithEnv makes these environment variables sources, each under its own
// name as a namespaced key (`weather_API_KEY` binds API_KEY to the manual
// `weather`). The process environment is read for these keys only, once,
// here; a key that is not set makes New fail. Default: none, so a manual
// can never reach the process's environment (OPENAI_API_KEY,
// EXPRD_AUTH_TOKENS) by choosing its name.
func WithEnv(keys ...string) Option {
	return func(c *config) error {
		env := vars.DotEnv{}
		for _, k := range keys {
			if !vars.IsKey(k) {
				return fmt.Errorf("utcp: WithEnv(%q): not a namespaced key (MANUAL_VARIABLE, each _ of the manual's name doubled)", k)
			}
			v, ok := os.LookupEnv(k)
			if !ok {
				return fmt.Errorf("utcp: WithEnv: %s is not set in the environment", k)
			}
			env[k] = v
		}
		c.loaders = append(c.loaders, env)
		return nil
	}
}

// WithTransport adds or replaces the transport of a call template type
// (httptransport has http, streamable_http and sse; grpctransport grpc).
// Default: only `text` (FromText's manuals register; their tools cannot be
// called).
func WithTransport(kind string, f TransportFactory) Option {
	return func(c *config) error {
		if kind == "" || f == nil {
			return errors.New("utcp: WithTransport needs a type and a factory")
		}
		c.factories[kind] = f
		return nil
	}
}

// WithTransports is WithTransport for each type of fs.
func WithTransports(fs map[string]TransportFactory) Option {
	return func(c *config) error {
		for kind, f := range fs {
			if err := WithTransport(kind, f)(c); err != nil {
				return err
			}
		}
		return nil
	}
}

// WithConverter reads the documents Register meets that are not UTCP
// manuals (from a URL, a file or a template's discovery) through conv:
// openapi.Converter{} reads OpenAPI 3 and Swagger 2. Default: none, and
// such a document is refused.
func WithConverter(conv Converter) Option {
	return func(c *config) error {
		if conv == nil {
			return errors.New("utcp: WithConverter(nil)")
		}
		c.converter = conv
		return nil
	}
}

// WithIndex ranks the registry's tools for Search with ix, the index of
// no tools it starts from (search.New() is exprd's); every registration
// and removal derives the next one (Index.With). Default: none, and Search
// finds nothing.
func WithIndex(ix Index) Option {
	return func(c *config) error {
		if ix == nil {
			return errors.New("utcp: WithIndex(nil)")
		}
		c.index = ix
		return nil
	}
}

// WithCallObserver has o told of every call of a registered tool (see
// CallObserver): to time it, count its outcome, or run it under a span.
// Observers given more than once nest, the first outermost. Default: none.
func WithCallObserver(o CallObserver) Option {
	return func(c *config) error {
		if o == nil {
			return errors.New("utcp: WithCallObserver(nil)")
		}
		c.observers = append(c.observers, o)
		return nil
	}
}

// WithMemoryBudget makes a call's reading of its answer reserve from b as
// it reads (three times the bytes: the body and the value decoded from
// it), given back when the call returns. When b cannot hold it, the call
// fails with ReasonMemory. Default: no budget.
func WithMemoryBudget(b *membudget.Budget) Option {
	return func(c *config) error { c.memory = b; return nil }
}
