package utcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/exprd/exprd/internal/egress"
	"github.com/exprd/exprd/membudget"
)

// Transport calls the tools of one call template type. The registry builds
// one from a tool's template (with variables resolved) through the
// TransportFactory registered for its call_template_type, and calls it with
// arguments already checked against the tool's input schema, under a context
// that carries the deadline in force. A Transport must be safe for concurrent
// use.
type Transport interface {
	// Call runs the tool and returns its result as decoded JSON (or text).
	Call(ctx context.Context, t *Tool, args map[string]any) (any, error)
	// Stream runs the tool and returns its result chunk by chunk, each as it
	// arrives. A transport without streams returns one chunk, the result of
	// Call.
	Stream(ctx context.Context, t *Tool, args map[string]any) (Stream, error)
}

// Stream yields a streaming tool's chunks. Next returns io.EOF only when the
// provider ended the stream cleanly; a stream that breaks is an error, never
// an end. Close releases the stream early (and is safe after io.EOF). A
// Stream is used by one goroutine at a time.
type Stream interface {
	Next() (chunk any, err error)
	Close() error
}

// Discoverer is implemented by transports that can fetch a manual, so that
// a call template of their type can be registered (`http` fetches its URL,
// `text` returns its content; a gRPC transport would call GetManual). The
// document is a UTCP manual or an OpenAPI document, in JSON or YAML.
type Discoverer interface {
	Discover(ctx context.Context) (*Document, error)
}

// Document is what discovery found.
type Document struct {
	Body        []byte
	ContentType string // the media type when known ("application/json", "application/yaml")
	Location    string // where it came from (a URL or path), for OpenAPI relative server URLs
}

// TransportFactory builds a Transport from a call template (JSON, variables
// resolved, call_template_type set). It is called once at registration for
// each tool to check the template's shape (a refused field is a *FieldError
// whose Path is the field's, e.g. "url"), and again on a call whenever the
// resolved template differs from the last one built. Building must be cheap
// and must not do I/O; long-lived resources such as connections belong in
// Env.Shared, so that every Transport built for the same target reuses them.
type TransportFactory func(template json.RawMessage, env Env) (Transport, error)

// Call template types built in.
const (
	TypeHTTP           = "http"
	TypeStreamableHTTP = "streamable_http"
	TypeSSE            = "sse"
	TypeText           = "text"
)

var (
	factoriesMu sync.RWMutex
	factories   = map[string]TransportFactory{
		TypeHTTP:           newHTTPTransport,
		TypeStreamableHTTP: newStreamableTransport,
		TypeSSE:            newSSETransport,
		TypeText:           newTextTransport,
	}
)

// RegisterTransport adds a transport for a call template type to the
// defaults every new Registry starts from (a gRPC transport package calls it
// from init, or the server passes WithTransport to one Registry). A type
// already registered is an error.
func RegisterTransport(kind string, f TransportFactory) error {
	if kind == "" || f == nil {
		return errors.New("utcp: RegisterTransport needs a type and a factory")
	}
	factoriesMu.Lock()
	defer factoriesMu.Unlock()
	if _, ok := factories[kind]; ok {
		return fmt.Errorf("utcp: a transport for %q is already registered", kind)
	}
	factories[kind] = f
	return nil
}

// TransportTypes lists the call template types with a default transport.
func TransportTypes() []string {
	factoriesMu.RLock()
	defer factoriesMu.RUnlock()
	out := make([]string, 0, len(factories))
	for k := range factories {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func defaultFactories() map[string]TransportFactory {
	factoriesMu.RLock()
	defer factoriesMu.RUnlock()
	out := make(map[string]TransportFactory, len(factories))
	for k, f := range factories {
		out[k] = f
	}
	return out
}

// Env is what a Registry gives the transports it builds.
type Env struct {
	// Manual is the (sanitised) name of the manual the template belongs to.
	Manual string
	// HTTPClient is the registry's client: it never follows a redirect to
	// another host, nor one to a URL the registry's policy refuses.
	HTTPClient *http.Client
	// MaxResponseBytes bounds a response body, and a stream's line or event.
	MaxResponseBytes int64
	// Shared holds resources (connections, pools) shared by every transport
	// of the registry and closed with it.
	Shared *Shared

	egress       *egress.Policy
	dialer       *egress.Dialer
	showMessages bool // the operator lets providers' short messages through
	tokens       *tokenCache
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

// DialContext connects through the egress policy: transports of other
// packages (gRPC: grpc.WithContextDialer) must dial with it and nothing
// else. A refused address fails before anything is sent, with an error
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

// checkURL refuses what a request may not reach: a host the egress policy
// refuses before any DNS (an IP literal), anything but http(s), and plain
// http:// to a host the policy does not list.
func (e Env) checkURL(u *url.URL, tool string) error {
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
	if e.checkURL(req.URL, "") != nil {
		return fmt.Errorf("%w: to a refused URL", errRedirectRefused)
	}
	return nil
}

// classifyDoError turns a failed http.Client.Do into the caller's context
// error (the registry maps it) or a TransportError.
func classifyDoError(ctx context.Context, err error, tool string) error {
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

// readCapped reads a body whole, refusing more than limit bytes.
func readCapped(ctx context.Context, r io.Reader, limit int64, tool string) ([]byte, error) {
	return readCappedSized(ctx, r, -1, limit, tool)
}

// readCappedSized is readCapped for a body whose length may be known
// (size >= 0), read into one buffer of that size.
func readCappedSized(ctx context.Context, r io.Reader, size, limit int64, tool string) ([]byte, error) {
	if size > limit {
		return nil, &TransportError{Tool: tool, Reason: ReasonTooLarge, cause: fmt.Errorf("body of %d bytes over %d", size, limit)}
	}
	var data []byte
	var err error
	mem := callMemory(ctx)
	if size >= 0 {
		if err := mem.Resize(ctx, mem.Size()+bodyMemory(size)); err != nil {
			return nil, memoryError(ctx, tool, err)
		}
		data = make([]byte, size+1)
		var n int
		n, err = io.ReadFull(r, data)
		data = data[:n]
		switch {
		case err == io.ErrUnexpectedEOF && int64(n) == size:
			err = nil // all that was announced
		case err == nil:
			err = fmt.Errorf("body longer than its Content-Length")
		case err == io.EOF && size == 0:
			err = nil
		}
	} else {
		data, err = readReserving(ctx, io.LimitReader(r, limit+1), mem)
		if errors.Is(err, errMemory) {
			return nil, memoryError(ctx, tool, errors.Unwrap(err))
		}
	}
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, &TransportError{Tool: tool, Reason: ReasonBroken, cause: err}
	}
	if int64(len(data)) > limit {
		return nil, &TransportError{Tool: tool, Reason: ReasonTooLarge, cause: fmt.Errorf("body over %d bytes", limit)}
	}
	return data, nil
}

type callMemoryKey struct{}

// withCallMemory returns ctx carrying the reservation a call's reads grow
// in the registry's memory budget (nil: none).
func withCallMemory(ctx context.Context, r *membudget.Reservation) context.Context {
	if r == nil {
		return ctx
	}
	return context.WithValue(ctx, callMemoryKey{}, r)
}

func callMemory(ctx context.Context) *membudget.Reservation {
	r, _ := ctx.Value(callMemoryKey{}).(*membudget.Reservation)
	return r
}

// bodyMemory is what a body of n bytes holds while it is read and
// decoded: the bytes, and the value decoded from them.
func bodyMemory(n int64) int64 { return 3 * n }

// errMemory marks readReserving's failure to reserve.
var errMemory = errors.New("memory")

// readReserving is io.ReadAll that grows mem by bodyMemory of each chunk
// before it reads it.
func readReserving(ctx context.Context, r io.Reader, mem *membudget.Reservation) ([]byte, error) {
	const chunk = 64 << 10
	data := make([]byte, 0, 512)
	for {
		if mem != nil && cap(data)-len(data) < chunk {
			if err := mem.Resize(ctx, mem.Size()+bodyMemory(chunk)); err != nil {
				return nil, fmt.Errorf("%w: %w", errMemory, err)
			}
			data = slices.Grow(data, chunk)
		}
		if len(data) == cap(data) {
			data = slices.Grow(data, len(data)+1)
		}
		n, err := r.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return data, err
		}
	}
}

// memoryError is a read the memory budget could not hold (ReasonMemory),
// or the caller's own cancellation.
func memoryError(ctx context.Context, tool string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return &TransportError{Tool: tool, Reason: ReasonMemory, cause: err}
}
