// Package agent runs an agent turn, the AgentLoop service's model ↔ tools
// steps (docs/agentloop.md). The gRPC service (server/) drives it for a
// client over a bidi stream; everything it asks of the client comes
// through Hooks, Approval, Events and client-run Executors.
//
//	out, err := agent.Run(ctx, agent.Config{
//		Provider: provider, Messages: []model.Message{model.User("Which lamps are cheap?")},
//		Tools: []agent.Tool{{Name: "math_add", Parameters: schema, Exec: agent.UTCPExecutor(reg, "math.add")}},
//	})
//
// # The loop
//
//   - Each step calls the model with Config.System (when set) and the
//     messages so far, the active tools and the tool choice, forwarding
//     text deltas to Events.TextDelta as they arrive. Then it runs the
//     step's tool calls at once, at most Config.Parallelism at a time
//     (default DefaultParallelism), and appends the assistant message and
//     one tool message per call (model.ToolResult) in call order. The
//     assistant message holds each call as it ran: a call a PreToolCall
//     hook replaced shows the replacement's name and arguments, next to
//     the result they made (Step.ToolCalls keeps the model's own).
//   - The turn ends when the model answers without a tool call
//     (StopCompleted), or when Config.Stop matches after a step, its tools
//     run (StopConditionMet; default MaxSteps(DefaultMaxSteps)).
//     HasToolCall, And, Or and Not combine conditions.
//   - Every failure of one call is an is_error result, {"error": "..."},
//     and the loop goes on: a missing tool (the message names at most
//     MaxToolsNamed of the step's tools: all, the closest to the name
//     called, or the first, then how many more), arguments that are not JSON or not an object (the model
//     package's ToolCall.ArgumentsErr, checked again here), arguments that
//     fail the tool's JSON Schema (santhosh-tekuri/jsonschema, draft
//     2020-12 by default; compiled schemas are cached, SchemaCacheSize), a
//     tool with no executor, a denied approval, an executor's error or
//     panic, content that is not JSON, a call past its timeout. The text
//     of an error result is at most MaxErrorBytes. A step that stopped
//     for length answers each of its calls with an error result and runs
//     nothing (no hooks either).
//   - Hooks (nil: not subscribed): PrepareStep may change the messages,
//     active tools, tool choice and model of its step only; PreToolCall may
//     replace a call (same id, else ErrCallIDMismatch) or return its
//     result; PostToolCall may replace a result and runs only for calls
//     that reached their executor. A hook's error, or the approver's, fails
//     the turn with a *HookError (ErrHook) naming the hook, step and call. Tools with NeedsApproval are put to
//     Config.Approve after the checks, before they run.
//   - Events are called from the loop's goroutines, several at once while
//     a step's tools run.
//
// # Limits and ends
//
// A step runs at most Config.MaxCallsPerStep calls (DefaultMaxCallsPerStep):
// of a reply with more, the next call is one error result saying how many
// the reply made, and the calls after it are left out of the step and the
// history. A turn makes at most Config.StepLimit steps (DefaultStepLimit)
// whatever its Stop says, ending as if Stop matched. What one model
// request carries (the system prompt, the tools and the messages, as
// JSON) is at most Config.MaxHistoryBytes (DefaultMaxHistoryBytes) by
// construction: a Config over it fails before anything is sent, and a
// request over it (a step grew the history past it, or a PrepareStep
// hook's messages are) is not sent: the turn ends with a *HistoryError
// (ErrHistoryTooLarge, StopHistoryLimit), the steps before it finished.
// Config.ReserveHistory is asked to hold memory for the history before it
// grows.
//
// Each call runs under Tool.Timeout (0: Config.ToolTimeout, default
// DefaultToolTimeout); a call past it is answered at once with an error
// result even if its executor ignores its context. Run returns only once
// every Executor it started has returned: one that ignores its context
// delays the end of the turn, not the answer to its call. Each step (model call
// and tools) runs under Config.StepTimeout (DefaultStepTimeout): a model
// call past it ends the turn with ErrStepTimeout (StopStepTimeout); tools
// past it are error results and the loop goes on. The turn runs under
// Config.TurnTimeout (DefaultTurnTimeout): past it Run returns
// ErrTurnTimeout (StopTurnTimeout); either is a *TimeoutError. Cancelling
// ctx (an abort) cancels the model request and every running tool, and Run
// returns ctx.Err() itself (StopCancelled). A failed model request is a
// *ModelError (ErrModel) wrapping the provider's error and naming the
// model the request named, and whether a PrepareStep hook chose it
// (StopError); a Config that cannot run is
// ErrInvalidConfig, before anything is sent: besides its own checks, the
// messages (roles, tool_call_id on tool messages, ids and names of
// assistant tool calls) and the tool choice (auto, none, required with at
// least one tool, or a declared tool) are checked up front as the model
// package would check the request. The error holds a *FieldError naming
// the field ("messages[2].role", "tool_choice"). What a PrepareStep hook
// returns is checked the same way; a failure is ErrHook holding a
// *FieldError ("active_tools", "tool_choice", "messages[0].role").
//
// Errors read as plain sentences, without a package prefix; the text of a
// *ModelError or *HookError holds the error it wraps, which is for logs.
//
// Run always returns an Outcome: the steps finished, the last step's text,
// the summed usage and the StopReason, with its error when it failed.
//
// # Executors
//
// A tool runs on the client (an Executor of the caller's, which asks over
// the stream), as a UTCP tool (UTCPExecutor), as the built-in expr tool on
// the session's state (ExprExecutor: the answer's JSON, an error answer an
// error result) or as the built-in codemode tool (CodeModeExecutor:
// {"code": "..."} → {"value": ...}; CodeModeParameters is its schema; each
// run under codemode.ToolHandlerTimeout, 3 s, or the call's timeout when
// smaller). An Executor's context carries the step of its call
// (CallStep).
package agent
