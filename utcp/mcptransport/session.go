package mcptransport

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"

	"github.com/exprd/exprd/utcp"
)

// clientInfo is how exprd names itself to MCP servers.
var clientInfo = &mcp.Implementation{Name: "exprd", Version: "1"}

// server is one MCP server of one manual on this replica: one client
// session, made on first use and reused by every call, made again (after
// the back-off) when it ends; and what the server last listed.
type server struct {
	pool   *pool
	spec   *serverSpec
	env    utcp.Env
	client *mcp.Client

	life context.Context // ends when the registry closes
	stop context.CancelFunc

	mu       sync.Mutex
	limiter  *rate.Limiter // what the session in use sends unasked
	cs       *mcp.ClientSession
	proc     *process // a stdio server's
	started  time.Time
	ours     bool          // the session's end was asked for here
	dialing  chan struct{} // closed when the connection being made is made or failed
	dialErr  error
	failures int // in a row
	retryAt  time.Time
	calls    map[*callState]struct{}
	finished []string // progress tokens of the streams that ended last
	relist   relistState
	closed   bool

	lastUsed atomic.Int64 // unix nanoseconds
	listing  atomic.Pointer[listing]
	drift    driftLog
	progress sync.Map // progress token → *callState
	tokens   atomic.Int64
}

// listing is what a server last listed: each tool's definition and its
// fingerprint, by its name on the server.
type listing struct {
	tools []*mcp.Tool
	fps   map[string]string
	at    time.Time
}

func newServer(p *pool, spec *serverSpec, env utcp.Env) *server {
	s := &server{pool: p, spec: spec, env: env, calls: map[*callState]struct{}{},
		limiter: rate.NewLimiter(NotificationRate, NotificationBurst)}
	s.life, s.stop = context.WithCancel(context.Background())
	opts := &mcp.ClientOptions{
		Logger: env.Logger().With("manual", env.Manual, "mcp_server", spec.name),
		// No roots and no sampling: exprd has no model to lend a server.
		// Elicitation (below) in form mode only, the SDK's default for a
		// handler (inferred by revision): relayed to the user of the
		// stream a call comes from, where it has one (see elicit).
		Capabilities:                &mcp.ClientCapabilities{},
		ToolListChangedHandler:      s.onListChanged,
		ProgressNotificationHandler: s.onProgress,
		// The SDK answers an input-required result's requests (elicit,
		// under the call's own context) and calls again with the answers.
	}
	if spec.transport != TransportSSE {
		// The HTTP+SSE transport is the 2024-11-05 revision's, which has
		// no elicitation: it is not advertised there.
		opts.ElicitationHandler = s.elicit
	}
	s.client = mcp.NewClient(clientInfo, opts)
	s.client.AddReceivingMiddleware(s.incoming)
	s.touch()
	return s
}

func (s *server) touch() { s.lastUsed.Store(time.Now().UnixNano()) }

// session returns the server's session, connecting when it has none: one
// connection is made at a time, which every caller waits for (each under
// its own context). A server that failed is not tried again before its
// back-off has passed: until then the error it failed with is returned.
func (s *server) session(ctx context.Context) (*mcp.ClientSession, error) {
	s.touch()
	for {
		s.mu.Lock()
		switch {
		case s.closed:
			s.mu.Unlock()
			return nil, &utcp.TransportError{Reason: utcp.ReasonUnreachable, Body: "the registry is closed"}
		case s.cs != nil:
			cs := s.cs
			s.mu.Unlock()
			return cs, nil
		case s.dialing != nil:
			ch := s.dialing
			s.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		case s.dialErr != nil && time.Now().Before(s.retryAt):
			err := s.dialErr
			s.mu.Unlock()
			return nil, err
		}
		ch := make(chan struct{})
		s.dialing = ch
		s.mu.Unlock()
		go s.connect(ch)
	}
}

// connect makes the session, under ConnectTimeout and no caller's
// context: a caller that gives up does not cut it short for the others.
func (s *server) connect(done chan struct{}) {
	ctx, cancel := context.WithTimeout(s.life, ConnectTimeout)
	defer cancel()
	cs, proc, tools, err := s.dial(ctx)
	s.mu.Lock()
	closed := s.closed
	switch {
	case err != nil:
		s.failures++
		s.retryAt = time.Now().Add(backoff(s.failures))
		s.dialErr = err
		s.env.Logger().Warn("mcp: cannot connect to the server", "manual", s.env.Manual, "mcp_server", s.spec.name,
			"failures", s.failures, "retry_in", time.Until(s.retryAt).Round(time.Millisecond), "error", logText(err))
	case !closed:
		s.cs, s.proc, s.started, s.ours, s.dialErr = cs, proc, time.Now(), false, nil
		// A new session starts with a full allowance of what it may send
		// unasked: an ended one's flood is not counted against it.
		s.limiter = rate.NewLimiter(NotificationRate, NotificationBurst)
		s.setListing(tools)
		go s.watch(cs, proc)
	}
	s.mu.Unlock()
	if err == nil && closed {
		s.end(cs, proc)
	}
	s.mu.Lock()
	s.dialing = nil
	close(done)
	s.mu.Unlock()
}

// backoff is the wait after n failures in a row.
func backoff(n int) time.Duration {
	d := MinBackoff
	for i := 1; i < n && d < MaxBackoff; i++ {
		d *= 2
	}
	return min(d, MaxBackoff)
}

// dial connects to the server and reads its tools.
func (s *server) dial(ctx context.Context) (*mcp.ClientSession, *process, []*mcp.Tool, error) {
	var (
		t    mcp.Transport
		proc *process
	)
	limit := s.env.MaxResponseBytes
	if limit <= 0 {
		limit = utcp.DefaultMaxResponseBytes
	}
	switch s.spec.transport {
	case TransportHTTP:
		t = &mcp.StreamableClientTransport{Endpoint: s.spec.url, HTTPClient: newHTTPClient(s.env, s.spec),
			MaxEventSize: int(limit), MaxRetries: 2}
	case TransportSSE:
		// Its stream lives as long as the session, not as the set-up.
		t = lifetime{&mcp.SSEClientTransport{Endpoint: s.spec.url, HTTPClient: newHTTPClient(s.env, s.spec)}, s.life}
	case TransportStdio:
		if err := s.pool.takeStdio(); err != nil {
			return nil, nil, nil, err
		}
		var err error
		proc, err = startProcess(s.spec, s.env.Logger().With("manual", s.env.Manual, "mcp_server", s.spec.name))
		if err != nil {
			s.pool.releaseStdio()
			return nil, nil, nil, (&utcp.TransportError{Reason: utcp.ReasonUnreachable, Body: "the stdio server could not be started"}).WithCause(err)
		}
		proc.release = s.pool.releaseStdio
		bad := func(err error) { go s.drop(true, err) }
		t = &mcp.IOTransport{Reader: &stdoutReader{r: proc.stdout, bad: bad}, Writer: proc.stdin, MaxLineLength: int(limit)}
	}
	cs, err := s.client.Connect(ctx, t, nil)
	if err != nil {
		s.end(nil, proc)
		return nil, nil, nil, connectError(ctx, err)
	}
	tools, err := listTools(ctx, cs, s.spec.name)
	if err != nil {
		s.end(cs, proc)
		return nil, nil, nil, err
	}
	return cs, proc, tools, nil
}

// lifetime connects a transport under the server's life rather than the
// set-up's context: the HTTP+SSE transport holds its event stream under
// the context it connects with (the streamable one detaches its own).
type lifetime struct {
	mcp.Transport
	life context.Context
}

// Connect connects under the server's life, cut short if the set-up's ctx
// ends first.
func (l lifetime) Connect(ctx context.Context) (conn mcp.Connection, err error) {
	life, cancel := context.WithCancel(l.life)
	defer func() {
		if err != nil {
			cancel()
		}
	}()
	stop := context.AfterFunc(ctx, cancel)
	conn, err = l.Transport.Connect(life)
	if !stop() {
		if err == nil {
			_ = conn.Close()
		}
		return nil, ctx.Err()
	}
	return conn, err
}

// watch notices the session's end: one that ends without being asked to
// soon after it began counts as a failure in a row.
func (s *server) watch(cs *mcp.ClientSession, proc *process) {
	_ = cs.Wait()
	s.mu.Lock()
	if s.cs != cs {
		s.mu.Unlock()
		return
	}
	s.cs, s.proc = nil, nil
	ours := s.ours
	lived := time.Since(s.started)
	if !ours {
		if lived < StableAfter {
			s.failures++
		} else {
			s.failures = 0
		}
		s.retryAt = time.Now().Add(backoff(s.failures))
		s.dialErr = &utcp.TransportError{Reason: utcp.ReasonBroken, Body: "the MCP server's session ended; it is connected again after a back-off"}
		if s.failures == 0 {
			s.dialErr, s.retryAt = nil, time.Time{}
		}
	}
	s.mu.Unlock()
	if !ours {
		s.env.Logger().Warn("mcp: the server's session ended", "manual", s.env.Manual, "mcp_server", s.spec.name, "lived", lived.Round(time.Millisecond), "failures", s.failures)
	}
	s.end(cs, proc)
}

// end closes a session and stops its process.
func (s *server) end(cs *mcp.ClientSession, proc *process) {
	if cs != nil {
		_ = cs.Close()
	}
	if proc != nil {
		proc.stop()
	}
}

// drop closes the current session (idle, hostile, the registry closing);
// failed counts it as a failure in a row.
func (s *server) drop(failed bool, why error) {
	s.mu.Lock()
	cs, proc := s.cs, s.proc
	if cs == nil {
		s.mu.Unlock()
		return
	}
	s.ours = true
	s.cs, s.proc = nil, nil
	if failed {
		s.failures++
		s.retryAt = time.Now().Add(backoff(s.failures))
		s.dialErr = why
	}
	calls := make([]*callState, 0, len(s.calls))
	for st := range s.calls {
		calls = append(calls, st)
	}
	s.mu.Unlock()
	for _, st := range calls {
		st.fail(why)
	}
	s.end(cs, proc)
}

func (s *server) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.stop()
	s.drop(false, &utcp.TransportError{Reason: utcp.ReasonBroken, Body: "the registry is closing"})
}

// begin and finish track a call in flight.
func (s *server) begin(st *callState) {
	s.mu.Lock()
	s.calls[st] = struct{}{}
	s.mu.Unlock()
}

func (s *server) finish(st *callState) {
	s.mu.Lock()
	delete(s.calls, st)
	s.mu.Unlock()
	s.touch()
}

// incoming sees every request and notification the server sends: past
// NotificationRate its session is closed as hostile; a request for what
// exprd cannot give (sampling, roots) marks the calls in flight, which
// then fail saying so.
func (s *server) incoming(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		s.mu.Lock()
		current, limiter := s.cs, s.limiter
		s.mu.Unlock()
		if from, ok := req.GetSession().(*mcp.ClientSession); ok && current != nil && from != current {
			// What a session that has ended still sends is dropped, and
			// not counted against the one in use.
			return nil, errors.New("the session has ended")
		}
		if !s.progressOfOurs(method, req) && !limiter.Allow() {
			err := &utcp.TransportError{Reason: utcp.ReasonBroken, Body: fmt.Sprintf(
				"the MCP server sent more than %d messages a second unasked; its session was closed", NotificationRate)}
			s.env.Logger().Warn("mcp: the server floods exprd with messages; its session is closed", "manual", s.env.Manual, "mcp_server", s.spec.name, "method", method)
			go s.drop(true, err)
			return nil, errors.New("too many messages")
		}
		if what := inputAsked(method); what != "" {
			s.mu.Lock()
			for st := range s.calls {
				st.asked.Store(what)
			}
			s.mu.Unlock()
		}
		return next(ctx, method, req)
	}
}

// progressOfOurs reports a progress notification for a call of exprd's in flight:
// asked for, and bounded by MaxProgressPerCall rather than the rate of
// what a server sends unasked.
func (s *server) progressOfOurs(method string, req mcp.Request) bool {
	if method != "notifications/progress" {
		return false
	}
	p, ok := req.GetParams().(*mcp.ProgressNotificationParams)
	if !ok || p == nil {
		return false
	}
	tok, _ := p.ProgressToken.(string)
	v, ok := s.progress.Load(tok)
	return ok && v.(*callState).count.Load() < MaxProgressPerCall
}

// endProgress forgets a stream's progress token once FinishedTokens
// streams have ended after it: progress sent just before a result can be
// handled after it, and is still the stream's (counted against its
// MaxProgressPerCall, not against the rate of what is sent unasked).
func (s *server) endProgress(token string) {
	s.mu.Lock()
	s.finished = append(s.finished, token)
	var forget string
	if len(s.finished) > FinishedTokens {
		forget, s.finished = s.finished[0], s.finished[1:]
	}
	s.mu.Unlock()
	if forget != "" {
		s.progress.Delete(forget)
	}
}

// inputAsked names what a server's request asks that exprd cannot give
// ("": nothing); elicitation is elicit's.
func inputAsked(method string) string {
	switch method {
	case "sampling/createMessage":
		return "a model's completion (sampling)"
	case "roots/list":
		return "the client's roots"
	}
	return ""
}

// newToken is a progress token for a call, unique on the server.
func (s *server) newToken() string { return "exprd-" + strconv.FormatInt(s.tokens.Add(1), 10) }

func (s *server) onProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	if req.Params == nil {
		return
	}
	tok, _ := req.Params.ProgressToken.(string)
	v, ok := s.progress.Load(tok)
	if !ok {
		return
	}
	st := v.(*callState)
	if st.count.Add(1) > MaxProgressPerCall {
		st.fail(&utcp.TransportError{Reason: utcp.ReasonTooLarge, Body: fmt.Sprintf("the MCP server sent more than %d progress notifications for one call", MaxProgressPerCall)})
		return
	}
	chunk := map[string]any{"progress": req.Params.Progress}
	if req.Params.Total > 0 {
		chunk["total"] = req.Params.Total
	}
	if req.Params.Message != "" {
		chunk["message"] = req.Params.Message
	}
	select {
	case st.progress <- chunk:
	default:
		st.dropped.Add(1)
	}
}

// connectError is a connection that could not be made.
func connectError(ctx context.Context, err error) error {
	var te *utcp.TransportError
	if errors.As(err, &te) {
		return te
	}
	if ctx.Err() != nil {
		return (&utcp.TransportError{Reason: utcp.ReasonUnreachable, Body: fmt.Sprintf("the MCP server did not complete its set-up within %s", ConnectTimeout)}).WithCause(err)
	}
	return (&utcp.TransportError{Reason: utcp.ReasonUnreachable}).WithCause(err)
}

// logText is an error's text for the operator's log.
func logText(err error) string {
	var te *utcp.TransportError
	if errors.As(err, &te) && te.Unwrap() != nil {
		return te.Error() + ": " + te.Unwrap().Error()
	}
	return err.Error()
}

// waitDialing waits for a connection being made to end (Close ends what it
// made).
func (s *server) waitDialing() {
	s.mu.Lock()
	ch := s.dialing
	s.mu.Unlock()
	if ch != nil {
		<-ch
	}
}
