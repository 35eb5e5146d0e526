package utcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Sentinels for errors.Is. Every error the package returns for a tool call or
// a registration matches exactly one of them, or one of package manual's
// (manual.ErrInvalid, manual.ErrInvalidArguments), or vars.ErrNotFound, or
// is the caller's own context error when the caller cancelled.
var (
	// ErrNotFound: no tool or manual of that name.
	ErrNotFound = errors.New("utcp: not found")
	// ErrTransport: the provider could not be reached, answered with a
	// status >= 400, sent a response that could not be used, or broke a
	// stream.
	ErrTransport = errors.New("utcp: transport failure")
	// ErrTimeout: the deadline in force (the caller's or the template's
	// timeout) passed before the provider answered.
	ErrTimeout = errors.New("utcp: timeout")
	// ErrAlreadyExists: a manual of that name (or a tool of that full name)
	// is already registered.
	ErrAlreadyExists = errors.New("utcp: already exists")
	// ErrLimit: a registration would pass the registry's bound on manuals
	// or tools.
	ErrLimit = errors.New("utcp: registry limit")
)

// LimitError is a registration refused because the registry would hold
// more manuals or tools than its bound (WithMaxManuals, WithMaxTools).
type LimitError struct {
	What  string // "manuals" or "tools"
	Limit int
	Would int // what the registry would have held
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("the registry holds at most %d %s; this registration would make %d", e.Limit, e.What, e.Would)
}

// Is reports whether target is ErrLimit.
func (e *LimitError) Is(target error) bool { return target == ErrLimit }

// MaxErrorBodyChars bounds the provider body a status error keeps for logs
// (behind Unwrap); it is never shown (see TransportError).
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
	fmt.Fprintf(&b, "%s %q not found", e.Kind, e.Name)
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

// AlreadyExistsError is returned when Register meets a manual of the same
// (sanitised) name, or a tool whose full name another manual has.
type AlreadyExistsError struct {
	Kind   string // "manual" or "tool"
	Name   string // the manual's or the tool's full name
	Manual string // the manual being registered
}

func (e *AlreadyExistsError) Error() string {
	if e.Kind == "tool" {
		return fmt.Sprintf("manual %q: tool %q is already registered by another manual", e.Manual, e.Name)
	}
	return fmt.Sprintf("manual %q: already registered; deregister it first, or replace it", e.Name)
}

// Is reports whether target is ErrAlreadyExists.
func (e *AlreadyExistsError) Is(target error) bool { return target == ErrAlreadyExists }

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
	ReasonInsecureURL     Reason = "insecure-url"       // plain http:// to a host that is not listed, or not http(s)
	ReasonEgress          Reason = "egress-refused"     // an address the operator's egress policy refuses
	ReasonNotCallable     Reason = "not-callable"       // the tool's template cannot be called (text)
	ReasonAuth            Reason = "auth"               // the OAuth2 token could not be had
	ReasonUnsupportedType Reason = "unsupported"        // no transport for the template type
	ReasonMemory          Reason = "memory-budget"      // the server's memory budget could not hold the answer now
)

// TransportError is a failure between exprd and the provider. It carries the
// provider's status and what may be shown of its answer, never the raw text
// of the provider's body or of a lower-level error (either may name hosts,
// or hold a stack trace): those stay reachable through Unwrap, for logs.
type TransportError struct {
	Tool   string
	Reason Reason
	Status int // HTTP status when the provider answered, else 0
	// Body is what may be shown of the answer: for a status error, the
	// error type and code of the provider's JSON body that may be shown
	// ({"type": "…", "code": "…"}, see ProviderError), or nil when there
	// are none or the operator did not opt in; for other reasons, a text
	// of ours that says more.
	Body  any
	cause error
	// reason: Error follows the status with its standard reason phrase
	// (the operator opted in to providers' messages).
	reason bool
}

func (e *TransportError) Error() string {
	var what string
	switch e.Reason {
	case ReasonStatus:
		what = fmt.Sprintf("provider answered %d", e.Status)
		if t := http.StatusText(e.Status); e.reason && t != "" {
			what += " " + t
		}
	case ReasonUnreachable:
		what = "provider unreachable"
	case ReasonMalformed:
		what = "provider sent a malformed response"
	case ReasonTooLarge:
		what = "provider response over the size limit"
	case ReasonRedirect:
		what = "provider redirected; not followed (only a redirect to the same host, to an address exprd may reach, is)"
	case ReasonBroken:
		what = "connection to the provider broke before the response ended"
	case ReasonInsecureURL:
		what = "without TLS only the hosts the operator lists may be reached"
		if e.Body == nil {
			what += ": use an https:// URL"
		}
	case ReasonEgress:
		// Which address the name resolved to stays in the log: it would
		// tell a client what lies inside the operator's network.
		what = "the provider's address is not one exprd may reach (private, loopback, link-local and other non-public addresses are refused unless the operator lists them)"
	case ReasonNotCallable:
		what = "this tool only describes a manual and cannot be called"
	case ReasonAuth:
		what = "could not obtain an OAuth2 token"
		if e.Status != 0 {
			what += fmt.Sprintf(" (the token endpoint answered %d)", e.Status)
		}
	case ReasonUnsupportedType:
		what = "no transport for this call template type"
	case ReasonMemory:
		what = "the server's memory budget cannot hold the provider's answer now; retry later"
	case ReasonFailed:
		what = "provider call failed"
	default:
		what = string(e.Reason)
	}
	if e.Body != nil {
		what += ": " + summarize(e.Body)
	}
	if e.Tool == "" {
		return what
	}
	return fmt.Sprintf("tool %q: %s", e.Tool, what)
}

// WithCause keeps err behind Unwrap, for logs (transports of other
// packages set it here), and returns e.
func (e *TransportError) WithCause(err error) *TransportError {
	e.cause = err
	return e
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
		return fmt.Sprintf("tool %q: no answer within %s", e.Tool, e.Timeout)
	}
	return fmt.Sprintf("tool %q: no answer before the deadline", e.Tool)
}

// Is reports whether target is ErrTimeout or context.DeadlineExceeded.
func (e *TimeoutError) Is(target error) bool {
	return target == ErrTimeout || target == context.DeadlineExceeded
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
	return CutRunes(s, n) + "…"
}

// ProviderError is a provider's answer of a status >= 400 as a client may
// see it: the status and, only where the operator opted in
// (WithProviderMessages), its standard reason phrase and the error type
// and code of its JSON body (parsed) chosen by an allowlist
// (Env.ProviderFields): never its free text. The body itself, bounded to
// MaxErrorBodyChars and its bound values replaced (vars.Secrets.Conceal), is
// kept behind Unwrap for logs. Every transport makes its status errors
// here.
func (e Env) ProviderError(tool string, status int, body []byte, parsed any) *TransportError {
	te := &TransportError{Tool: tool, Reason: ReasonStatus, Status: status, reason: e.showMessages}
	if f := e.ProviderFields(parsed); f != nil {
		te.Body = f
	}
	if len(body) > 0 {
		te.cause = providerBody(truncate(e.secrets.Conceal(string(body)), MaxErrorBodyChars))
	}
	return te
}

// EgressError is the error of a transport whose connection the egress
// policy refused (err, kept for logs, says which address and why).
func EgressError(tool string, err error) *TransportError {
	return &TransportError{Tool: tool, Reason: ReasonEgress, cause: err}
}

// providerBody is a provider's raw error body, kept for logs only.
type providerBody string

func (b providerBody) Error() string { return "provider body: " + string(b) }
