// Package evaluator runs the `expr` tool's calls: it checks a whole call
// before anything runs, compiles each expression once into a bounded cache,
// and runs the steps on a session's [State] under [Budgets].
//
// A call, as the model sends it:
//
//	{"steps": [{"set": "scopes.root.selected", "expr": "...", "confirm": "..."}],
//	 "read": "len(scopes.root.selected)"}
//
// The contract:
//
//   - Before any step runs the input is validated against the tool's JSON
//     Schema, every set address is parsed, and every expression is parsed and
//     walked: a name it reads must be scopes, one of its own let names or a
//     host function; a function it calls must be one of the tool's functions.
//     $env and computed callees are refused. expr cannot disable its
//     predicates, so this walk is the whitelist. A failing check runs nothing.
//   - Each step reads the session's current state and its write replaces only
//     the maps and slices on its path (copy on write): a snapshot that another
//     run reads never changes.
//   - Values written or read are normalised to JSON types; NaN, ±Inf and maps
//     with non-string keys are expression-runtime errors.
//   - Integer arithmetic is checked: an overflow, a division or a modulo by
//     zero fails (expression-runtime) where it runs instead of wrapping or
//     making ±Inf; sortBy and sort are stable (internal/exprbound). A set
//     address may not name __proto__, constructor or prototype, which a
//     JavaScript client mirroring writes along their paths would follow into
//     a prototype.
//   - No message holds the text of a Go runtime panic inside expr (a reflect
//     call on null, a failed type assertion): it is worded for the model.
//     expr's own messages may still name Go types (`float64 % int`).
//   - Every failure the model should see is an [*Error] with a [Reason] from
//     the closed set of docs/exprtool.md#reasons; the [Answer] carries it.
//
// Budgets are named defaults ([DefaultBudgets]) that a session may lower and
// never raise. Iterations are bounded by patching every predicate body with a
// counter that also checks the time budget and the context every 1,024
// ticks, since expr's VM cannot be interrupted; the VM runs in the calling
// goroutine. The time budget reads the CPU time of the thread the program
// runs on (on Linux), or the tool's clock ([WithClock]).
//
// The sandbox (the whitelist walk, the compile cache, the VM pool, the
// normaliser) is internal/exprbound's, which CodeMode shares: this package
// is the tool's environment (scopes.root and its functions) and its policy
// (check.go).
package evaluator
