package utcp

import (
	"context"
	"encoding/json"

	"github.com/exprd/exprd/utcp/manual"
)

type operatorKey struct{}

// WithOperator marks what registers under ctx as the operator's own
// (LoadDir does, for --manuals-dir): a transport may then allow what only
// the operator may configure, such as an mcp template that starts a
// process on exprd's host (Env.Operator). What arrives over the API is
// never registered under it.
func WithOperator(ctx context.Context) context.Context {
	return context.WithValue(ctx, operatorKey{}, true)
}

func isOperator(ctx context.Context) bool {
	v, _ := ctx.Value(operatorKey{}).(bool)
	return v
}

// Operator reports whether the manual this Env serves was registered by the
// operator (WithOperator): only then may a transport start a process.
func (e Env) Operator() bool { return e.operator }

type discoveryKey struct{}

// withDiscoveryTemplate returns ctx carrying the manual call template being
// registered, as written.
func withDiscoveryTemplate(ctx context.Context, tmpl *manual.CallTemplate) context.Context {
	return context.WithValue(ctx, discoveryKey{}, tmpl)
}

// DiscoveryTemplate is, in a Discoverer's Discover, the manual call
// template being registered as written, its variables unresolved: a
// transport whose discovered tools call back through that template (mcp)
// puts it in their templates, so that no resolved secret is in the manual
// a store shares. ok is false outside a registration.
func DiscoveryTemplate(ctx context.Context) (raw json.RawMessage, ok bool) {
	t, _ := ctx.Value(discoveryKey{}).(*manual.CallTemplate)
	if t == nil {
		return nil, false
	}
	return t.JSON(), true
}

// ReserveAnswer grows, by what n bytes of a provider's answer hold while
// they are decoded (three times n, as ReadBody counts), the memory budget's
// reservation of the registry's call under ctx (WithMemoryBudget): for a
// transport whose library reads the answer itself (mcp), before or as soon
// as it knows its size. A budget that cannot hold it is a *TransportError
// with ReasonMemory; without a call or a budget it does nothing.
func ReserveAnswer(ctx context.Context, n int64, tool string) error {
	mem := callMemory(ctx)
	if mem == nil || n <= 0 {
		return nil
	}
	if err := mem.Resize(ctx, mem.Size()+bodyMemory(n)); err != nil {
		return memoryError(ctx, tool, err)
	}
	return nil
}
