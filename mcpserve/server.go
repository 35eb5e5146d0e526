package mcpserve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/exprd/exprd/codemode"
	"github.com/exprd/exprd/internal/overload"
	"github.com/exprd/exprd/membudget"
	"github.com/exprd/exprd/utcp"
)

// Where the handler serves.
const (
	// Path is the MCP endpoint.
	Path = "/mcp"
	// MetadataPath serves the Protected Resource Metadata (RFC 9728), also
	// under MetadataPath+Path as the RFC's §3.1 inserts a resource's path.
	MetadataPath = "/.well-known/oauth-protected-resource"
)

// ScopeMCP is the scope a token needs for the MCP endpoint; "*" grants
// it, as it grants every gRPC service.
const ScopeMCP = "mcp"

// The defaults of Limits, and fixed bounds.
const (
	// DefaultMaxBodyBytes bounds a request's body (the SDK's default).
	DefaultMaxBodyBytes = mcp.DefaultMaxRequestBodyBytes
	// DefaultMaxInFlight bounds the requests being served at once.
	DefaultMaxInFlight = 64
	// DefaultMaxInFlightPerCaller bounds those of one token: a quarter,
	// so that one caller cannot take every place from the others.
	DefaultMaxInFlightPerCaller = DefaultMaxInFlight / 4
	// DefaultPageSize is how many tools a tools/list page holds.
	DefaultPageSize = 100
	// DefaultSearchLimit and MaxSearchLimit are search_tools' limit when
	// none is given, and the most it may ask for.
	DefaultSearchLimit = 10
	MaxSearchLimit     = 50
	// MaxInfoNames bounds the names of one tools_info call.
	MaxInfoNames = 32
	// DefaultCallTimeout bounds a call_tool_chain run that gives no
	// timeout, and a gateway call: CodeMode's Execute default.
	DefaultCallTimeout = codemode.DefaultTimeout

	// DefaultWriteTimeout bounds the writing of an answer, from its
	// first byte: a client that stops reading has its request ended (and
	// its connection closed) then, not held.
	DefaultWriteTimeout = 30 * time.Second

	// The HTTP server's own bounds (NewHTTPServer): a request's headers
	// must arrive within ReadHeaderTimeout and be at most MaxHeaderBytes,
	// its body within ReadTimeout; an idle connection is closed after
	// IdleTimeout.
	ReadHeaderTimeout = 10 * time.Second
	ReadTimeout       = 30 * time.Second
	IdleTimeout       = 2 * time.Minute
	MaxHeaderBytes    = 16 << 10
)

// What the memory budget holds for a request: bodyFactor bytes a byte of
// its body (the bytes, and the messages decoded from them), resultFactor
// a byte of a result's JSON (the value, its text content and structured
// content, and their encoding on the wire), argsFactor a byte of a
// gateway call's arguments (decoded into Go values: an array of small
// numbers, 42 times its JSON's bytes, measured; empty objects 50).
const (
	bodyFactor   = 2
	resultFactor = 4
	argsFactor   = 48
)

// Expose says which tools the endpoint lists.
type Expose string

// The values of Expose.
const (
	ExposeCode  Expose = "code"  // search_tools, tools_info, call_tool_chain
	ExposeTools Expose = "tools" // the registry's tools themselves
	ExposeBoth  Expose = "both"
)

// ParseExpose reads code, tools or both.
func ParseExpose(s string) (Expose, error) {
	switch e := Expose(s); e {
	case ExposeCode, ExposeTools, ExposeBoth:
		return e, nil
	}
	return "", fmt.Errorf("%q: want code, tools or both", s)
}

func (e Expose) code() bool  { return e == ExposeCode || e == ExposeBoth }
func (e Expose) tools() bool { return e == ExposeTools || e == ExposeBoth }

// Caller is who a token names and the scopes it grants.
type Caller struct {
	Name   string
	Scopes []string
}

// Verifier looks a bearer token up: its caller, or false for a token not
// known.
type Verifier func(token string) (Caller, bool)

// Limits bound the endpoint. Zero fields take their defaults.
type Limits struct {
	// MaxBodyBytes bounds a request's body; a longer one is answered 413.
	MaxBodyBytes int64
	// MaxInFlight bounds the requests being served at once; one past it
	// is answered 503 at once, with a Retry-After. Each tools/call and
	// tools/list of a JSON-RPC batch (2025-03-26 and before) past its
	// first counts as one more; one past the bound is a JSON-RPC error.
	MaxInFlight int
	// MaxInFlightPerCaller bounds the requests of one token (a caller)
	// being served at once, batch messages counted as for MaxInFlight;
	// one past it is answered as one past MaxInFlight is. Without auth
	// there is no caller to bound.
	MaxInFlightPerCaller int
	// MaxTimeout is the most call_tool_chain's timeout may ask for
	// (CodeMode's --codemode-max-timeout); 0: codemode.DefaultMaxTimeout.
	MaxTimeout time.Duration
	// PageSize is the tools of a tools/list page.
	PageSize int
	// WriteTimeout bounds the writing of an answer from its first byte.
	WriteTimeout time.Duration
}

func (l Limits) withDefaults() (Limits, error) {
	if l.MaxBodyBytes < 0 || l.MaxInFlight < 0 || l.MaxInFlightPerCaller < 0 || l.MaxTimeout < 0 || l.PageSize < 0 || l.WriteTimeout < 0 {
		return l, fmt.Errorf("mcpserve: limits %+v: want none negative", l)
	}
	if l.MaxBodyBytes == 0 {
		l.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if l.MaxInFlight == 0 {
		l.MaxInFlight = DefaultMaxInFlight
	}
	if l.MaxInFlightPerCaller == 0 {
		l.MaxInFlightPerCaller = max(l.MaxInFlight/4, 1)
	}
	if l.MaxTimeout == 0 {
		l.MaxTimeout = codemode.DefaultMaxTimeout
	}
	if l.PageSize == 0 {
		l.PageSize = DefaultPageSize
	}
	if l.WriteTimeout == 0 {
		l.WriteTimeout = DefaultWriteTimeout
	}
	return l, nil
}

// Config is what the endpoint serves and how.
type Config struct {
	// Registry is the tool registry searched, listed and called; required.
	Registry *utcp.Registry
	// Expose picks the tools listed ("": ExposeCode).
	Expose Expose
	// Verify checks bearer tokens; nil turns auth off.
	Verify Verifier
	// NeedsApproval names the tools whose calls need a person's approval:
	// full names, or a prefix ending in * ("catalog.*"). A client of the
	// 2026-07-28 revision that can elicit is asked (input_required);
	// another is refused.
	NeedsApproval []string
	// ApprovalKey signs the request states of approvals (at least
	// MinApprovalKeyBytes): replicas behind one balancer share it, so that
	// an answer may reach any of them. Empty: a random key of this
	// process's, whose states only this process takes back.
	ApprovalKey []byte
	// RateLimit takes a token for a request from its caller's bucket
	// (caller: the token's name; "" with auth off, when the bucket is
	// the client's address), or says how long until there is one: the
	// gRPC server's (server.Server.TakeHTTP), so that a caller's MCP
	// requests and RPCs draw on one bucket. nil: no rate limit.
	RateLimit func(caller string, r *http.Request) (wait time.Duration, ok bool)
	// Memory is the server's memory budget (nil: none).
	Memory *membudget.Budget
	// Overload is the overload manager (nil: none).
	Overload *overload.Manager
	// Turns is what programs take to compute (codemode.WithTurns): the
	// gRPC server's (server.Server.Turns), so that every program of the
	// process shares the cores. nil: programs compute at once.
	Turns  codemode.Turns
	Limits Limits
	// TracerProvider makes the requests' spans (nil: OpenTelemetry's
	// global provider).
	TracerProvider trace.TracerProvider
	// Logger logs what goes wrong on the server's side (nil: discarded).
	Logger *slog.Logger
	// Version is the server's version in its Implementation.
	Version string
}

// Handler serves the MCP endpoint and the metadata. It is safe for
// concurrent use.
type Handler struct {
	cfg      Config
	limits   Limits
	rt       *codemode.Runtime
	server   *mcp.Server
	sdk      http.Handler
	inFlight chan struct{}
	callerMu sync.Mutex
	callers  map[string]int // requests in flight by caller
	approval nameSet
	signer   signer
	tracer   trace.Tracer
	code     []*mcp.Tool // the code-mode tools, in the order listed
	log      *slog.Logger
}

// New returns the endpoint's handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Registry == nil {
		return nil, errors.New("mcpserve: no registry")
	}
	if cfg.Expose == "" {
		cfg.Expose = ExposeCode
	}
	if _, err := ParseExpose(string(cfg.Expose)); err != nil {
		return nil, fmt.Errorf("mcpserve: expose %w", err)
	}
	limits, err := cfg.Limits.withDefaults()
	if err != nil {
		return nil, err
	}
	rt, err := codemode.New(cfg.Registry, codemode.WithMemoryBudget(cfg.Memory), codemode.WithTurns(cfg.Turns))
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	version := cfg.Version
	if version == "" {
		version = "dev"
	}
	sg, err := newSigner(cfg.ApprovalKey)
	if err != nil {
		return nil, err
	}
	h := &Handler{cfg: cfg, limits: limits, rt: rt, inFlight: make(chan struct{}, limits.MaxInFlight), callers: map[string]int{},
		approval: newNameSet(cfg.NeedsApproval), signer: sg, log: log}
	h.server = mcp.NewServer(&mcp.Implementation{Name: "exprd", Version: version}, &mcp.ServerOptions{
		Instructions: instructions(cfg.Expose),
		Logger:       log,
		// tools even when only the gateway's, added per request, are served
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
		PageSize:     limits.PageSize,
	})
	if cfg.Expose.code() {
		h.addCodeTools()
	}
	tp := cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	h.tracer = tp.Tracer(tracerName)
	h.server.AddReceivingMiddleware(h.toolsMiddleware)
	h.server.AddReceivingMiddleware(h.tracing) // the outermost
	h.sdk = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return h.server }, &mcp.StreamableHTTPOptions{
		Stateless:                    true,
		JSONResponse:                 true,
		Logger:                       log,
		MaxRequestBodyBytes:          limits.MaxBodyBytes,
		PropagateRequestCancellation: true,
	})
	return h, nil
}

func instructions(e Expose) string {
	if !e.code() {
		return "exprd's tool registry: each tool listed calls one tool of the registry."
	}
	return "exprd's tool registry in code mode. Find tools with search_tools (describe the task), read their schemas with " +
		"tools_info, then chain them in one call_tool_chain: an Expr program whose tools are called as " +
		`codemode.CallTool("manual.tool", {arg: value}); let binds names, ";" separates expressions, the last is the result.`
}

// NewHTTPServer is an http.Server for h with the endpoint's own bounds
// (ReadHeaderTimeout, ReadTimeout, IdleTimeout, MaxHeaderBytes).
func NewHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	s := &http.Server{Handler: h, ReadHeaderTimeout: ReadHeaderTimeout, ReadTimeout: ReadTimeout,
		IdleTimeout: IdleTimeout, MaxHeaderBytes: MaxHeaderBytes}
	if log != nil {
		s.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	}
	return s
}

// ServeHTTP serves Path and the metadata; anything else is 404.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case Path:
		h.serveMCP(w, r)
	case MetadataPath, MetadataPath + Path:
		if h.cfg.Verify == nil {
			http.NotFound(w, r)
			return
		}
		auth.ProtectedResourceMetadataHandler(h.metadata(r)).ServeHTTP(w, r)
	default:
		http.NotFound(w, r)
	}
}

// resource is the endpoint's URL as the request names it.
func resource(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + Path
}

func (h *Handler) metadata(r *http.Request) *oauthex.ProtectedResourceMetadata {
	return &oauthex.ProtectedResourceMetadata{
		Resource:               resource(r),
		BearerMethodsSupported: []string{"header"},
		ScopesSupported:        []string{ScopeMCP},
		ResourceName:           "exprd",
	}
}

// request is what one HTTP request carries to the tools' handlers: its
// caller, the context that ends with it (the overload manager cancels it
// to shed the request), and what the memory budget holds for it.
type request struct {
	ctx    context.Context
	caller *Caller // nil with auth off
	memory *membudget.Budget
	mu     sync.Mutex
	held   []*membudget.Reservation
	works  int // the tools/call and tools/list messages begun (a batch has several)
}

type requestKey struct{}

func requestFrom(ctx context.Context) *request {
	r, _ := ctx.Value(requestKey{}).(*request)
	return r
}

// hold reserves n bytes for what until the request ends.
func (q *request) hold(ctx context.Context, what string, n int64) error {
	if q == nil || q.memory == nil || n <= 0 {
		return nil
	}
	res, err := q.memory.Reserve(ctx, what, n)
	if err != nil {
		return err
	}
	q.mu.Lock()
	q.held = append(q.held, res)
	q.mu.Unlock()
	return nil
}

func (q *request) release() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, r := range q.held {
		r.Close()
	}
	q.held = nil
}

// serveMCP bounds the request, checks its token, admits it under the
// overload manager and the memory budget, then lets the SDK read it.
func (h *Handler) serveMCP(w http.ResponseWriter, r *http.Request) {
	dw := &deadlineWriter{ResponseWriter: w, timeout: h.limits.WriteTimeout}
	dw.start()
	defer dw.end()
	w = dw
	select {
	case h.inFlight <- struct{}{}:
		defer func() { <-h.inFlight }()
	default:
		refuse(w, fmt.Sprintf("exprd is serving %d MCP requests, its limit (max_in_flight): retry in a second", h.limits.MaxInFlight))
		return
	}
	if h.cfg.Verify == nil {
		h.admit(w, r, nil)
		return
	}
	opts := &auth.RequireBearerTokenOptions{
		ResourceMetadataURL:    strings.TrimSuffix(resource(r), Path) + MetadataPath + Path,
		Scopes:                 []string{ScopeMCP},
		AllowMissingExpiration: true,
	}
	auth.RequireBearerToken(h.verify, opts)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := auth.TokenInfoFromContext(r.Context()).Extra["caller"].(*Caller)
		h.admit(w, r, c)
	})).ServeHTTP(w, r)
}

// verify is the SDK's TokenVerifier over Config.Verify: "*" grants
// ScopeMCP.
func (h *Handler) verify(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	c, ok := h.cfg.Verify(token)
	if !ok {
		return nil, fmt.Errorf("%w: the bearer token is not known", auth.ErrInvalidToken)
	}
	scopes := c.Scopes
	for _, s := range c.Scopes {
		if s == "*" {
			scopes = append(scopes[:len(scopes):len(scopes)], ScopeMCP)
			break
		}
	}
	return &auth.TokenInfo{Scopes: scopes, UserID: c.Name, Extra: map[string]any{"caller": &c}}, nil
}

// refuse answers 503 with a Retry-After of a second.
func refuse(w http.ResponseWriter, msg string) {
	w.Header().Set("Retry-After", "1")
	http.Error(w, msg, http.StatusServiceUnavailable)
}

// takeCaller takes one of c's places in flight, or reports false when it
// has none left; a nil c (no auth) has no bound.
func (h *Handler) takeCaller(c *Caller) (release func(), ok bool) {
	if c == nil {
		return func() {}, true
	}
	h.callerMu.Lock()
	defer h.callerMu.Unlock()
	if h.callers[c.Name] >= h.limits.MaxInFlightPerCaller {
		return nil, false
	}
	h.callers[c.Name]++
	return func() {
		h.callerMu.Lock()
		defer h.callerMu.Unlock()
		if h.callers[c.Name]--; h.callers[c.Name] <= 0 {
			delete(h.callers, c.Name)
		}
	}, true
}

func (h *Handler) admit(w http.ResponseWriter, r *http.Request, c *Caller) {
	ctx := r.Context()
	if h.cfg.RateLimit != nil {
		name := ""
		if c != nil {
			name = c.Name
		}
		if wait, ok := h.cfg.RateLimit(name, r); !ok {
			secs := max(1, int((wait+time.Second-1)/time.Second))
			w.Header().Set("Retry-After", strconv.Itoa(secs))
			http.Error(w, fmt.Sprintf("this caller is over its rate limit (rate_limit): retry in %v", wait), http.StatusTooManyRequests)
			return
		}
	}
	release, ok := h.takeCaller(c)
	if !ok {
		refuse(w, fmt.Sprintf("this token has %d MCP requests in flight, its limit (max_in_flight_per_caller): retry in a second", h.limits.MaxInFlightPerCaller))
		return
	}
	defer release()
	if c != nil {
		// Its work counts in its token's share of the memory budget, and
		// its programs take turns with the token's gRPC calls'.
		ctx = membudget.WithCaller(ctx, c.Name)
	}
	if m := h.cfg.Overload; m != nil {
		tracked, _, done, err := m.Enter(ctx, "MCP "+r.Method)
		if err != nil {
			refuse(w, "exprd is overloaded (its heap is near its line): retry in a second")
			return
		}
		ctx = tracked
		defer done()
	}
	q := &request{ctx: ctx, caller: c, memory: h.cfg.Memory}
	defer q.release()
	ctx = context.WithValue(ctx, requestKey{}, q)
	if h.cfg.Memory != nil && r.Body != nil {
		res := h.cfg.Memory.EmptyFor(ctx, "an MCP request's body")
		defer res.Close()
		if n := r.ContentLength; n > 0 {
			if err := res.Resize(ctx, bodyFactor*min(n, h.limits.MaxBodyBytes+1)); err != nil {
				refuse(w, "exprd's memory budget cannot hold this request now (memory_budget): retry later")
				return
			}
		} else {
			r.Body = &reservingBody{ctx: ctx, rc: r.Body, res: res, most: bodyFactor * (h.limits.MaxBodyBytes + 1)}
		}
	}
	// The SDK serves in the HTTP request's context with the tracked one's
	// values: a request the overload manager sheds has its work cancelled
	// (callCtx), and its answer still written.
	h.sdk.ServeHTTP(w, r.WithContext(valuesOf{Context: r.Context(), values: ctx}))
}

// begin admits one tools/call or tools/list message of the request: the
// first rides on the request's own place in flight, each further one (a
// batch's) takes a place of its own, or is refused. end gives it back.
func (h *Handler) begin(ctx context.Context) (end func(), err error) {
	q := requestFrom(ctx)
	if q == nil {
		return func() {}, nil
	}
	q.mu.Lock()
	q.works++
	first := q.works == 1
	q.mu.Unlock()
	if first {
		return func() {}, nil
	}
	release, ok := h.takeCaller(q.caller)
	if !ok {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
			Message: fmt.Sprintf("this token has %d MCP requests in flight, its limit (max_in_flight_per_caller; each message of a batch counts): retry in a second", h.limits.MaxInFlightPerCaller)}
	}
	select {
	case h.inFlight <- struct{}{}:
		return func() { <-h.inFlight; release() }, nil
	default:
		release()
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
			Message: fmt.Sprintf("exprd is serving %d MCP requests, its limit (max_in_flight; each message of a batch counts): retry in a second", h.limits.MaxInFlight)}
	}
}

// deadlineWriter bounds the writing of an answer: from its first byte,
// the connection's write deadline is timeout away, so that a client that
// stops reading has the request end (its place in flight and what the
// memory budget holds for it given back) rather than hold it. The
// deadline is lifted as the request begins (a connection's requests
// follow one another) and set again as it ends, for what the server
// still writes after the handler.
type deadlineWriter struct {
	http.ResponseWriter
	timeout time.Duration
	set     bool
}

func (w *deadlineWriter) start() {
	_ = http.NewResponseController(w.ResponseWriter).SetWriteDeadline(time.Time{})
}

func (w *deadlineWriter) arm() {
	if !w.set {
		w.set = true
		_ = http.NewResponseController(w.ResponseWriter).SetWriteDeadline(time.Now().Add(w.timeout))
	}
}

func (w *deadlineWriter) end() { w.arm() }

func (w *deadlineWriter) WriteHeader(code int) {
	w.arm()
	w.ResponseWriter.WriteHeader(code)
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	w.arm()
	return w.ResponseWriter.Write(p)
}

func (w *deadlineWriter) Flush() {
	w.arm()
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// valuesOf is a context that ends as its Context does, with the values
// of another.
type valuesOf struct {
	context.Context
	values context.Context
}

func (c valuesOf) Value(key any) any { return c.values.Value(key) }

// reservingBody grows its reservation before each read, to bodyFactor
// times what it has read, up to most: a body of unknown length. Unlike
// membudget.NewReadCloser it keeps the reservation when closed: the SDK
// closes the body once read, and holds its bytes while it serves them.
type reservingBody struct {
	ctx  context.Context
	rc   io.ReadCloser
	res  *membudget.Reservation
	read int64
	most int64
}

func (b *reservingBody) Read(p []byte) (int, error) {
	if want := min(b.most, bodyFactor*(b.read+int64(len(p)))); want > b.res.Size() {
		if err := b.res.Resize(b.ctx, want); err != nil {
			return 0, err
		}
	}
	n, err := b.rc.Read(p)
	b.read += int64(n)
	return n, err
}

func (b *reservingBody) Close() error { return b.rc.Close() }

// callCtx is the context a tool's work runs in: the handler's (whose
// values are the request's) ended with the request's, which the SDK does
// not pass on for the older revisions.
func callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	q := requestFrom(ctx)
	cctx, cancel := context.WithCancelCause(ctx)
	if q == nil {
		return cctx, func() { cancel(nil) }
	}
	stop := context.AfterFunc(q.ctx, func() { cancel(context.Cause(q.ctx)) })
	return cctx, func() { stop(); cancel(nil) }
}
