package codemode

import (
	"fmt"
	"time"

	"github.com/exprd/exprd/evaluator"
)

// The defaults of a run. A zero field of [Budgets] takes its default; a
// negative one is an error.
const (
	// DefaultTimeout bounds a direct run (Execute, Run).
	DefaultTimeout = 30 * time.Second
	// ToolHandlerTimeout bounds a run made through the tool handler
	// (CodeMode.CallTool, the AgentLoop's codemode tool).
	ToolHandlerTimeout = 3 * time.Second
	// DefaultMaxTimeout is the server's maximum of a request's timeout
	// (exprd's --codemode-max-timeout): a run holds its tool calls and
	// their answers, and a Run stream its approvals, for as long as it
	// lasts; 64 calls of the default 10 s UTCP timeout fit in it.
	DefaultMaxTimeout = 15 * time.Minute
	// DefaultMaxIterations bounds predicate bodies (map, filter, ...) per run.
	DefaultMaxIterations = evaluator.DefaultMaxIterations
	// DefaultMemoryBudget is the expr VM's memory budget per run.
	DefaultMemoryBudget = evaluator.DefaultMemoryBudget
	// DefaultMaxSourceLength bounds the source, in characters.
	DefaultMaxSourceLength = evaluator.DefaultMaxSourceLength
	// DefaultMaxNodes bounds the parsed tree's nodes.
	DefaultMaxNodes = evaluator.DefaultMaxNodes
	// DefaultMaxStringLength bounds a string the program builds, in
	// characters.
	DefaultMaxStringLength = evaluator.DefaultMaxStringLength
	// DefaultMaxToolCalls bounds the tool calls of one run.
	DefaultMaxToolCalls = 64
	// DefaultMaxResultBytes bounds the JSON of the result, of a tool's
	// arguments and of a stream's collected chunks.
	DefaultMaxResultBytes = 1 << 20
	// DefaultMaxAllocBytes bounds what a run builds, in bytes: strings,
	// arrays and maps as they are made, and tool results as they arrive
	// (three bytes a byte of their JSON), as ExprTool bounds a call.
	DefaultMaxAllocBytes = evaluator.DefaultMaxAllocBytes
	// DefaultCacheSize is how many compiled programs a Runtime keeps.
	DefaultCacheSize = 1024
)

// Budgets bound one run. Zero fields take the defaults above.
type Budgets struct {
	Timeout         time.Duration
	MaxIterations   int
	MemoryBudget    int
	MaxSourceLength int
	MaxNodes        int
	MaxStringLength int
	MaxToolCalls    int
	MaxResultBytes  int
	MaxAllocBytes   int
}

// withDefaults fills zero fields and refuses negative ones.
func (b Budgets) withDefaults() (Budgets, error) {
	if b.Timeout < 0 {
		return b, fmt.Errorf("codemode: budget timeout %v: want a positive value", b.Timeout)
	}
	if b.Timeout == 0 {
		b.Timeout = DefaultTimeout
	}
	for _, f := range []struct {
		name string
		v    *int
		def  int
	}{
		{"max_iterations", &b.MaxIterations, DefaultMaxIterations},
		{"memory_budget", &b.MemoryBudget, DefaultMemoryBudget},
		{"max_source_length", &b.MaxSourceLength, DefaultMaxSourceLength},
		{"max_nodes", &b.MaxNodes, DefaultMaxNodes},
		{"max_string_length", &b.MaxStringLength, DefaultMaxStringLength},
		{"max_tool_calls", &b.MaxToolCalls, DefaultMaxToolCalls},
		{"max_result_bytes", &b.MaxResultBytes, DefaultMaxResultBytes},
		{"max_alloc_bytes", &b.MaxAllocBytes, DefaultMaxAllocBytes},
	} {
		switch {
		case *f.v < 0:
			return b, fmt.Errorf("codemode: budget %s %d: want a positive value", f.name, *f.v)
		case *f.v == 0:
			*f.v = f.def
		}
	}
	return b, nil
}
