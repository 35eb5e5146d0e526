package mcpserve

import (
	"strings"

	"github.com/exprd/exprd/utcp"
)

// ScopeToolsPrefix starts a token's scope that limits what it sees of the
// registry: "tools:math" is the manual math's tools, "tools:catalog.get*"
// the tools whose full name starts with catalog.get, "tools:*" all. A
// token with no such scope sees every tool.
const ScopeToolsPrefix = "tools:"

// nameSet matches tools' full names by patterns: a name, which matches
// itself and, as a manual's name, each of that manual's tools; or a
// prefix ending in *. "*" matches everything.
type nameSet struct {
	exact    map[string]bool
	prefixes []string
}

func newNameSet(patterns []string) nameSet {
	s := nameSet{exact: map[string]bool{}}
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

// has reports whether a tool's full name matches.
func (s nameSet) has(name string) bool {
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

// view is what a caller may see of the registry: every tool, or those
// its tools: scopes match.
type view struct {
	all   bool
	tools nameSet
}

func viewOf(c *Caller) view {
	if c == nil {
		return view{all: true}
	}
	var pats []string
	for _, s := range c.Scopes {
		if p, ok := strings.CutPrefix(s, ScopeToolsPrefix); ok {
			pats = append(pats, p)
		}
	}
	if len(pats) == 0 {
		return view{all: true}
	}
	return view{tools: newNameSet(pats)}
}

func (v view) sees(name string) bool { return v.all || v.tools.has(name) }
