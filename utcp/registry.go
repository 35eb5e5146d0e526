package utcp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/exprd/exprd/internal/egress"
	"github.com/exprd/exprd/utcp/manual"
	"github.com/exprd/exprd/utcp/vars"
)

// Registry holds registered manuals and their tools, finds tools for a query
// and calls them. It is safe for concurrent use; calls never wait on a
// registration (readers see an immutable snapshot).
type Registry struct {
	cfg       config
	variables *vars.Resolver
	factories map[string]TransportFactory
	client    *http.Client
	base      *http.Transport
	dialer    *egress.Dialer
	shared    *Shared
	observe   CallObserver // nil: none

	mu  sync.Mutex // serialises changes to cat
	cat atomic.Pointer[catalog]
}

// catalog is one immutable snapshot of the registry.
type catalog struct {
	manuals map[string]*manualEntry
	tools   map[string]*toolEntry
	names   []string // tool names, sorted
	index   Index    // nil without WithIndex
}

type manualEntry struct {
	name  string
	tools []string
}

type toolEntry struct {
	tool   *manual.Tool
	short  *manual.Tool // as the manual gave it, for Resolved.Manual
	env    Env
	static Transport // built once when the template has no variables
	// answer names the reservation of the memory budget a call's answer
	// takes, made once rather than on every call.
	answer string
	last   atomic.Pointer[builtTransport]
}

type builtTransport struct {
	raw []byte
	t   Transport
}

// Registration reports what Register registered.
type Registration struct {
	Manual  string
	Tools   []string             // full names, sorted
	Skipped []manual.SkippedTool // tools left out (protocol not allowed, no operationId)
}

// New returns an empty Registry.
func New(opts ...Option) (*Registry, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	r := &Registry{
		cfg:       cfg,
		variables: vars.NewResolver(cfg.variables, cfg.loaders),
		factories: cfg.factories,
		shared:    &Shared{},
		observe:   observeAll(cfg.observers),
	}
	r.dialer = &egress.Dialer{Policy: cfg.egress, Resolver: cfg.resolver, Timeout: dialTimeout, KeepAlive: 30 * time.Second}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // a proxy would dial for us, out of the policy's sight
	tr.DialContext = r.dialer.DialContext
	tr.MaxIdleConnsPerHost = DefaultMaxIdleConnsPerHost
	r.base = tr
	var rt http.RoundTripper = tr
	if cfg.wrap != nil {
		rt = cfg.wrap(tr)
	}
	r.client = &http.Client{Transport: rt}
	r.client.CheckRedirect = r.env("").redirectPolicy
	r.cat.Store(&catalog{manuals: map[string]*manualEntry{}, tools: map[string]*toolEntry{}, index: cfg.index})
	return r, nil
}

// Close releases the registry's shared resources (Env.Shared) and idle
// connections. Do not use the registry after Close.
func (r *Registry) Close() error {
	err := r.shared.close()
	r.base.CloseIdleConnections()
	return err
}

func (r *Registry) env(manual string) Env {
	return Env{
		Manual:           manual,
		HTTPClient:       r.client,
		MaxResponseBytes: r.cfg.maxResponse,
		Shared:           r.shared,
		egress:           r.cfg.egress,
		dialer:           r.dialer,
		showMessages:     r.cfg.showMessages,
		logger:           r.cfg.logger,
		secrets:          r.manualSecrets(manual),
	}
}

// manualSecrets is the Secrets of a manual's name (nil for none).
func (r *Registry) manualSecrets(manual string) *vars.Secrets {
	if manual == "" {
		return nil
	}
	return r.variables.SecretsOf(manual)
}

// Register reads a manual from src and registers its tools as
// `<name>.<tool>`. name is sanitised (non-word characters become `_`,
// SanitizeManualName); when empty it is the template's name, or a file's
// base name. Everything is checked first (tool fields, schemas, call
// templates, the allowed protocols): an error registers nothing. A manual
// whose every tool is filtered out by the allowed protocols is an error. A
// name already registered is an *AlreadyExistsError (see Replace).
func (r *Registry) Register(ctx context.Context, name string, src Source) (*Registration, error) {
	return r.register(ctx, name, src, false)
}

// Replace is Register that replaces a manual of the same name, or registers
// it when there is none. The new manual is read, fetched and checked in full
// before anything changes; then its tools take the old ones' place in one
// step, so a concurrent call, list or search sees either the old manual or
// the new one, never a mix and never neither. On any error the old manual
// and its tools stay exactly as they were.
func (r *Registry) Replace(ctx context.Context, name string, src Source) (*Registration, error) {
	return r.register(ctx, name, src, true)
}

func (r *Registry) register(ctx context.Context, name string, src Source, replace bool) (*Registration, error) {
	if !replace {
		// Refused before anything is fetched; commit checks again.
		if n := SanitizeManualName(name); n != "" {
			if _, taken := r.cat.Load().manuals[n]; taken {
				return nil, &AlreadyExistsError{Kind: "manual", Name: n, Manual: n}
			}
		}
	}
	res, err := r.Resolve(ctx, name, src)
	if err != nil {
		return nil, err
	}
	return r.commit(res, replace)
}

// Resolved is a manual read, fetched and checked as Register does but not
// registered: what a store shares between replicas (Manual), and what
// registering it would register.
type Resolved struct {
	Name string // sanitised
	// Manual holds the tools that would be registered, named as the
	// manual names them, their templates with variables unresolved: no
	// secret is in it, and registering it (FromManual) fetches nothing.
	Manual  *manual.Manual
	Tools   []string // full names, sorted
	Skipped []manual.SkippedTool

	entries []*toolEntry
}

// Resolve reads, fetches and checks a manual as Register does (the same
// naming rules and errors) without registering it or looking at what is
// registered.
func (r *Registry) Resolve(ctx context.Context, name string, src Source) (*Resolved, error) {
	tmpl, err := src.callTemplate()
	if err != nil {
		return nil, prefixWithManual(err, SanitizeManualName(name))
	}
	if name == "" && tmpl != nil {
		name = tmpl.Name
	}
	if name == "" && src.kind == sourceFile {
		base := filepath.Base(src.location)
		name = strings.TrimSuffix(base, filepath.Ext(base))
	}
	if name == "" {
		return nil, &manual.Error{Msg: "a manual needs a name (give one, or a template name)"}
	}
	name = SanitizeManualName(name)
	allowed := src.allowed
	if allowed == nil && tmpl != nil {
		allowed = tmpl.AllowedProtocols
		if len(allowed) == 0 {
			allowed = []string{tmpl.Type}
		}
	}
	env := r.env(name)
	env.operator = isOperator(ctx)
	if tmpl != nil {
		ctx = withDiscoveryTemplate(ctx, tmpl)
	}
	m, skipped, err := r.discover(ctx, name, src, tmpl, env)
	if err != nil {
		return nil, err
	}
	entries, more, err := r.prepare(name, m, allowed, env)
	if err != nil {
		return nil, err
	}
	res := &Resolved{Name: name, Skipped: append(skipped, more...), entries: entries,
		Manual: &manual.Manual{UTCPVersion: m.UTCPVersion, ManualVersion: m.ManualVersion}}
	for _, e := range entries {
		res.Manual.Tools = append(res.Manual.Tools, e.short)
		res.Tools = append(res.Tools, e.tool.Name)
	}
	slices.Sort(res.Tools)
	return res, nil
}

// commit registers a resolved manual in one step: a manual of its name is
// an *AlreadyExistsError unless replace, and the registry's bounds hold.
func (r *Registry) commit(res *Resolved, replace bool) (*Registration, error) {
	name := res.Name
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.cat.Load()
	next := old.clone()
	if prev, taken := old.manuals[name]; taken {
		if !replace {
			return nil, &AlreadyExistsError{Kind: "manual", Name: name, Manual: name}
		}
		for _, t := range prev.tools {
			delete(next.tools, t)
		}
	}
	me := &manualEntry{name: name}
	for _, e := range res.entries {
		if _, clash := next.tools[e.tool.Name]; clash {
			return nil, &AlreadyExistsError{Kind: "tool", Name: e.tool.Name, Manual: name}
		}
		next.tools[e.tool.Name] = e
		me.tools = append(me.tools, e.tool.Name)
	}
	slices.Sort(me.tools)
	next.manuals[name] = me
	if n := len(next.manuals); n > r.cfg.maxManuals && n > len(old.manuals) {
		return nil, &LimitError{What: "manuals", Limit: r.cfg.maxManuals, Would: n}
	}
	if n := len(next.tools); n > r.cfg.maxTools && n > len(old.tools) {
		return nil, &LimitError{What: "tools", Limit: r.cfg.maxTools, Would: n}
	}
	next.reindex(old.manuals[name], res.entries)
	r.cat.Store(next)
	return &Registration{Manual: name, Tools: slices.Clone(me.tools), Skipped: res.Skipped}, nil
}

// prepare checks every tool of a manual and builds its entry.
func (r *Registry) prepare(name string, m *manual.Manual, allowed []string, env Env) ([]*toolEntry, []manual.SkippedTool, error) {
	var entries []*toolEntry
	var skipped []manual.SkippedTool
	var filteredTypes []string
	var unbound error // the first operation skipped for a variable
	seen := map[string]int{}
	for i, t := range m.Tools {
		path := fmt.Sprintf("tools[%d]", i)
		kind := t.Template.Type
		if allowed != nil && !slices.Contains(allowed, kind) {
			skipped = append(skipped, manual.SkippedTool{Name: t.Name, Reason: fmt.Sprintf("call template type %q is not in allowed_communication_protocols [%s]", kind, strings.Join(allowed, ", "))})
			if !slices.Contains(filteredTypes, kind) {
				filteredTypes = append(filteredTypes, kind)
			}
			continue
		}
		f := r.factories[kind]
		if f == nil {
			return nil, nil, &manual.Error{Manual: name, Path: path + ".tool_call_template.call_template_type", Msg: fmt.Sprintf("no transport for type %q (have: %s)", kind, strings.Join(slices.Sorted(maps.Keys(r.factories)), ", "))}
		}
		if t.Template.HasVariables() {
			if err := r.variables.CheckBound(t.Template.Fields(), name, path+".tool_call_template"); err != nil {
				var ve *vars.NotFoundError
				if m.Converted() && errors.As(err, &ve) {
					if unbound == nil {
						unbound = err
					}
					// An operation of a published document that needs a
					// credential the operator did not bind (an admin
					// key): it costs that operation only.
					skipped = append(skipped, manual.SkippedTool{Name: t.Name, Reason: fmt.Sprintf(
						"needs the variable %q, which the operator has not bound to manual %q (as %s)", ve.Name, ve.Manual, ve.Key)})
					continue
				}
				return nil, nil, err
			}
		}
		tr, err := f(t.Template.JSON(), env)
		if err != nil {
			return nil, nil, prefixWithManual(manual.ErrorAt(err, path+".tool_call_template"), name)
		}
		tc := t.Registered(name, FullToolName(name, t.Name))
		if j, dup := seen[tc.Name]; dup {
			return nil, nil, &manual.Error{Manual: name, Path: path + ".name", Msg: fmt.Sprintf("%q is also the full name of tools[%d]", tc.Name, j)}
		}
		seen[tc.Name] = i
		e := &toolEntry{tool: tc, env: env, short: t, answer: "tool " + tc.Name + "'s answer"}
		if !t.Template.HasVariables() {
			e.static = tr
		}
		entries = append(entries, e)
	}
	if len(entries) == 0 && unbound != nil {
		return nil, nil, unbound
	}
	if len(entries) == 0 && len(filteredTypes) > 0 {
		return nil, nil, &manual.Error{Manual: name, Msg: fmt.Sprintf(
			"all %d tools were filtered out by allowed_communication_protocols [%s]: they use [%s]; list those types to register them",
			len(skipped), strings.Join(allowed, ", "), strings.Join(filteredTypes, ", "))}
	}
	return entries, skipped, nil
}

// Deregister removes a manual and its tools. name is sanitised as Register
// sanitises it, so the name a manual was registered under works here too.
func (r *Registry) Deregister(name string) error {
	_, err := r.Remove(name)
	return err
}

// Remove is Deregister that reports what it removed: the manual's sanitised
// name and its tools' full names, sorted. An unknown manual is a
// *NotFoundError.
func (r *Registry) Remove(name string) (*Registration, error) {
	name = SanitizeManualName(name)
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.cat.Load()
	me, ok := old.manuals[name]
	if !ok {
		return nil, r.UnknownManual(name)
	}
	next := old.clone()
	delete(next.manuals, name)
	for _, t := range me.tools {
		delete(next.tools, t)
	}
	next.reindex(me, nil)
	r.cat.Store(next)
	return &Registration{Manual: name, Tools: slices.Clone(me.tools)}, nil
}

// PlaintextAllowed reports whether a connection without TLS may reach host
// (a host name or IP, no port): only a host the egress policy lists.
func (r *Registry) PlaintextAllowed(host string) bool { return r.env("").PlaintextAllowed(host) }

// Manuals lists the registered manuals' names, sorted.
func (r *Registry) Manuals() []string { return slices.Sorted(maps.Keys(r.cat.Load().manuals)) }

// List returns every registered tool, sorted by name. The tools are shared:
// do not change them.
func (r *Registry) List() []*manual.Tool {
	c := r.cat.Load()
	out := make([]*manual.Tool, len(c.names))
	for i, n := range c.names {
		out[i] = c.tools[n].tool
	}
	return out
}

// Tool returns the tool of that full name (its manual part sanitised, as
// Register sanitises a manual's name).
func (r *Registry) Tool(name string) (*manual.Tool, error) {
	e, err := r.lookup(name)
	if err != nil {
		return nil, err
	}
	return e.tool, nil
}

// lookup finds a tool by its full name, its manual part normalised
// (NormalizeToolName): `my-api.get` finds `my_api.get`.
func (r *Registry) lookup(name string) (*toolEntry, error) {
	c := r.cat.Load()
	if e, ok := c.tools[name]; ok {
		return e, nil
	}
	if e, ok := c.tools[NormalizeToolName(name)]; ok {
		return e, nil
	}
	return nil, &NotFoundError{Kind: "tool", Name: name, Similar: similarNames(name, c.names)}
}

// clone copies c for a change. The copy keeps c's names and index, which
// reindex then brings up to date with the change.
func (c *catalog) clone() *catalog {
	return &catalog{manuals: maps.Clone(c.manuals), tools: maps.Clone(c.tools), names: c.names, index: c.index}
}

// reindex updates the names and index c was cloned with for a change that
// removed gone's tools (gone may be nil) and added added's: the cost is
// the changed tools' terms plus copying the sorted slices, never a new
// analysis of the tools that stay.
func (c *catalog) reindex(gone *manualEntry, added []*toolEntry) {
	var goneNames []string
	if gone != nil {
		goneNames = gone.tools
	}
	tools := make([]*manual.Tool, len(added))
	addedNames := make([]string, len(added))
	for i, e := range added {
		tools[i], addedNames[i] = e.tool, e.tool.Name
	}
	slices.Sort(addedNames)
	c.names = mergeNames(c.names, goneNames, addedNames)
	if c.index != nil {
		c.index = c.index.With(goneNames, tools)
	}
}

// mergeNames is names less gone plus added, all three sorted (a name of
// added is in names only if it is in gone too), copying the runs between
// the changes whole.
func mergeNames(names, gone, added []string) []string {
	out := make([]string, 0, max(0, len(names)-len(gone))+len(added))
	at := 0
	for len(gone) > 0 || len(added) > 0 {
		drop, found := len(names), false
		if len(gone) > 0 {
			drop, found = slices.BinarySearch(names, gone[0])
		}
		if len(added) > 0 {
			if in, _ := slices.BinarySearch(names, added[0]); in <= drop {
				out = append(append(out, names[at:in]...), added[0])
				at, added = in, added[1:]
				continue
			}
		}
		gone = gone[1:]
		if !found {
			continue
		}
		out = append(out, names[at:drop]...)
		at = drop + 1
	}
	return append(out, names[at:]...)
}

// Manual reports the tools of a registered manual (its name sanitised as
// Register sanitises it).
func (r *Registry) Manual(name string) (*Registration, bool) {
	name = SanitizeManualName(name)
	me, ok := r.cat.Load().manuals[name]
	if !ok {
		return nil, false
	}
	return &Registration{Manual: name, Tools: slices.Clone(me.tools)}, true
}

// Bounds are a registry's bounds (WithMaxManuals, WithMaxTools) and what
// it holds against them.
type Bounds struct {
	MaxManuals, MaxTools int
	Manuals, Tools       int
}

// Bounds reports the registry's bounds and what it holds now.
func (r *Registry) Bounds() Bounds {
	c := r.cat.Load()
	return Bounds{MaxManuals: r.cfg.maxManuals, MaxTools: r.cfg.maxTools, Manuals: len(c.manuals), Tools: len(c.tools)}
}

// UnknownManual is the *NotFoundError for a manual of that name, with the
// registered names close to it.
func (r *Registry) UnknownManual(name string) *NotFoundError {
	name = SanitizeManualName(name)
	return &NotFoundError{Kind: "manual", Name: name, Similar: similarNames(name, slices.Sorted(maps.Keys(r.cat.Load().manuals)))}
}
