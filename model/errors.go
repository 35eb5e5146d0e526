package model

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Sentinel errors. Errors returned by this package and its providers wrap one
// of them (test with [errors.Is]) or are an [*HTTPError], or wrap the
// context's error when the caller's deadline or cancellation ended the turn.
var (
	// ErrInvalidRequest: the [Request] cannot be sent (no messages, a tool
	// result without a call id, a duplicate tool, a named tool choice that
	// names no tool, a parameter out of range).
	ErrInvalidRequest = errors.New("invalid model request")
	// ErrUnknownProvider: [Registry.Get] was asked for a name it does not hold.
	ErrUnknownProvider = errors.New("unknown model provider")
	// ErrUnreachable: no answer came: the connection could not be made, or
	// broke before a status arrived (after any retries).
	ErrUnreachable = errors.New("model server unreachable")
	// ErrStreamCut: the reply ended before it was complete: the connection
	// dropped, or the body ended with neither a finish reason nor the
	// end-of-stream marker. What arrived before is not a reply.
	ErrStreamCut = errors.New("model stream cut before the reply was complete")
	// ErrMalformedChunk: a chunk of the reply was not JSON of the expected form.
	ErrMalformedChunk = errors.New("malformed model reply chunk")
	// ErrReplyTooLarge: the reply, or one line of it, is larger than the
	// provider accepts.
	ErrReplyTooLarge = errors.New("model reply too large")
	// ErrNoChoices: the reply held no choice at all.
	ErrNoChoices = errors.New("model reply has no choices")
	// ErrModelReported: the server sent an error in place of a chunk, after the
	// stream had started.
	ErrModelReported = errors.New("model server reported an error")
	// ErrStreamClosed: Recv was called after Close, before the reply was
	// received.
	ErrStreamClosed = errors.New("model stream closed")
	// ErrInvalidArguments is never returned by a stream: it is what a
	// [ToolCall.ArgumentsErr] wraps when the model's arguments are not one
	// JSON object.
	ErrInvalidArguments = errors.New("tool call arguments are not a JSON object")
)

// HTTPError is a reply the server refused with an HTTP status, after any
// retries. The upstream text is kept for logs; only server/ decides what a
// client may see.
type HTTPError struct {
	StatusCode int
	// Type and Code are the OpenAI error object's fields, when the body had one.
	Type, Code string
	// Message is the upstream error message, when the body had one.
	Message string
	// RetryAfter is the server's Retry-After (or Retry-After-Ms), zero when
	// absent.
	RetryAfter time.Duration
	// Attempts counts the requests made, the first one included.
	Attempts int
}

func (e *HTTPError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "model server answered %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " (after %d attempts)", e.Attempts)
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %s)", e.RetryAfter)
	}
	return b.String()
}

// Temporary reports whether the same request may succeed later: 408, 409,
// 429 and 5xx.
func (e *HTTPError) Temporary() bool {
	switch {
	case e.StatusCode == http.StatusRequestTimeout, e.StatusCode == http.StatusConflict,
		e.StatusCode == http.StatusTooManyRequests, e.StatusCode >= 500:
		return true
	}
	return false
}

// UnknownProviderError names the provider asked for and the ones there are.
type UnknownProviderError struct {
	Name  string
	Known []string
}

func (e *UnknownProviderError) Error() string {
	if len(e.Known) == 0 {
		return fmt.Sprintf("unknown model provider %q: no providers are configured", e.Name)
	}
	return fmt.Sprintf("unknown model provider %q (configured: %s)", e.Name, strings.Join(e.Known, ", "))
}

func (e *UnknownProviderError) Unwrap() error { return ErrUnknownProvider }

// ArgumentsError says why a tool call's arguments are unusable. The call
// keeps its raw arguments so the caller can answer it with an is_error tool
// result that quotes them.
type ArgumentsError struct {
	Reason string
}

func (e *ArgumentsError) Error() string { return "tool call arguments " + e.Reason }

func (e *ArgumentsError) Unwrap() error { return ErrInvalidArguments }

// Describe says what went wrong with a model request in exprd's own words,
// fit for a client or a model to read: the status a server answered, or
// which way its reply was unusable. It never repeats the server's error
// text, an address or a URL (those are in err, for logs). Every service
// that shows a model's failure shows this.
func Describe(err error) string {
	var he *HTTPError
	switch {
	case errors.As(err, &he):
		s := fmt.Sprintf("the model server answered %d %s", he.StatusCode, http.StatusText(he.StatusCode))
		return strings.TrimSpace(s)
	case errors.Is(err, context.DeadlineExceeded):
		return "the model did not answer in time"
	case errors.Is(err, context.Canceled):
		return "the model request was cancelled"
	case errors.Is(err, ErrUnreachable):
		return "the model server could not be reached"
	case errors.Is(err, ErrStreamCut):
		return "the model's reply was cut off before it was complete"
	case errors.Is(err, ErrMalformedChunk):
		return "the model's reply was malformed"
	case errors.Is(err, ErrReplyTooLarge):
		return "the model's reply was too large"
	case errors.Is(err, ErrNoChoices):
		return "the model's reply held no choices"
	case errors.Is(err, ErrModelReported):
		return "the model server reported an error"
	case errors.Is(err, ErrInvalidRequest):
		return "the model request could not be sent"
	}
	return "the model request failed"
}
