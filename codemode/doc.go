// Package codemode runs Expr programs that chain UTCP tools, checks the
// plans a model makes of a prompt, and orchestrates prompt → plan → run.
//
// # Runtime
//
//	rt, _ := codemode.New(registry)               // a *utcp.Registry
//	res, err := rt.Run(ctx, `let r1 = codemode.CallTool("math.add", {"a": 5, "b": 7});
//	let sum = codemode.Get(r1, "result");
//	codemode.CallTool("math.multiply", {"a": sum, "b": 3})`, codemode.RunOptions{
//		Tools: []string{"math.add", "math.multiply"}, // the whitelist
//	})
//
// The contract:
//
//   - The environment has only codemode: CallTool(name, args),
//     CallToolStream(name, args) (the chunks as an array; each also given
//     to RunOptions.OnChunk and OnEvent as it arrives) and Get(value, key)
//     (nil when value is not an object or has no key). let bindings and ;
//     sequences; the last expression is the result. Expr's builtins stay.
//   - Before anything runs the parsed tree is walked: any other name, $env,
//     a computed callee, a method other than codemode's three, a let named
//     codemode or __*, and a tool name written as a literal that is not on
//     the whitelist are refused with a *Error carrying the reason, message,
//     line and column. Let names may shadow builtins (`let sum`).
//   - The whitelist is enforced again inside CallTool/CallToolStream, so a
//     name computed at run time is refused too (unknown-reference, Tool
//     set) and nothing is sent.
//   - Budgets.Timeout (timeout_ms) bounds the whole run: DefaultTimeout
//     (30 s) for a direct run, ToolHandlerTimeout (3 s) through
//     ToolHandler. Every tool call gets the run's context, so its
//     remaining deadline; on timeout or cancellation the in-flight call is
//     cancelled and the run stops. The VM runs in the caller's goroutine:
//     Run returns only when nothing of the run is left running.
//   - Budgets as in the evaluator: iterations (a counter patched into every
//     predicate body, which also checks the context), the VM's memory
//     budget, source length, AST nodes, string length; plus tool calls per
//     run (DefaultMaxToolCalls) and the JSON size of the result, of tool
//     arguments and of a stream's chunks (DefaultMaxResultBytes). A zero
//     budget takes its default; a negative one is ErrInvalidOptions. As in
//     the evaluator, code over the source length or node limit is
//     guardrail-violation (it is refused before it runs); the others are
//     budget-exceeded, naming the budget.
//   - A tool's failure is a *Error, reason host-function (invalid-arguments
//     when its schema refuses the arguments), naming the tool, at the
//     call's position, wrapping utcp's error (errors.Is(err,
//     utcp.ErrTransport)). A stream that breaks is such an error, never a
//     clean end.
//   - A tool in RunOptions.NeedsApproval is put to RunOptions.Approve first;
//     a rejection (or no Approve) is the tool's error, outcome rejected. An
//     Approve error wrapping ErrRejected rejects the call with its text as
//     the reason.
//   - Result.Trace lists every call: tool, arguments, duration, outcome
//     (ok, error, rejected, cancelled, timeout), error summary. OnEvent
//     reports each call's start and end and each chunk.
//   - A cancelled run is Result.Cancelled with an error matching
//     context.Canceled; a timed-out one is budget-exceeded (time), matching
//     context.DeadlineExceeded.
//
// Compiled programs are cached (WithCacheSize, default DefaultCacheSize)
// and VMs pooled; a Runtime is safe for concurrent use. The sandbox (the
// whitelist walk, the cache, the pool, the normaliser that turns values into
// JSON types) is internal/exprbound's, which the evaluator shares: this
// package is its environment (the codemode namespace) and its policy
// (check.go).
//
// # Plans and the orchestrator
//
// A Plan is {"tools": [...], "code": "...", "stream": bool}. CheckPlan
// requires declared ⊆ candidates, used ⊆ declared, declared ⊆ used (unless
// the code computes a tool name) and stream exactly when the code calls
// CallToolStream; failures are invalid-plan (or the code's own reason).
//
// Runtime.Orchestrate ranks the whole registry for the prompt
// (Registry.Search, keeping DefaultCatalogLimit = utcp_search_tools_limit),
// offers the model the top CandidateLimit (default
// DefaultCandidateLimit) in a
// closed-world system prompt with each tool's description and input and
// output schemas, and reads back the JSON plan. A plan that fails its
// checks or its compile goes back to the model once with the error; a
// second failure is invalid-plan. {"handled": false} or an empty plan is
// Handled false, no error. ToolHandler is a CallTool(ctx, prompt)
// (handled, value, err) in go-utcp CodeMode's shape.
package codemode
