package utcp

import (
	"context"
	"encoding/json"

	"github.com/exprd/exprd/utcp/manual"
)

// Transport calls the tools of one call template type. The registry builds
// one from a tool's template (with variables resolved) through the
// TransportFactory registered for its call_template_type, and calls it with
// arguments already checked against the tool's input schema, under a context
// that carries the deadline in force. A Transport must be safe for concurrent
// use.
type Transport interface {
	// Call runs the tool and returns its result as decoded JSON (or text).
	Call(ctx context.Context, t *manual.Tool, args map[string]any) (any, error)
	// Stream runs the tool and returns its result chunk by chunk, each as it
	// arrives. A transport without streams returns one chunk, the result of
	// Call.
	Stream(ctx context.Context, t *manual.Tool, args map[string]any) (Stream, error)
}

// Stream yields a streaming tool's chunks. Next returns io.EOF only when the
// provider ended the stream cleanly; a stream that breaks is an error, never
// an end. Close releases the stream early (and is safe after io.EOF). A
// Stream is used by one goroutine at a time.
type Stream interface {
	Next() (chunk any, err error)
	Close() error
}

// Discoverer is implemented by transports that can fetch a manual, so that
// a call template of their type can be registered (`http` fetches its URL,
// `text` returns its content, `grpc` calls GetManual). The document is a
// UTCP manual, or a document the registry's Converter reads (OpenAPI), in
// JSON or YAML.
type Discoverer interface {
	Discover(ctx context.Context) (*Document, error)
}

// Document is what discovery found.
type Document struct {
	Body        []byte
	ContentType string // the media type when known ("application/json", "application/yaml")
	Location    string // where it came from (a URL or path), for OpenAPI relative server URLs

	// What the tools a Converter makes of the document send: the
	// discovery template's headers, and its auth_tools, used as the auth
	// of every operation that needs auth of the same kind. Set by `http`.
	Headers   map[string]string
	AuthTools *manual.Auth
}

// TransportFactory builds a Transport from a call template (JSON, variables
// resolved, call_template_type set). It is called once at registration for
// each tool to check the template's shape (a refused field is a
// *manual.FieldError whose Path is the field's, e.g. "url"), and again on a
// call whenever the resolved template differs from the last one built.
// Building must be cheap and must not do I/O; long-lived resources such as
// connections belong in Env.Shared, so that every Transport built for the
// same target reuses them.
type TransportFactory func(template json.RawMessage, env Env) (Transport, error)

// Call template types. Only `text` is built in; the transports of the
// others are packages of their own (httptransport, grpctransport), given
// to New with WithTransport.
const (
	TypeHTTP           = "http"
	TypeStreamableHTTP = "streamable_http"
	TypeSSE            = "sse"
	TypeText           = "text"
)

// defaultFactories are the transports every Registry has: `text`, which
// FromText needs. The others are given to New (WithTransport; utcpall.New
// gives them all).
func defaultFactories() map[string]TransportFactory {
	return map[string]TransportFactory{TypeText: newTextTransport}
}
