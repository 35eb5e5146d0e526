package utcp

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
	// MaxInputRequestBytes bounds a request's message and requested
	// schema, as JSON, together: a larger request is not relayed, and
	// the call fails saying so.
	MaxInputRequestBytes = 64 << 10
	// MaxInputReplyBytes bounds the content of a reply, as JSON: a larger
	// one is refused to the user (the request goes on waiting).
	MaxInputReplyBytes = 64 << 10
	// DefaultInputTimeout bounds how long a request waits for the user's
	// reply, within the call's own deadline; past it the call fails.
	DefaultInputTimeout = 2 * time.Minute
)

// InputAction is the user's answer to a request for input.
type InputAction string

const (
	// InputAccept: the user gave the content asked for.
	InputAccept InputAction = "accept"
	// InputDecline: the user refused.
	InputDecline InputAction = "decline"
	// InputCancel: the user dismissed the request without choosing.
	InputCancel InputAction = "cancel"
)

// InputRequest is a provider's request for user input while a call runs:
// an MCP server's elicitation/create (form mode), or an input request of
// its input-required result.
type InputRequest struct {
	// Tool is the full name of the tool whose call asks.
	Tool string
	// Message is what the provider asks the user, its words.
	Message string
	// Schema is the JSON Schema the content must satisfy (an object of
	// primitive properties, as MCP allows), as JSON; nil: any object.
	Schema json.RawMessage

	compiled *jsonschema.Schema
}

// InputReply is the user's answer. Content is set only with InputAccept.
type InputReply struct {
	Action  InputAction
	Content map[string]any
}

// InputAsker asks the user of the stream a call is made from: a stream
// that has a user to ask (CodeMode.Run, AgentLoop.Run) and opted in puts
// one in the calls' context (WithInputAsker); a transport whose provider
// asks for input finds it there (InputAskerOf). Without one, the request
// fails the call.
//
// AskInput sends the request to the user and waits for the reply, the
// end of ctx, or the user's going away (an error). It checks each reply
// with req.CheckReply before it returns it.
type InputAsker interface {
	AskInput(ctx context.Context, req *InputRequest) (InputReply, error)
}

type inputAskerKey struct{}

// WithInputAsker is ctx whose calls may ask a's user for input.
func WithInputAsker(ctx context.Context, a InputAsker) context.Context {
	return context.WithValue(ctx, inputAskerKey{}, a)
}

// InputAskerOf is the asker the calls of ctx may ask; nil when they have
// no user to ask.
func InputAskerOf(ctx context.Context) InputAsker {
	a, _ := ctx.Value(inputAskerKey{}).(InputAsker)
	return a
}

// ErrInputRequest is a provider's request for input that cannot be relayed:
// over MaxInputRequestBytes, or with a schema that does not compile.
var ErrInputRequest = errors.New("the request for user input cannot be relayed")

// NewInputRequest checks a provider's request for input: its message and
// schema within MaxInputRequestBytes, the schema (JSON; empty: any
// object) compiled under the bounds of every tool schema.
func NewInputRequest(tool, message string, schema json.RawMessage) (*InputRequest, error) {
	if n := len(message) + len(schema); n > MaxInputRequestBytes {
		return nil, fmt.Errorf("%w: it is %d bytes, over the limit of %d (utcp.MaxInputRequestBytes)", ErrInputRequest, n, MaxInputRequestBytes)
	}
	req := &InputRequest{Tool: tool, Message: message, Schema: schema}
	if len(schema) == 0 || string(schema) == "null" {
		req.Schema = nil
		return req, nil
	}
	doc, err := manual.DecodeJSON(schema)
	if err != nil {
		return nil, fmt.Errorf("%w: its schema is not JSON: %v", ErrInputRequest, err)
	}
	if _, ok := doc.(map[string]any); !ok {
		return nil, fmt.Errorf("%w: its schema must be an object, got %s", ErrInputRequest, manual.JSONKind(doc))
	}
	if req.compiled, err = manual.CompileSchema(doc); err != nil {
		return nil, fmt.Errorf("%w: its schema: %v", ErrInputRequest, err)
	}
	return req, nil
}

// CheckReply reads a reply's content (JSON text; empty: none) for action:
// with accept, a JSON object within MaxInputReplyBytes that satisfies the
// request's schema; with decline or cancel, none. Its error says what is
// wrong, for the user (it wraps ErrInvalidReply, or ErrReplyTooLarge).
func (r *InputRequest) CheckReply(action InputAction, content []byte) (InputReply, error) {
	if len(content) > MaxInputReplyBytes {
		return InputReply{}, fmt.Errorf("%w: the content is %d bytes, over the limit of %d (utcp.MaxInputReplyBytes)", ErrReplyTooLarge, len(content), MaxInputReplyBytes)
	}
	switch action {
	case InputDecline, InputCancel:
		if len(content) > 0 {
			return InputReply{}, fmt.Errorf("%w: content comes only with accept", ErrInvalidReply)
		}
		return InputReply{Action: action}, nil
	case InputAccept:
	default:
		return InputReply{}, fmt.Errorf("%w: the action must be accept, decline or cancel", ErrInvalidReply)
	}
	if len(content) == 0 {
		content = []byte("{}")
	}
	var obj map[string]any
	if err := json.Unmarshal(content, &obj); err != nil || obj == nil {
		return InputReply{}, fmt.Errorf("%w: the content must be a JSON object", ErrInvalidReply)
	}
	if r.compiled != nil {
		doc, err := manual.DecodeJSON(content)
		if err == nil {
			err = r.compiled.Validate(doc)
		}
		if err != nil {
			return InputReply{}, fmt.Errorf("%w: the content does not match the requested schema: %s", ErrInvalidReply, strings.Join(manual.SchemaProblems(err), "; "))
		}
	}
	return InputReply{Action: InputAccept, Content: obj}, nil
}

// ErrInvalidReply and ErrReplyTooLarge refuse a user's reply to a request
// for input; the request goes on waiting for a usable one.
var (
	ErrInvalidReply  = errors.New("the reply cannot be used")
	ErrReplyTooLarge = errors.New("the reply is too large")
)
