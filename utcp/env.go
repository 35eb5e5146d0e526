package utcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/exprd/exprd/internal/egress"
	"github.com/exprd/exprd/internal/redact"
	"github.com/exprd/exprd/utcp/manual"
	"github.com/exprd/exprd/utcp/vars"
)

// Env is what a Registry gives the transports it builds.
type Env struct {
	// Manual is the (sanitised) name of the manual the template belongs to.
	Manual string
	// HTTPClient is the registry's client: it never follows a redirect to
	// another host, nor one to a URL the registry's policy refuses.
	HTTPClient *http.Client
	// MaxResponseBytes bounds a response body, and a stream's line or event.
	MaxResponseBytes int64
	// Shared holds resources (connections, pools, caches such as OAuth2
	// tokens) shared by every transport of the registry and closed with it.
	Shared *Shared

	egress       *egress.Policy
	dialer       *egress.Dialer
	showMessages bool // the operator lets providers' error types and codes through
	operator     bool // the manual is the operator's (WithOperator)
	logger       *slog.Logger
	secrets      *vars.Secrets // the values bound to Manual, kept out of its provider's messages
}

// Logger is the registry's logger (WithLogger), for what a transport tells
// the operator: never nil (a logger that discards when none was given).
func (e Env) Logger() *slog.Logger {
	if e.logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return e.logger
}

// Conceal returns text with the values bound to the env's manual replaced
// (vars.Secrets.Conceal): for what a transport keeps of a provider's answer
// for the log.
func (e Env) Conceal(text string) string { return e.secrets.Conceal(text) }

// ConcealAlso makes value, had for the env's manual at run time (an
// OAuth2 token fetched with its credentials), one of its secrets: slot
// names what it replaces (the token cache's entry), of which the last
// two are kept.
func (e Env) ConcealAlso(slot, value string) { e.secrets.Add(slot, value) }

// ProviderFields is what a caller may be shown of a provider's decoded
// error answer (parsed), only where the operator opted in
// (WithProviderMessages): its error type and code, each kept only when it
// is a short identifier-like token (redact.Fields, redact.Token) that
// does not give away a value bound to the env's manual
// (vars.Secrets.Withholds). nil when nothing may be shown.
func (e Env) ProviderFields(parsed any) map[string]any {
	if !e.showMessages {
		return nil
	}
	return redact.Fields(parsed, e.secrets.Withholds)
}

type responseLimitKey struct{}

// WithResponseLimit returns ctx carrying a cap on the bytes a call under it
// may read from its provider (a body, a stream's line or event, a gRPC
// message, a collected stream): a caller that will refuse a result over n
// bytes need not read more. Transports read the smaller of it and
// Env.MaxResponseBytes (Env.ResponseLimit).
func WithResponseLimit(ctx context.Context, n int64) context.Context {
	if n <= 0 {
		return ctx
	}
	return context.WithValue(ctx, responseLimitKey{}, n)
}

// ResponseLimit is the most a call under ctx may read: the registry's
// MaxResponseBytes, or the caller's smaller WithResponseLimit.
func (e Env) ResponseLimit(ctx context.Context) int64 {
	limit := e.MaxResponseBytes
	if limit <= 0 {
		limit = DefaultMaxResponseBytes
	}
	if n, ok := ctx.Value(responseLimitKey{}).(int64); ok && n < limit {
		return n
	}
	return limit
}

// dialTimeout bounds one connection attempt; the call's deadline bounds
// the rest.
const dialTimeout = 10 * time.Second

// DialContext connects through the egress policy: a transport that does
// not use HTTPClient (gRPC: grpc.WithContextDialer) must dial with it and
// nothing else. A refused address fails before anything is sent, with an error
// that wraps an *egress.Error.
func (e Env) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	return e.dialer.DialContext(ctx, network, address)
}

// CheckHost is the egress policy's early check of a host known before any
// DNS (an IP literal, localhost): nil when it may be reached, or when only
// the resolved address can tell.
func (e Env) CheckHost(host string) error {
	if e.egress == nil {
		return nil
	}
	return e.egress.CheckHost(host)
}

// PlaintextAllowed reports whether a connection without TLS may go to host
// (a host name or IP, no port): only to a host the operator's egress
// policy lists. Transports other than HTTP (gRPC without TLS) ask it too.
func (e Env) PlaintextAllowed(host string) bool {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return e.egress != nil && e.egress.PlaintextAllowed(host)
}

// CheckURL refuses what an HTTP request may not reach: a host the egress
// policy refuses before any DNS (an IP literal), anything but http(s), and
// plain http:// to a host the policy does not list. The error is a
// *TransportError (ReasonEgress or ReasonInsecureURL).
func (e Env) CheckURL(u *url.URL, tool string) error {
	if u.Hostname() == "" {
		return &TransportError{Tool: tool, Reason: ReasonInsecureURL, Body: "the URL has no host", cause: fmt.Errorf("no host in %q", u.Redacted())}
	}
	if err := e.CheckHost(u.Hostname()); err != nil {
		return EgressError(tool, err)
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
	case "http":
		if !e.PlaintextAllowed(u.Hostname()) {
			return &TransportError{Tool: tool, Reason: ReasonInsecureURL, cause: fmt.Errorf("refused URL %q", u.Redacted())}
		}
	default:
		return &TransportError{Tool: tool, Reason: ReasonInsecureURL, cause: fmt.Errorf("refused URL %q", u.Redacted())}
	}
	return nil
}

// egressFieldError refuses a template field naming a host the egress
// policy refuses outright. The host is the template's own (an IP literal):
// saying why tells its author nothing they did not write.
func egressFieldError(field, host string, err error) *manual.FieldError {
	why := "not an address exprd may reach"
	var ee *egress.Error
	if errors.As(err, &ee) && ee.Why != "" {
		why = ee.Why
	}
	return &manual.FieldError{Path: field, Msg: fmt.Sprintf("exprd may not connect to %s: it is %s, and the operator's egress policy does not list it", host, why)}
}

// CheckHostField is the registration check of a template field naming a
// host (a gRPC template's host): a *manual.FieldError when the egress policy
// refuses it before any DNS.
func (e Env) CheckHostField(field, host string) error {
	if err := e.CheckHost(host); err != nil {
		return egressFieldError(field, host, err)
	}
	return nil
}

// Shared is a registry-wide set of resources keyed by name, opened on first
// use and closed with the registry.
type Shared struct {
	mu     sync.Mutex
	items  map[string]io.Closer
	closed bool
}

// Get returns the resource under key, opening it with open the first time.
func (s *Shared) Get(key string, open func() (io.Closer, error)) (io.Closer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("utcp: registry closed")
	}
	if c, ok := s.items[key]; ok {
		return c, nil
	}
	c, err := open()
	if err != nil {
		return nil, err
	}
	if s.items == nil {
		s.items = make(map[string]io.Closer)
	}
	s.items[key] = c
	return c, nil
}

func (s *Shared) close() error {
	s.mu.Lock()
	items := s.items
	s.items, s.closed = nil, true
	s.mu.Unlock()
	var errs []error
	for _, c := range items {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// errRedirectRefused marks a redirect the client would not follow.
var errRedirectRefused = errors.New("redirect refused")

// maxRedirects bounds same-host redirects.
const maxRedirects = 5

// redirectPolicy follows a redirect only to the same host (and port), and
// only to a URL the policy allows.
func (e Env) redirectPolicy(req *http.Request, via []*http.Request) error {
	if len(via) > maxRedirects {
		return fmt.Errorf("%w: more than %d redirects", errRedirectRefused, maxRedirects)
	}
	from := via[0].URL
	if !strings.EqualFold(req.URL.Host, from.Host) {
		return fmt.Errorf("%w: %s to another host", errRedirectRefused, req.Response.Status)
	}
	if e.CheckURL(req.URL, "") != nil {
		return fmt.Errorf("%w: to a refused URL", errRedirectRefused)
	}
	return nil
}

// DoError is what a transport returns when Env.HTTPClient's Do fails: the
// caller's context error (the registry maps it) when ctx ended, else a
// *TransportError (a refused redirect, an address the egress policy
// refuses, an unreachable provider).
func DoError(ctx context.Context, err error, tool string) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	var te *TransportError
	if errors.As(err, &te) {
		return te
	}
	if errors.Is(err, errRedirectRefused) {
		return &TransportError{Tool: tool, Reason: ReasonRedirect, cause: err}
	}
	var ee *egress.Error
	if errors.As(err, &ee) {
		return EgressError(tool, err)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &TransportError{Tool: tool, Reason: ReasonUnreachable, cause: err}
	}
	return &TransportError{Tool: tool, Reason: ReasonUnreachable, cause: err}
}
