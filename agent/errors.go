package agent

import (
	"errors"
	"fmt"
	"time"
)

// Errors Run returns, for errors.Is. Their texts, and the typed errors'
// below, are plain words without a package prefix; a *ModelError's and a
// *HookError's text also holds the error they wrap (the provider's, the
// hook's), which is for logs: a caller that shows a client the failure
// builds its words from the fields.
var (
	// ErrInvalidConfig: the Config cannot run (the caller's fault). The
	// error also holds a *FieldError naming the field.
	ErrInvalidConfig = errors.New("the turn's configuration is invalid")
	// ErrHook: a hook, or the approver, failed or answered something the
	// loop cannot use. The error is a *HookError.
	ErrHook = errors.New("a hook failed")
	// ErrCallIDMismatch: a PreToolCall hook replaced a call with one of
	// another id. It comes inside a *HookError, so it matches ErrHook too.
	ErrCallIDMismatch = errors.New("the hook's reply names another tool call")
	// ErrModel: the model request failed. The error is a *ModelError,
	// which wraps the provider's.
	ErrModel = errors.New("the model request failed")
	// ErrStepTimeout: a step's model call outlived Config.StepTimeout. The
	// error is a *TimeoutError.
	ErrStepTimeout = errors.New("the step timed out")
	// ErrTurnTimeout: the turn outlived Config.TurnTimeout. The error is a
	// *TimeoutError.
	ErrTurnTimeout = errors.New("the turn timed out")
	// ErrHistoryTooLarge: the turn's history (what a model request
	// carries) would be over Config.MaxHistoryBytes, or the memory for it
	// could not be reserved (Config.ReserveHistory). The error is a
	// *HistoryError.
	ErrHistoryTooLarge = errors.New("the turn's history is too large")
)

// The hooks a *HookError names.
const (
	HookPrepareStep  = "prepare_step"
	HookPreToolCall  = "pre_tool_call"
	HookPostToolCall = "post_tool_call"
	// HookApproval is Config.Approve.
	HookApproval = "approval"
)

// HookError is a hook, or the approver, that failed or answered what the
// loop cannot use. It matches ErrHook and wraps the cause: the hook's own
// error, a *FieldError naming what of its answer is wrong, or
// ErrCallIDMismatch.
type HookError struct {
	// Hook is one of HookPrepareStep, HookPreToolCall, HookPostToolCall,
	// HookApproval.
	Hook string
	Step int
	// CallID is the tool call the hook was asked about; "" for
	// prepare_step.
	CallID string
	Err    error
}

func (e *HookError) Error() string {
	if e.CallID == "" {
		return fmt.Sprintf("step %d: the %s hook failed: %v", e.Step, e.Hook, e.Err)
	}
	return fmt.Sprintf("step %d: the %s hook of call %q failed: %v", e.Step, e.Hook, e.CallID, e.Err)
}

// Is reports whether target is ErrHook.
func (e *HookError) Is(target error) bool { return target == ErrHook }

func (e *HookError) Unwrap() error { return e.Err }

// ModelError is a step's failed model request. It matches ErrModel and
// wraps the provider's error (a *model.HTTPError, model's sentinels).
type ModelError struct {
	Step int
	// Model is the model name the request named; "" when it named none
	// and the provider used its own.
	Model string
	// ModelFromHook is set when a PrepareStep hook chose Model for the
	// step, not Config.Model.
	ModelFromHook bool
	Err           error
}

func (e *ModelError) Error() string {
	return fmt.Sprintf("step %d: the model request failed: %v", e.Step, e.Err)
}

// Is reports whether target is ErrModel.
func (e *ModelError) Is(target error) bool { return target == ErrModel }

func (e *ModelError) Unwrap() error { return e.Err }

// TimeoutError is a turn past Config.TurnTimeout (Turn set; it matches
// ErrTurnTimeout) or a step's model call past Config.StepTimeout (it
// matches ErrStepTimeout).
type TimeoutError struct {
	Turn bool
	// Step is the step whose model call timed out; with Turn, the step
	// the turn was in.
	Step    int
	Timeout time.Duration
}

func (e *TimeoutError) Error() string {
	if e.Turn {
		return fmt.Sprintf("the turn outlived its timeout of %s", e.Timeout)
	}
	return fmt.Sprintf("the model call of step %d outlived the step timeout of %s", e.Step, e.Timeout)
}

// Is reports whether target is ErrTurnTimeout (Turn) or ErrStepTimeout.
func (e *TimeoutError) Is(target error) bool {
	return e.Turn && target == ErrTurnTimeout || !e.Turn && target == ErrStepTimeout
}

// HistoryError is a turn whose history would be over
// Config.MaxHistoryBytes (Err nil), or whose history's memory
// Config.ReserveHistory refused (Err is its error). It matches
// ErrHistoryTooLarge and wraps Err.
type HistoryError struct {
	// Start is set when the Config's own messages, system prompt and tools
	// are over the limit, before any step; else Step is the step whose
	// request would be (the steps before it have run), or whose
	// reservation was refused.
	Start bool
	Step  int
	// Prepared is set when the messages a PrepareStep hook gave the step
	// make the request over the limit.
	Prepared bool
	// Bytes is the size the history would have, in bytes of JSON; Limit
	// is Config.MaxHistoryBytes.
	Bytes, Limit int64
	Err          error
}

func (e *HistoryError) Error() string {
	switch {
	case e.Err != nil:
		return fmt.Sprintf("step %d: the memory for the turn's history (%d bytes of JSON) could not be reserved: %v", e.Step, e.Bytes, e.Err)
	case e.Start:
		return fmt.Sprintf("the turn's messages, system prompt and tools are %d bytes of JSON, over the history limit of %d", e.Bytes, e.Limit)
	case e.Prepared:
		return fmt.Sprintf("step %d: the messages the prepare_step hook gave, with the system prompt and tools, are %d bytes of JSON, over the history limit of %d", e.Step, e.Bytes, e.Limit)
	}
	return fmt.Sprintf("step %d: the turn's history is %d bytes of JSON, over its limit of %d: the step's request is not sent", e.Step, e.Bytes, e.Limit)
}

// Is reports whether target is ErrHistoryTooLarge.
func (e *HistoryError) Is(target error) bool { return target == ErrHistoryTooLarge }

func (e *HistoryError) Unwrap() error { return e.Err }

// invalid is the ErrInvalidConfig of field: a *FieldError naming it.
func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %w", ErrInvalidConfig, &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
}
