// Package toolscope is what a caller sees of the tool registry: a bearer
// token's scopes of the form tools:PATTERN ("tools:math" the manual math's
// tools, "tools:catalog.get*" the tools whose full name starts with
// catalog.get, "tools:*" all) make its View; a token with no such scope,
// and a server without auth, see every tool. The gRPC services and the MCP
// endpoint both ask a View before they list, search, describe or call a
// tool, and treat one it does not see as not registered.
package toolscope

import (
	"context"
	"errors"
	"strings"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/manual"
)

// Prefix starts a token's scope that limits what it sees of the
// registry.
const Prefix = "tools:"

// Set matches tools' full names by patterns: a name, which matches itself
// and, as a manual's name, each of that manual's tools; or a prefix ending
// in *. "*" matches everything. The zero Set matches nothing.
type Set struct {
	exact    map[string]bool
	prefixes []string
}

// NewSet is the set of names patterns match; blank patterns are skipped.
func NewSet(patterns []string) Set {
	s := Set{exact: map[string]bool{}}
	for _, p := range patterns {
		p = strings.TrimSpace(p)
		switch {
		case p == "":
		case strings.HasSuffix(p, "*"):
			s.prefixes = append(s.prefixes, utcp.NormalizeToolName(strings.TrimSuffix(p, "*")))
		case !strings.Contains(p, "."):
			s.exact[utcp.SanitizeManualName(p)] = true // a manual
		default:
			s.exact[utcp.NormalizeToolName(p)] = true
		}
	}
	return s
}

// Has reports whether a tool's full name matches.
func (s Set) Has(name string) bool {
	name = utcp.NormalizeToolName(name)
	if s.exact[name] {
		return true
	}
	for i := strings.IndexByte(name, '.'); i > 0; i = next(name, i) {
		if s.exact[name[:i]] {
			return true
		}
	}
	for _, p := range s.prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// next is the index of the next '.' of name after i, or -1.
func next(name string, i int) int {
	j := strings.IndexByte(name[i+1:], '.')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

// View is what a caller may see of the registry: every tool, or those its
// tools: scopes match. The zero View sees every tool.
type View struct {
	limited bool
	tools   Set
	pats    []string // the patterns of its tools: scopes
}

// Of is the view a token's scopes give: the patterns of its tools:
// scopes, or every tool when it has none.
func Of(scopes []string) View {
	var pats []string
	for _, s := range scopes {
		if p, ok := strings.CutPrefix(s, Prefix); ok {
			pats = append(pats, p)
		}
	}
	if len(pats) == 0 {
		return View{}
	}
	return View{limited: true, tools: NewSet(pats), pats: pats}
}

// Scopes are the tools: scopes that give the view (Of(v.Scopes()) sees
// what v sees): none for a view of every tool.
func (v View) Scopes() []string {
	out := make([]string, len(v.pats))
	for i, p := range v.pats {
		out[i] = Prefix + p
	}
	return out
}

// All reports whether the view sees every tool.
func (v View) All() bool { return !v.limited }

// Sees reports whether the view sees the tool of this full name.
func (v View) Sees(name string) bool { return !v.limited || v.tools.Has(name) }

// Func is Sees, or nil for a view of every tool: the form of a predicate
// whose absence means "no limit" (codemode.RunOptions.Visible).
func (v View) Func() func(name string) bool {
	if !v.limited {
		return nil
	}
	return v.Sees
}

// Filter returns the names the view sees, in their order; names itself
// when it sees every tool.
func (v View) Filter(names []string) []string {
	if !v.limited {
		return names
	}
	out := make([]string, 0, len(names))
	for _, n := range names {
		if v.Sees(n) {
			out = append(out, n)
		}
	}
	return out
}

// Registry is what Tool needs of a registry; *utcp.Registry is one.
type Registry interface {
	Tool(name string) (*manual.Tool, error)
}

// Tool looks a tool up as the view sees the registry: one it does not see
// is a *utcp.NotFoundError, as an unregistered one is, and the similar
// names an unregistered one's error offers are only those the view sees.
func (v View) Tool(reg Registry, name string) (*manual.Tool, error) {
	t, err := reg.Tool(name)
	if !v.limited {
		return t, err
	}
	if err == nil && v.Sees(t.Name) {
		return t, nil
	}
	nf := &utcp.NotFoundError{Kind: "tool", Name: name}
	var e *utcp.NotFoundError
	if errors.As(err, &e) {
		for _, s := range e.Similar {
			if v.Sees(s) {
				nf.Similar = append(nf.Similar, s)
			}
		}
	} else if err != nil {
		return nil, err
	}
	return nil, nf
}

type viewKey struct{}

// WithView carries a caller's view in ctx, for what serves its request.
func WithView(ctx context.Context, v View) context.Context {
	if !v.limited && ctx.Value(viewKey{}) == nil {
		return ctx // nothing to carry: FromContext's default
	}
	return context.WithValue(ctx, viewKey{}, v)
}

// FromContext is the view WithView carries in ctx; a view of every tool
// when none.
func FromContext(ctx context.Context) View {
	v, _ := ctx.Value(viewKey{}).(View)
	return v
}
