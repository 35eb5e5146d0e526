package mcpserve

import "github.com/exprd/exprd/utcp/toolscope"

// ScopeToolsPrefix starts a token's scope that limits what it sees of the
// registry: "tools:math" is the manual math's tools, "tools:catalog.get*"
// the tools whose full name starts with catalog.get, "tools:*" all. A
// token with no such scope sees every tool. The gRPC services read the
// same scopes (utcp/toolscope).
const ScopeToolsPrefix = toolscope.Prefix

// nameSet matches tools' full names by patterns (toolscope.Set): a name,
// which matches itself and, as a manual's name, each of that manual's
// tools; or a prefix ending in *. "*" matches everything.
type nameSet struct{ toolscope.Set }

func newNameSet(patterns []string) nameSet { return nameSet{toolscope.NewSet(patterns)} }

// has reports whether a tool's full name matches.
func (s nameSet) has(name string) bool { return s.Has(name) }

// view is what a caller may see of the registry (toolscope.View): every
// tool, or those its tools: scopes match.
type view struct {
	all bool
	toolscope.View
}

func viewOf(c *Caller) view {
	v := toolscope.View{}
	if c != nil {
		v = toolscope.Of(c.Scopes)
	}
	return view{all: v.All(), View: v}
}

func (v view) sees(name string) bool { return v.Sees(name) }
