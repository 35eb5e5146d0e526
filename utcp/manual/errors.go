package manual

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinels for errors.Is, one for each kind of error of this package.
var (
	// ErrInvalid: a manual (or OpenAPI document, or call template) was
	// refused at registration.
	ErrInvalid = errors.New("utcp: invalid manual")
	// ErrInvalidArguments: the arguments fail the tool's input schema, or a
	// URL path parameter is missing. The model should fix the call.
	ErrInvalidArguments = errors.New("utcp: invalid arguments")
)

// Error is a manual refused at registration. Path is the JSON path of
// what is wrong (`tools[3].tool_call_template.url`), empty for the document
// as a whole.
type Error struct {
	Manual string
	Path   string
	Msg    string
}

func (e *Error) Error() string {
	var b strings.Builder
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

// Is reports whether target is ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// FieldError is what a transport factory returns for a call template field it
// refuses; the registry prefixes Path with where the template sits in the
// manual (`tools[3].tool_call_template.` + Path).
type FieldError struct {
	Path string
	Msg  string
}

// Under is the error for the same field seen from path, the object the
// field's object sits in: a refused auth.token_url, say, from an auth
// object's own token_url.
func (e *FieldError) Under(path string) *FieldError {
	return &FieldError{Path: concatPath(path, e.Path), Msg: e.Msg}
}

func (e *FieldError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// ErrorAt is err as an *Error at path: a *FieldError's or an *Error's
// own path is put under path; any other error is the message of an
// *Error at path.
func ErrorAt(err error, path string) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		return &Error{Path: concatPath(path, fe.Path), Msg: fe.Msg}
	}
	var me *Error
	if errors.As(err, &me) {
		return &Error{Manual: me.Manual, Path: concatPath(path, me.Path), Msg: me.Msg}
	}
	return &Error{Path: path, Msg: err.Error()}
}

// concatPath joins two already-formed paths.
func concatPath(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	case strings.HasPrefix(b, "["):
		return a + b
	default:
		return a + "." + b
	}
}

// InvalidArgumentsError is returned when a call's arguments are refused
// before any request is sent. Problems are short, one per failing keyword,
// each naming the JSON pointer of the offending value.
type InvalidArgumentsError struct {
	Tool     string
	Problems []string
}

func (e *InvalidArgumentsError) Error() string {
	return fmt.Sprintf("tool %q: invalid arguments: %s", e.Tool, strings.Join(e.Problems, "; "))
}

// Is reports whether target is ErrInvalidArguments.
func (e *InvalidArgumentsError) Is(target error) bool { return target == ErrInvalidArguments }
