package mcptransport

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/exprd/exprd/utcp"
)

// outcome turns what a call got into the tool's result or a typed error:
// what the call's readers or notifications found wrong first (the answer
// over its limit, not UTF-8, a flood), then the caller's context, then the
// SDK's error, then the result itself.
func (t *transport) outcome(ctx context.Context, tool string, b *binding, st *callState, res *mcp.CallToolResult, err error) (any, error) {
	if f := st.failure(); f != nil {
		return nil, withTool(f, tool)
	}
	if err != nil {
		return nil, t.callError(ctx, tool, st, err)
	}
	if res.NeedsInput() || res.InputRequests != nil {
		return nil, inputRequired(tool, "input (an input-required result)")
	}
	if res.IsError {
		if what := st.askedFor(); what != "" {
			return nil, inputRequired(tool, what)
		}
		return nil, toolError(t.env, tool, texts(res.Content))
	}
	v, size := value(res)
	if b.srv.spec.transport == TransportStdio {
		// Over HTTP the answer was bounded and reserved as it was read;
		// a stdio line only by the registry's cap.
		if limit := t.env.ResponseLimit(ctx); size > limit {
			return nil, &utcp.TransportError{Tool: tool, Reason: utcp.ReasonTooLarge}
		}
		if err := utcp.ReserveAnswer(ctx, size, tool); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// callError is a call the SDK failed.
func (t *transport) callError(ctx context.Context, tool string, st *callState, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var te *utcp.TransportError
	if errors.As(err, &te) {
		return withTool(te, tool)
	}
	if inputRounds(err) {
		what := st.askedFor()
		if what == "" {
			what = "input exprd cannot give (an input-required result)"
		}
		return inputRequired(tool, what)
	}
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		if what := st.askedFor(); what != "" {
			return inputRequired(tool, what)
		}
		return rpcError(tool, we.Code, we.Message)
	}
	return (&utcp.TransportError{Tool: tool, Reason: utcp.ReasonBroken}).WithCause(err)
}

// value is a result as exprd returns it, and about how many bytes it
// holds: structuredContent when the result has it; else its one content
// item, or the list of them: text parsed as JSON when it is JSON, else the
// text; an image or audio {"type", "mime_type", "data" (base64)}; a
// resource link {"type": "resource_link", "uri", "name", ...}; an
// embedded resource {"type": "resource", "uri", "mime_type", "text" or
// "blob" (base64)}. No content is nil.
func value(res *mcp.CallToolResult) (any, int64) {
	if res.StructuredContent != nil {
		return normalize(res.StructuredContent), structuredSize(res.StructuredContent)
	}
	var size int64
	items := make([]any, 0, len(res.Content))
	for _, c := range res.Content {
		v, n := contentValue(c)
		items = append(items, v)
		size += n
	}
	switch len(items) {
	case 0:
		return nil, 0
	case 1:
		return items[0], size
	}
	return items, size
}

func contentValue(c mcp.Content) (any, int64) {
	switch c := c.(type) {
	case *mcp.TextContent:
		return textValue(c.Text), int64(len(c.Text))
	case *mcp.ImageContent:
		return media("image", c.MIMEType, c.Data), int64(len(c.Data))
	case *mcp.AudioContent:
		return media("audio", c.MIMEType, c.Data), int64(len(c.Data))
	case *mcp.ResourceLink:
		v := map[string]any{"type": "resource_link", "uri": c.URI, "name": c.Name}
		for k, s := range map[string]string{"title": c.Title, "description": c.Description, "mime_type": c.MIMEType} {
			if s != "" {
				v[k] = s
			}
		}
		if c.Size != nil {
			v["size"] = float64(*c.Size)
		}
		return v, int64(len(c.URI) + len(c.Description))
	case *mcp.EmbeddedResource:
		v := map[string]any{"type": "resource"}
		var n int64
		if r := c.Resource; r != nil {
			v["uri"] = r.URI
			if r.MIMEType != "" {
				v["mime_type"] = r.MIMEType
			}
			if r.Blob != nil {
				v["blob"] = base64.StdEncoding.EncodeToString(r.Blob)
				n = int64(len(r.Blob))
			} else {
				v["text"] = r.Text
				n = int64(len(r.Text))
			}
		}
		return v, n
	}
	return map[string]any{"type": "unknown"}, 0
}

func media(kind, mimeType string, data []byte) map[string]any {
	return map[string]any{"type": kind, "mime_type": mimeType, "data": base64.StdEncoding.EncodeToString(data)}
}

// textValue is text content parsed as JSON when it is JSON, else the text.
func textValue(s string) any {
	t := strings.TrimSpace(s)
	if t == "" || !json.Valid([]byte(t)) {
		return s
	}
	var v any
	if err := json.Unmarshal([]byte(t), &v); err != nil {
		return s
	}
	return v
}

// texts is the text of a result's text content, for an error.
func texts(cs []mcp.Content) string {
	var parts []string
	for _, c := range cs {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// normalize makes a decoded value one of JSON's Go forms (the SDK decodes
// structuredContent with encoding/json already; a server's own Go types
// are re-encoded).
func normalize(v any) any {
	switch v.(type) {
	case map[string]any, []any, string, float64, bool, nil:
		return v
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	var out any
	_ = json.Unmarshal(raw, &out)
	return out
}

// structuredSize is about how many bytes structured content holds.
func structuredSize(v any) int64 {
	switch x := v.(type) {
	case string:
		return int64(len(x))
	case map[string]any:
		var n int64
		for k, e := range x {
			n += int64(len(k)) + structuredSize(e) + 4
		}
		return n
	case []any:
		var n int64
		for _, e := range x {
			n += structuredSize(e) + 1
		}
		return n
	}
	return 8
}
