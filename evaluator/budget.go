package evaluator

import (
	"fmt"
	"strconv"
	"time"
)

// The server's maxima. A session may lower each one and never raise it.
const (
	DefaultTimeout         = 100 * time.Millisecond
	DefaultMaxIterations   = 1_000_000
	DefaultMemoryBudget    = 1_000_000
	DefaultMaxSourceLength = 8_000
	DefaultMaxNodes        = 2_000
	DefaultMaxStringLength = 100_000
	DefaultMaxArrayLength  = 100_000
	DefaultMaxReadChars    = 8_000
	DefaultFunctionTimeout = 10 * time.Second
	DefaultMaxSteps        = 50
	DefaultMaxValueBytes   = 8 << 20
	// DefaultMaxAllocBytes bounds what one call's programs build, in bytes
	// (strings, arrays, maps, and the host functions' answers they hold),
	// counted as they are made: the programs of the call cases allocate
	// at most a few hundred kilobytes; 64 MiB leaves room for a sort or a
	// map over a state's largest arrays.
	DefaultMaxAllocBytes = 64 << 20
	// DefaultMaxFunctionCalls bounds the host-function calls of one call,
	// as CodeMode bounds a run's tool calls.
	DefaultMaxFunctionCalls = 64
	DefaultCompileCacheSize = 4_096
)

// Budgets bound one call.
type Budgets struct {
	// Timeout is evaluation time per call, not counting waits on the user or
	// on host functions (client-run, server-run and UTCP alike).
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
	// FunctionTimeout bounds each host-function call, whoever runs it: the
	// client, the server, or a UTCP tool the server dispatches.
	FunctionTimeout time.Duration
	// MaxSteps bounds the steps of one call.
	MaxSteps int
	// MaxValueBytes bounds the JSON size of a value written, read, passed to
	// a function or rendered by toJSON and string.
	MaxValueBytes int
	// MaxAllocBytes bounds the bytes a call's programs build (strings,
	// arrays, maps) and the host-function answers they receive, over all
	// its steps; past an allowance it is reserved from the server's memory
	// budget.
	MaxAllocBytes int
	// MaxFunctionCalls bounds the host-function calls of one call.
	MaxFunctionCalls int
}

// DefaultBudgets returns the server's maxima.
func DefaultBudgets() Budgets {
	return Budgets{
		Timeout:          DefaultTimeout,
		MaxIterations:    DefaultMaxIterations,
		MemoryBudget:     DefaultMemoryBudget,
		MaxSourceLength:  DefaultMaxSourceLength,
		MaxNodes:         DefaultMaxNodes,
		MaxStringLength:  DefaultMaxStringLength,
		MaxArrayLength:   DefaultMaxArrayLength,
		MaxReadChars:     DefaultMaxReadChars,
		FunctionTimeout:  DefaultFunctionTimeout,
		MaxSteps:         DefaultMaxSteps,
		MaxValueBytes:    DefaultMaxValueBytes,
		MaxAllocBytes:    DefaultMaxAllocBytes,
		MaxFunctionCalls: DefaultMaxFunctionCalls,
	}
}

// budgetField is one budget as a caller names it: its field in the proto's
// Budgets message and the unit its value is in there.
type budgetField struct {
	name string // the proto field: timeout_ms, max_iterations, ...
	unit string // after a value: "ms", "characters", ...; empty for memory_budget, in expr's own units
	// get reads the field in that unit; a duration's milliseconds may have
	// a fraction when the Go API set it.
	get func(*Budgets) budgetValue
	// set copies the field from o to b.
	set func(b, o *Budgets)
}

// budgetValue is a budget in its caller's unit: a count as a magnitude and
// a sign, so that a uint64 budget past MaxInt64 is never read as negative,
// or a duration as milliseconds.
type budgetValue struct {
	n   uint64  // a count's magnitude
	ms  float64 // a duration's milliseconds
	neg bool
	dur bool // ms, not n, holds the value
}

func count[T int | uint64](v T) budgetValue {
	if v < 0 {
		return budgetValue{neg: true, n: uint64(-int64(v))}
	}
	return budgetValue{n: uint64(v)}
}

func millis(d time.Duration) budgetValue {
	return budgetValue{ms: float64(d) / float64(time.Millisecond), neg: d < 0, dur: true}
}

func (v budgetValue) zero() bool { return v.n == 0 && v.ms == 0 }

// above reports whether v is more than limit (both non-negative).
func (v budgetValue) above(limit budgetValue) bool {
	if v.dur {
		return v.ms > limit.ms
	}
	return v.n > limit.n
}

func (v budgetValue) String() string {
	if v.dur {
		return strconv.FormatFloat(v.ms, 'f', -1, 64)
	}
	if v.neg {
		return "-" + strconv.FormatUint(v.n, 10)
	}
	return strconv.FormatUint(v.n, 10)
}

// budgetFields lists every budget in the proto's order.
var budgetFields = []budgetField{
	{"timeout_ms", "ms", func(b *Budgets) budgetValue { return millis(b.Timeout) }, func(b, o *Budgets) { b.Timeout = o.Timeout }},
	{"max_iterations", "iterations", func(b *Budgets) budgetValue { return count(b.MaxIterations) }, func(b, o *Budgets) { b.MaxIterations = o.MaxIterations }},
	{"memory_budget", "", func(b *Budgets) budgetValue { return count(b.MemoryBudget) }, func(b, o *Budgets) { b.MemoryBudget = o.MemoryBudget }},
	{"max_source_length", "characters", func(b *Budgets) budgetValue { return count(b.MaxSourceLength) }, func(b, o *Budgets) { b.MaxSourceLength = o.MaxSourceLength }},
	{"max_nodes", "nodes", func(b *Budgets) budgetValue { return count(b.MaxNodes) }, func(b, o *Budgets) { b.MaxNodes = o.MaxNodes }},
	{"max_string_length", "characters", func(b *Budgets) budgetValue { return count(b.MaxStringLength) }, func(b, o *Budgets) { b.MaxStringLength = o.MaxStringLength }},
	{"max_array_length", "items", func(b *Budgets) budgetValue { return count(b.MaxArrayLength) }, func(b, o *Budgets) { b.MaxArrayLength = o.MaxArrayLength }},
	{"max_read_chars", "characters", func(b *Budgets) budgetValue { return count(b.MaxReadChars) }, func(b, o *Budgets) { b.MaxReadChars = o.MaxReadChars }},
	{"function_timeout_ms", "ms", func(b *Budgets) budgetValue { return millis(b.FunctionTimeout) }, func(b, o *Budgets) { b.FunctionTimeout = o.FunctionTimeout }},
	{"max_steps", "steps", func(b *Budgets) budgetValue { return count(b.MaxSteps) }, func(b, o *Budgets) { b.MaxSteps = o.MaxSteps }},
	{"max_value_bytes", "bytes", func(b *Budgets) budgetValue { return count(b.MaxValueBytes) }, func(b, o *Budgets) { b.MaxValueBytes = o.MaxValueBytes }},
	{"max_alloc_bytes", "bytes", func(b *Budgets) budgetValue { return count(b.MaxAllocBytes) }, func(b, o *Budgets) { b.MaxAllocBytes = o.MaxAllocBytes }},
	{"max_function_calls", "calls", func(b *Budgets) budgetValue { return count(b.MaxFunctionCalls) }, func(b, o *Budgets) { b.MaxFunctionCalls = o.MaxFunctionCalls }},
}

// withUnit renders v in f's unit: "1000 ms", "9 steps".
func (f budgetField) withUnit(v budgetValue) string {
	if f.unit == "" {
		return v.String()
	}
	return v.String() + " " + f.unit
}

// Lower returns b with each non-zero field of o in place of b's, refusing any
// value above b's: a session may lower the server's maxima, never raise them.
// An error names the first such field as the proto's Budgets message does,
// with its value in that field's unit:
//
//	budget timeout_ms: 1000 ms is above the server's maximum of 100 ms
func (b Budgets) Lower(o Budgets) (Budgets, error) {
	out := b
	for _, f := range budgetFields {
		v, limit := f.get(&o), f.get(&b)
		switch {
		case v.zero():
		case v.neg:
			return b, fmt.Errorf("budget %s: %s, want a positive value (0 keeps the server's maximum of %s)", f.name, f.withUnit(v), f.withUnit(limit))
		case v.above(limit):
			return b, fmt.Errorf("budget %s: %s is above the server's maximum of %s", f.name, f.withUnit(v), f.withUnit(limit))
		default:
			f.set(&out, &o)
		}
	}
	return out, nil
}

// Validate checks that every budget is positive: a server's maxima may be
// set to anything above zero.
func (b Budgets) Validate() error {
	for _, f := range budgetFields {
		if v := f.get(&b); v.zero() || v.neg {
			return fmt.Errorf("budget %s: %s, want a positive value", f.name, f.withUnit(v))
		}
	}
	return nil
}
