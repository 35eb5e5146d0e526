package evaluator

import (
	"fmt"
	"time"
)

// The server's maxima. A session may lower each one and never raise it.
const (
	DefaultTimeout          = 100 * time.Millisecond
	DefaultMaxIterations    = 1_000_000
	DefaultMemoryBudget     = 1_000_000
	DefaultMaxSourceLength  = 8_000
	DefaultMaxNodes         = 2_000
	DefaultMaxStringLength  = 100_000
	DefaultMaxArrayLength   = 100_000
	DefaultMaxReadChars     = 8_000
	DefaultFunctionTimeout  = 10 * time.Second
	DefaultMaxSteps         = 50
	DefaultMaxValueBytes    = 8 << 20
	DefaultCompileCacheSize = 4_096
)

// Budgets bound one call.
type Budgets struct {
	// Timeout is evaluation time per call, not counting waits on the user or
	// on client-run functions.
	Timeout time.Duration
	// MaxIterations bounds predicate bodies run per call.
	MaxIterations uint64
	// MemoryBudget is the expr VM's memory budget per expression.
	MemoryBudget uint64
	// MaxSourceLength bounds one expression's source, in characters.
	MaxSourceLength int
	// MaxNodes bounds one expression's AST nodes.
	MaxNodes int
	// MaxStringLength and MaxArrayLength bound strings (characters) and
	// arrays (items) in values written or read.
	MaxStringLength int
	MaxArrayLength  int
	// MaxReadChars bounds the JSON of a read value, in characters.
	MaxReadChars int
	// FunctionTimeout bounds the wait for a client-run function.
	FunctionTimeout time.Duration
	// MaxSteps bounds the steps of one call.
	MaxSteps int
	// MaxValueBytes bounds the JSON size of a value written, read, passed to
	// a function or rendered by toJSON and string.
	MaxValueBytes int
}

// DefaultBudgets returns the server's maxima.
func DefaultBudgets() Budgets {
	return Budgets{
		Timeout:         DefaultTimeout,
		MaxIterations:   DefaultMaxIterations,
		MemoryBudget:    DefaultMemoryBudget,
		MaxSourceLength: DefaultMaxSourceLength,
		MaxNodes:        DefaultMaxNodes,
		MaxStringLength: DefaultMaxStringLength,
		MaxArrayLength:  DefaultMaxArrayLength,
		MaxReadChars:    DefaultMaxReadChars,
		FunctionTimeout: DefaultFunctionTimeout,
		MaxSteps:        DefaultMaxSteps,
		MaxValueBytes:   DefaultMaxValueBytes,
	}
}

// Lower returns b with each non-zero field of o in place of b's, refusing any
// value above b's: a session may lower the server's maxima, never raise them.
func (b Budgets) Lower(o Budgets) (Budgets, error) {
	var err error
	lower := func(name string, max, v int64, set func()) {
		switch {
		case err != nil, v == 0:
		case v < 0 || v > max:
			err = fmt.Errorf("budget %s: %d is above the server's maximum %d", name, v, max)
		default:
			set()
		}
	}
	lower("timeout", int64(b.Timeout), int64(o.Timeout), func() { b.Timeout = o.Timeout })
	if o.MaxIterations > b.MaxIterations {
		err = fmt.Errorf("budget max_iterations: %d is above the server's maximum %d", o.MaxIterations, b.MaxIterations)
	}
	lower("max_iterations", int64(b.MaxIterations), int64(o.MaxIterations), func() { b.MaxIterations = o.MaxIterations })
	lower("memory_budget", int64(b.MemoryBudget), int64(o.MemoryBudget), func() { b.MemoryBudget = o.MemoryBudget })
	lower("max_source_length", int64(b.MaxSourceLength), int64(o.MaxSourceLength), func() { b.MaxSourceLength = o.MaxSourceLength })
	lower("max_nodes", int64(b.MaxNodes), int64(o.MaxNodes), func() { b.MaxNodes = o.MaxNodes })
	lower("max_string_length", int64(b.MaxStringLength), int64(o.MaxStringLength), func() { b.MaxStringLength = o.MaxStringLength })
	lower("max_array_length", int64(b.MaxArrayLength), int64(o.MaxArrayLength), func() { b.MaxArrayLength = o.MaxArrayLength })
	lower("max_read_chars", int64(b.MaxReadChars), int64(o.MaxReadChars), func() { b.MaxReadChars = o.MaxReadChars })
	lower("function_timeout", int64(b.FunctionTimeout), int64(o.FunctionTimeout), func() { b.FunctionTimeout = o.FunctionTimeout })
	lower("max_steps", int64(b.MaxSteps), int64(o.MaxSteps), func() { b.MaxSteps = o.MaxSteps })
	lower("max_value_bytes", int64(b.MaxValueBytes), int64(o.MaxValueBytes), func() { b.MaxValueBytes = o.MaxValueBytes })
	return b, err
}

// Validate checks that every budget is positive: a server's maxima may be
// set to anything above zero.
func (b Budgets) Validate() error {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"timeout", int64(b.Timeout)}, {"max_iterations", int64(b.MaxIterations)},
		{"memory_budget", int64(b.MemoryBudget)}, {"max_source_length", int64(b.MaxSourceLength)},
		{"max_nodes", int64(b.MaxNodes)}, {"max_string_length", int64(b.MaxStringLength)},
		{"max_array_length", int64(b.MaxArrayLength)}, {"max_read_chars", int64(b.MaxReadChars)},
		{"function_timeout", int64(b.FunctionTimeout)}, {"max_steps", int64(b.MaxSteps)},
		{"max_value_bytes", int64(b.MaxValueBytes)},
	} {
		if f.v <= 0 {
			return fmt.Errorf("budget %s: %d, want a positive value", f.name, f.v)
		}
	}
	return nil
}
