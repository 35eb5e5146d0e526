package mcptransport

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/manual"
)

// transport is an mcp template: a manual's, which discovers its servers'
// tools, or a tool's, which calls it on its server.
type transport struct {
	env  utcp.Env
	tmpl *template
	pool *pool

	bound atomic.Pointer[binding] // the tool this transport calls, once known
}

// binding is a tool's place on its server, and the fingerprint of its
// registered definition.
type binding struct {
	tool *manual.Tool
	srv  *server
	name string // the tool's name on the server
	fp   string
}

var (
	_ utcp.Transport     = (*transport)(nil)
	_ utcp.Discoverer    = (*transport)(nil)
	_ utcp.DriftReporter = (*transport)(nil)
)

// New is the mcp template's utcp.TransportFactory (utcp.WithTransport(Type,
// New); utcpall.New gives it). It reads the template and does no I/O:
// sessions are made on first use, in the registry's utcp.Env.Shared.
func New(raw json.RawMessage, env utcp.Env) (utcp.Transport, error) {
	tmpl, err := parseTemplate(raw, env)
	if err != nil {
		return nil, err
	}
	p, err := poolOf(env)
	if err != nil {
		return nil, err
	}
	t := &transport{env: env, tmpl: tmpl, pool: p}
	if tmpl.toolName != "" && tmpl.finger != "" && len(tmpl.names) == 1 {
		// What the server lists is compared with this from its next
		// listing on, calls or none.
		p.server(tmpl.servers[tmpl.names[0]], env).drift.registered.Store(tmpl.toolName, tmpl.finger)
	}
	return t, nil
}

// bind finds the tool's server and name: the template's tool_name on its
// one server, or else the tool's short name, `<server>.<tool>`.
func (t *transport) bind(tool *manual.Tool) (*binding, error) {
	if b := t.bound.Load(); b != nil && b.tool == tool {
		return b, nil
	}
	short := strings.TrimPrefix(tool.Name, tool.ManualName()+".")
	var spec *serverSpec
	name := t.tmpl.toolName
	if len(t.tmpl.names) == 1 {
		spec = t.tmpl.servers[t.tmpl.names[0]]
		if name == "" {
			name = strings.TrimPrefix(short, spec.name+".")
		}
	} else {
		srv, rest, _ := strings.Cut(short, ".")
		spec = t.tmpl.servers[srv]
		if name == "" {
			name = rest
		}
	}
	if spec == nil || name == "" {
		return nil, &utcp.TransportError{Tool: tool.Name, Reason: utcp.ReasonFailed,
			Body: "the template names several MCP servers and the tool's name is not <server>.<tool>: give tool_name and one server"}
	}
	fp := t.tmpl.finger
	if fp == "" {
		fp = fingerprint(registeredDefinition(tool, name))
	}
	b := &binding{tool: tool, srv: t.pool.server(spec, t.env), name: name, fp: fp}
	t.bound.Store(b)
	return b, nil
}

// Call calls the tool on its server and returns its result: its
// structuredContent when it has one, else its content (see value).
func (t *transport) Call(ctx context.Context, tool *manual.Tool, args map[string]any) (any, error) {
	b, cs, err := t.prepare(ctx, tool)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st := &callState{cancel: cancel, tool: tool.Name}
	ctx = withCallState(ctx, st)
	st.ctx = ctx
	b.srv.begin(st)
	defer b.srv.finish(st)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: b.name, Arguments: args})
	return t.outcome(ctx, tool.Name, b, st, res, err)
}

// prepare finds the tool's session and refuses a tool that drifted.
func (t *transport) prepare(ctx context.Context, tool *manual.Tool) (*binding, *mcp.ClientSession, error) {
	b, err := t.bind(tool)
	if err != nil {
		return nil, nil, err
	}
	cs, err := b.srv.session(ctx)
	if err != nil {
		return nil, nil, withTool(err, tool.Name)
	}
	if d := b.srv.check(b.name, b.fp); d != nil {
		t.pool.metrics.refused.Add(ctx, 1, metric.WithAttributes(attribute.String("manual", t.env.Manual), attribute.String("server", b.srv.spec.name)))
		return nil, nil, driftError(tool.Name, d)
	}
	return b, cs, nil
}

// driftError refuses a call of a tool whose server lists another
// definition than the registered one: the registered schema and
// description are what the caller was shown and what its arguments were
// checked against, and a server that changes a tool after it was
// registered may have changed what the call does.
func driftError(tool string, d *utcp.Drift) *utcp.TransportError {
	what := "lists another definition of this tool than the one registered"
	if d.Kind == utcp.DriftRemoved {
		what = "no longer lists this tool"
	}
	return &utcp.TransportError{Tool: tool, Reason: ReasonDrift,
		Body: "the MCP server " + what + "; the call was not sent: the operator registers the manual again (replace) to adopt it"}
}

// withTool names the tool in a transport error made before it was known:
// a copy, since the error may be shared (a session's failure, what a
// reader returned to the SDK).
func withTool(err error, tool string) error {
	var te *utcp.TransportError
	if errors.As(err, &te) && te.Tool == "" {
		c := *te
		c.Tool = tool
		return &c
	}
	return err
}

// Stream calls the tool with a progress token: each progress notification
// is a chunk ({"progress", "total", "message"}), then the result is the
// last chunk. A reader that falls ProgressBuffer notifications behind
// misses the ones that do not fit, never the result.
func (t *transport) Stream(ctx context.Context, tool *manual.Tool, args map[string]any) (utcp.Stream, error) {
	b, cs, err := t.prepare(ctx, tool)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	st := &callState{cancel: cancel, tool: tool.Name, progress: make(chan any, ProgressBuffer)}
	ctx = withCallState(ctx, st)
	st.ctx = ctx
	token := b.srv.newToken()
	b.srv.progress.Store(token, st)
	b.srv.begin(st)
	s := &stream{st: st, cancel: cancel, done: make(chan outcome, 1), end: func() {
		b.srv.endProgress(token)
		b.srv.finish(st)
	}}
	params := &mcp.CallToolParams{Name: b.name, Arguments: args}
	params.SetProgressToken(token)
	go func() {
		res, err := cs.CallTool(ctx, params)
		v, err := t.outcome(ctx, tool.Name, b, st, res, err)
		s.done <- outcome{v, err}
	}()
	return s, nil
}

type outcome struct {
	v   any
	err error
}

type stream struct {
	st     *callState
	cancel context.CancelFunc
	done   chan outcome
	end    func()
	over   bool
	final  *outcome
}

func (s *stream) Next() (any, error) {
	if s.over {
		return nil, io.EOF
	}
	if s.final == nil {
		select {
		case p := <-s.st.progress:
			return p, nil
		case o := <-s.done:
			s.final = &o
		}
	}
	// Progress sent before the result comes first.
	select {
	case p := <-s.st.progress:
		return p, nil
	default:
	}
	s.over = true
	s.close()
	if s.final.err != nil {
		return nil, s.final.err
	}
	return s.final.v, nil
}

func (s *stream) Close() error {
	s.over = true
	s.close()
	return nil
}

func (s *stream) close() {
	if s.end != nil {
		s.cancel()
		s.end()
		s.end = nil
	}
}

// Drift implements utcp.DriftReporter: what the tool's server last listed,
// compared with the tool's registered definition, without I/O.
func (t *transport) Drift(tool *manual.Tool) *utcp.Drift {
	b, err := t.bind(tool)
	if err != nil {
		return nil
	}
	return b.srv.check(b.name, b.fp)
}
