package utcp

import (
	"context"
	"encoding/json"

	"github.com/exprd/exprd/utcp/manual"
)

// textTransport is the `text` call template: a manual given inline in
// `content`. It registers; its tools cannot be called.
type textTransport struct {
	content string
}

var (
	_ Transport  = (*textTransport)(nil)
	_ Discoverer = (*textTransport)(nil)
)

func newTextTransport(raw json.RawMessage, _ Env) (Transport, error) {
	var f struct {
		Content *string `json:"content"`
	}
	if err := manual.DecodeFields(raw, &f); err != nil {
		return nil, err
	}
	if f.Content == nil {
		return nil, &manual.FieldError{Path: "content", Msg: "missing"}
	}
	return &textTransport{content: *f.Content}, nil
}

func (x *textTransport) Discover(context.Context) (*Document, error) {
	return &Document{Body: []byte(x.content)}, nil
}

func (x *textTransport) Call(_ context.Context, t *manual.Tool, _ map[string]any) (any, error) {
	return nil, &TransportError{Tool: t.Name, Reason: ReasonNotCallable}
}

func (x *textTransport) Stream(_ context.Context, t *manual.Tool, _ map[string]any) (Stream, error) {
	return nil, &TransportError{Tool: t.Name, Reason: ReasonNotCallable}
}
