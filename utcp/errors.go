package utcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinels for errors.Is. Every error the package returns for a tool call or
// a registration matches exactly one of them (or is the caller's own
// context error when the caller cancelled).
var (
	// ErrNotFound: no tool or manual of that name.
	ErrNotFound = errors.New("utcp: not found")
	// ErrInvalidArguments: the arguments fail the tool's input schema, or a
	// URL path parameter is missing. The model should fix the call.
	ErrInvalidArguments = errors.New("utcp: invalid arguments")
	// ErrTransport: the provider could not be reached, answered with a
	// status >= 400, sent a response that could not be used, or broke a
	// stream.
	ErrTransport = errors.New("utcp: transport failure")
	// ErrTimeout: the deadline in force (the caller's or the template's
	// timeout) passed before the provider answered.
	ErrTimeout = errors.New("utcp: timeout")
	// ErrInvalidManual: a manual (or OpenAPI document, or call template)
	// was refused at registration.
	ErrInvalidManual = errors.New("utcp: invalid manual")
	// ErrVariableNotFound: a ${VAR} of a call template has no value.
	ErrVariableNotFound = errors.New("utcp: variable not found")
)

// MaxErrorBodyChars bounds the provider body an error carries: a status
// error says what the provider answered, not all of it.
const MaxErrorBodyChars = 1024

// NotFoundError is returned for an unknown tool or manual. Similar lists
// registered names close to the one asked for (at most MaxSimilarNames).
type NotFoundError struct {
	Kind    string // "tool" or "manual"
	Name    string
	Similar []string
}

// MaxSimilarNames bounds NotFoundError.Similar.
const MaxSimilarNames = 3

func (e *NotFoundError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "utcp: %s %q not found", e.Kind, e.Name)
	if len(e.Similar) > 0 {
		b.WriteString("; did you mean ")
		for i, s := range e.Similar {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%q", s)
		}
		b.WriteString("?")
	}
	return b.String()
}

// Is reports whether target is ErrNotFound.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// InvalidArgumentsError is returned when a call's arguments are refused
// before any request is sent. Problems are short, one per failing keyword,
// each naming the JSON pointer of the offending value.
type InvalidArgumentsError struct {
	Tool     string
	Problems []string
}

func (e *InvalidArgumentsError) Error() string {
	return fmt.Sprintf("utcp: tool %q: invalid arguments: %s", e.Tool, strings.Join(e.Problems, "; "))
}

// Is reports whether target is ErrInvalidArguments.
func (e *InvalidArgumentsError) Is(target error) bool { return target == ErrInvalidArguments }

// Reason says which transport failure happened. It is meant for callers
// that branch on it and for logs; the text of Error is built from it.
type Reason string

// The transport failure reasons.
const (
	ReasonUnreachable     Reason = "unreachable"        // no connection, or the request could not be written
	ReasonStatus          Reason = "status"             // the provider answered with a status >= 400
	ReasonMalformed       Reason = "malformed-response" // a JSON response that does not decode
	ReasonTooLarge        Reason = "response-too-large" // a body or stream line over the cap
	ReasonRedirect        Reason = "redirect-refused"   // a redirect to another host
	ReasonBroken          Reason = "broken"             // the connection broke before the response or stream ended
	ReasonInsecureURL     Reason = "insecure-url"       // plain http:// to a host that is not allowed
	ReasonNotCallable     Reason = "not-callable"       // the tool's template cannot be called (text)
	ReasonAuth            Reason = "auth"               // the OAuth2 token could not be had
	ReasonUnsupportedType Reason = "unsupported"        // no transport for the template type
)

// TransportError is a failure between exprd and the provider. It carries the
// provider's status and a bounded summary of its body, never the raw text of
// a lower-level error (which may name hosts): that stays reachable through
// Unwrap, for logs.
type TransportError struct {
	Tool   string
	Reason Reason
	Status int // HTTP status when the provider answered, else 0
	Body   any // the provider's body (decoded JSON or text), bounded by MaxErrorBodyChars
	cause  error
}

func (e *TransportError) Error() string {
	var what string
	switch e.Reason {
	case ReasonStatus:
		what = fmt.Sprintf("provider answered %d", e.Status)
	case ReasonUnreachable:
		what = "provider unreachable"
	case ReasonMalformed:
		what = "provider sent a malformed response"
	case ReasonTooLarge:
		what = "provider response over the size limit"
	case ReasonRedirect:
		what = "provider redirected to another host; not followed"
	case ReasonBroken:
		what = "connection to the provider broke before the response ended"
	case ReasonInsecureURL:
		what = "plain http:// is allowed only to loopback hosts"
	case ReasonNotCallable:
		what = "this tool only describes a manual and cannot be called"
	case ReasonAuth:
		what = "could not obtain an OAuth2 token"
		if e.Status != 0 {
			what += fmt.Sprintf(" (the token endpoint answered %d)", e.Status)
		}
	case ReasonUnsupportedType:
		what = "no transport for this call template type"
	case ReasonFailed:
		what = "provider call failed"
	default:
		what = string(e.Reason)
	}
	if e.Body != nil {
		what += ": " + summarize(e.Body)
	}
	if e.Tool == "" {
		return "utcp: " + what
	}
	return fmt.Sprintf("utcp: tool %q: %s", e.Tool, what)
}

// Is reports whether target is ErrTransport.
func (e *TransportError) Is(target error) bool { return target == ErrTransport }

// Unwrap returns the lower-level cause, for logs. Its text may name hosts and
// must not be shown to a client.
func (e *TransportError) Unwrap() error { return e.cause }

// TimeoutError is returned when the deadline in force passed first. Timeout
// is the template's timeout when that was the one that fired, else 0 (the
// caller's deadline was the smaller).
type TimeoutError struct {
	Tool    string
	Timeout time.Duration
}

func (e *TimeoutError) Error() string {
	if e.Timeout > 0 {
		return fmt.Sprintf("utcp: tool %q: no answer within %s", e.Tool, e.Timeout)
	}
	return fmt.Sprintf("utcp: tool %q: no answer before the deadline", e.Tool)
}

// Is reports whether target is ErrTimeout or context.DeadlineExceeded.
func (e *TimeoutError) Is(target error) bool {
	return target == ErrTimeout || target == context.DeadlineExceeded
}

// ManualError is a manual refused at registration. Path is the JSON path of
// what is wrong (`tools[3].tool_call_template.url`), empty for the document
// as a whole.
type ManualError struct {
	Manual string
	Path   string
	Msg    string
}

func (e *ManualError) Error() string {
	var b strings.Builder
	b.WriteString("utcp: ")
	if e.Manual != "" {
		fmt.Fprintf(&b, "manual %q: ", e.Manual)
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Is reports whether target is ErrInvalidManual.
func (e *ManualError) Is(target error) bool { return target == ErrInvalidManual }

// VariableNotFoundError names the namespaced key of a variable that has no
// value in any source.
type VariableNotFoundError struct {
	Key string
}

func (e *VariableNotFoundError) Error() string {
	return fmt.Sprintf("utcp: variable %q not found (looked in the configured variables, the .env files and the environment)", e.Key)
}

// Is reports whether target is ErrVariableNotFound.
func (e *VariableNotFoundError) Is(target error) bool { return target == ErrVariableNotFound }

// FieldError is what a transport factory returns for a call template field it
// refuses; the registry prefixes Path with where the template sits in the
// manual (`tools[3].tool_call_template.` + Path).
type FieldError struct {
	Path string
	Msg  string
}

func (e *FieldError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// summarize renders a body for an error message, bounded.
func summarize(body any) string {
	var s string
	switch b := body.(type) {
	case string:
		s = b
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			s = fmt.Sprint(b)
		} else {
			s = string(raw)
		}
	}
	return truncate(s, MaxErrorBodyChars)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// boundBody keeps a parsed body when its JSON is short enough, else its
// truncated text.
func boundBody(raw []byte, parsed any) any {
	if parsed != nil && len(raw) <= MaxErrorBodyChars {
		return parsed
	}
	if len(raw) == 0 {
		return nil
	}
	return truncate(string(raw), MaxErrorBodyChars)
}
