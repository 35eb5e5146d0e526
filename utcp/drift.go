package utcp

import (
	"time"

	"github.com/exprd/exprd/utcp/manual"
)

// Drift is a registered tool whose provider now lists another definition
// than the one it was registered with (an MCP server whose tools/list
// changed): the registry keeps the registered one, and its transport
// refuses calls until the manual is registered again with replace.
type Drift struct {
	Kind DriftKind
	// Registered and Listed fingerprint the definition registered and the
	// one the provider lists now ("" when it lists none).
	Registered, Listed string
	// Since is when this replica first saw the provider list it.
	Since time.Time
}

// DriftKind says how a provider's definition of a tool differs.
type DriftKind string

// The kinds of drift.
const (
	DriftChanged DriftKind = "changed" // the provider lists another definition
	DriftRemoved DriftKind = "removed" // the provider no longer lists the tool
)

// DriftReporter is implemented by transports whose provider lists its
// tools' definitions (mcp): Drift says, without any I/O, whether what the
// provider last listed differs from t's registered definition (nil when it
// does not, or when this replica has not listed the provider yet).
type DriftReporter interface {
	Drift(t *manual.Tool) *Drift
}

// Drift reports how the provider of the tool of that full name now
// differs from its registered definition: nil when it does not, when its
// transport cannot tell (every transport but mcp), or when there is no
// such tool.
func (r *Registry) Drift(name string) *Drift {
	e, err := r.lookup(name)
	if err != nil {
		return nil
	}
	tr := e.static
	if tr == nil {
		if b := e.last.Load(); b != nil {
			tr = b.t
		}
	}
	if d, ok := tr.(DriftReporter); ok {
		return d.Drift(e.tool)
	}
	return nil
}
