// Package userinput is a provider's request for user input while one of
// its tools is called (an MCP server's elicitation), and the user's
// reply: both bounded and checked (the request's schema compiled as a
// tool's is, the reply's content against it). A stream with a user to ask
// puts an Asker in its calls' context (WithAsker); a transport whose
// provider asks finds it there (AskerOf).
package userinput

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/exprd/exprd/utcp/manual"
)

// Bounds on a provider's request for user input (an MCP server's
// elicitation) and on the user's reply. Each is a named default; tests
// hold each at the limit and one past it.
const (
	// MaxRequestBytes bounds a request's message and requested
	// schema, as JSON, together: a larger request is not relayed, and
	// the call fails saying so.
	MaxRequestBytes = 64 << 10
	// MaxReplyBytes bounds the content of a reply, as JSON: a larger
	// one is refused to the user (the request goes on waiting).
	MaxReplyBytes = 64 << 10
	// DefaultTimeout bounds how long a request waits for the user's
	// reply, within the call's own deadline; past it the call fails.
	DefaultTimeout = 2 * time.Minute
)

// Action is the user's answer to a request for input.
type Action string

const (
	// Accept: the user gave the content asked for.
	Accept Action = "accept"
	// Decline: the user refused.
	Decline Action = "decline"
	// Cancel: the user dismissed the request without choosing.
	Cancel Action = "cancel"
)

// Request is a provider's request for user input while a call runs:
// an MCP server's elicitation/create (form mode), or an input request of
// its input-required result.
type Request struct {
	// Tool is the full name of the tool whose call asks.
	Tool string
	// Message is what the provider asks the user, its words.
	Message string
	// Schema is the JSON Schema the content must satisfy (an object of
	// primitive properties, as MCP allows), as JSON; nil: any object.
	Schema json.RawMessage

	compiled *jsonschema.Schema
}

// Reply is the user's answer. Content is set only with Accept.
type Reply struct {
	Action  Action
	Content map[string]any
}

// Asker asks the user of the stream a call is made from: a stream
// that has a user to ask (CodeMode.Run, AgentLoop.Run) and opted in puts
// one in the calls' context (WithAsker); a transport whose provider
// asks for input finds it there (AskerOf). Without one, the request
// fails the call.
//
// AskInput sends the request to the user and waits for the reply, the
// end of ctx, or the user's going away (an error). It checks each reply
// with req.CheckReply before it returns it.
type Asker interface {
	AskInput(ctx context.Context, req *Request) (Reply, error)
}

type askerKey struct{}

// WithAsker is ctx whose calls may ask a's user for input.
func WithAsker(ctx context.Context, a Asker) context.Context {
	return context.WithValue(ctx, askerKey{}, a)
}

// AskerOf is the asker the calls of ctx may ask; nil when they have
// no user to ask.
func AskerOf(ctx context.Context) Asker {
	a, _ := ctx.Value(askerKey{}).(Asker)
	return a
}

// ErrRequest is a provider's request for input that cannot be relayed:
// over MaxRequestBytes, or with a schema that does not compile.
var ErrRequest = errors.New("the request for user input cannot be relayed")

// NewRequest checks a provider's request for input: its message and
// schema within MaxRequestBytes, the schema (JSON; empty: any
// object) compiled under the bounds of every tool schema.
func NewRequest(tool, message string, schema json.RawMessage) (*Request, error) {
	if n := len(message) + len(schema); n > MaxRequestBytes {
		return nil, fmt.Errorf("%w: it is %d bytes, over the limit of %d (userinput.MaxRequestBytes)", ErrRequest, n, MaxRequestBytes)
	}
	req := &Request{Tool: tool, Message: message, Schema: schema}
	if len(schema) == 0 || string(schema) == "null" {
		req.Schema = nil
		return req, nil
	}
	doc, err := manual.DecodeJSON(schema)
	if err != nil {
		return nil, fmt.Errorf("%w: its schema is not JSON: %v", ErrRequest, err)
	}
	if _, ok := doc.(map[string]any); !ok {
		return nil, fmt.Errorf("%w: its schema must be an object, got %s", ErrRequest, manual.JSONKind(doc))
	}
	if req.compiled, err = manual.CompileSchema(doc); err != nil {
		return nil, fmt.Errorf("%w: its schema: %v", ErrRequest, err)
	}
	return req, nil
}

// CheckReply reads a reply's content (JSON text; empty: none) for action:
// with accept, a JSON object within MaxReplyBytes that satisfies the
// request's schema; with decline or cancel, none. Its error says what is
// wrong, for the user (it wraps ErrInvalidReply, or ErrReplyTooLarge).
func (r *Request) CheckReply(action Action, content []byte) (Reply, error) {
	if len(content) > MaxReplyBytes {
		return Reply{}, fmt.Errorf("%w: the content is %d bytes, over the limit of %d (userinput.MaxReplyBytes)", ErrReplyTooLarge, len(content), MaxReplyBytes)
	}
	switch action {
	case Decline, Cancel:
		if len(content) > 0 {
			return Reply{}, fmt.Errorf("%w: content comes only with accept", ErrInvalidReply)
		}
		return Reply{Action: action}, nil
	case Accept:
	default:
		return Reply{}, fmt.Errorf("%w: the action must be accept, decline or cancel", ErrInvalidReply)
	}
	if len(content) == 0 {
		content = []byte("{}")
	}
	var obj map[string]any
	if err := json.Unmarshal(content, &obj); err != nil || obj == nil {
		return Reply{}, fmt.Errorf("%w: the content must be a JSON object", ErrInvalidReply)
	}
	if r.compiled != nil {
		doc, err := manual.DecodeJSON(content)
		if err == nil {
			err = r.compiled.Validate(doc)
		}
		if err != nil {
			return Reply{}, fmt.Errorf("%w: the content does not match the requested schema: %s", ErrInvalidReply, strings.Join(manual.SchemaProblems(err), "; "))
		}
	}
	return Reply{Action: Accept, Content: obj}, nil
}

// ErrInvalidReply and ErrReplyTooLarge refuse a user's reply to a request
// for input; the request goes on waiting for a usable one.
var (
	ErrInvalidReply  = errors.New("the reply cannot be used")
	ErrReplyTooLarge = errors.New("the reply is too large")
)
