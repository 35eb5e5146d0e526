package httptransport

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/manual"
)

// DefaultAccept is the Accept header of an http tool call whose template
// sets none: axios's default, which the reference client sends.
const DefaultAccept = "application/json, text/plain, */*"

// httpTransport is the `http` call template: one request per call.
type httpTransport struct {
	spec *httpSpec
	env  utcp.Env
}

var (
	_ utcp.Transport  = (*httpTransport)(nil)
	_ utcp.Discoverer = (*httpTransport)(nil)
)

func (c *config) newHTTP(raw json.RawMessage, env utcp.Env) (utcp.Transport, error) {
	spec, err := decodeHTTPSpec(raw, httpMethods, DefaultContentType)
	if err != nil {
		return nil, err
	}
	if err := c.prepare(spec, env); err != nil {
		return nil, err
	}
	return &httpTransport{spec: spec, env: env}, nil
}

// Call sends the request and returns the decoded response: JSON when the
// response says it is JSON (or says nothing and parses as JSON), else text;
// nil for an empty body. A status >= 400 is a *TransportError carrying the
// status and the (decoded) body.
func (h *httpTransport) Call(ctx context.Context, t *manual.Tool, args map[string]any) (any, error) {
	req, err := buildRequest(ctx, h.spec, h.spec.method, args, h.env, t.Name)
	if err != nil {
		return nil, err
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", DefaultAccept)
	}
	return doJSON(ctx, h.env, req, t.Name)
}

// Stream returns the result of Call as the only chunk: a plain HTTP response
// is not a stream (the SDK does the same).
func (h *httpTransport) Stream(ctx context.Context, t *manual.Tool, args map[string]any) (utcp.Stream, error) {
	v, err := h.Call(ctx, t, args)
	if err != nil {
		return nil, err
	}
	return &sliceStream{items: []any{v}}, nil
}

// Discover fetches the template's URL with its method, headers and auth.
func (h *httpTransport) Discover(ctx context.Context) (*utcp.Document, error) {
	req, err := buildRequest(ctx, h.spec, h.spec.method, nil, h.env, "")
	if err != nil {
		return nil, err
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/json, application/yaml;q=0.9, */*;q=0.5")
	}
	resp, err := h.env.HTTPClient.Do(req)
	if err != nil {
		return nil, utcp.DoError(ctx, err, "")
	}
	defer resp.Body.Close()
	body, err := utcp.ReadBody(ctx, resp.Body, -1, h.env.MaxResponseBytes, "")
	if err != nil {
		return nil, err
	}
	ct := resp.Header.Get("Content-Type")
	if resp.StatusCode >= 400 {
		parsed, _ := decodeResponse(body, ct)
		return nil, h.env.ProviderError("", resp.StatusCode, body, parsed)
	}
	mt := mediaType(ct)
	return &utcp.Document{Body: body, ContentType: mt, Location: req.URL.String(), Headers: h.spec.headers, AuthTools: h.spec.authTools}, nil
}

// doJSON sends req and decodes the answer.
func doJSON(ctx context.Context, env utcp.Env, req *http.Request, tool string) (any, error) {
	resp, err := env.HTTPClient.Do(req)
	if err != nil {
		return nil, utcp.DoError(ctx, err, tool)
	}
	defer resp.Body.Close()
	body, err := utcp.ReadBody(ctx, resp.Body, resp.ContentLength, env.ResponseLimit(ctx), tool)
	if err != nil {
		return nil, err
	}
	ct := resp.Header.Get("Content-Type")
	if resp.StatusCode >= 400 {
		parsed, _ := decodeResponse(body, ct)
		return nil, env.ProviderError(tool, resp.StatusCode, body, parsed)
	}
	v, err := decodeResponse(body, ct)
	if err != nil {
		return nil, (&utcp.TransportError{Tool: tool, Reason: utcp.ReasonMalformed}).WithCause(err)
	}
	return v, nil
}

// decodeResponse decodes a body by its content type. A JSON type must
// decode; no type at all is tried as JSON and else kept as text; any other
// type is text.
func decodeResponse(body []byte, contentType string) (any, error) {
	if len(body) == 0 {
		return nil, nil
	}
	mt := mediaType(contentType)
	switch {
	case isJSONMediaType(mt):
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			return string(body), err
		}
		return v, nil
	case strings.TrimSpace(contentType) == "":
		var v any
		if json.Unmarshal(body, &v) == nil {
			return v, nil
		}
	}
	return string(body), nil
}

// sliceStream yields fixed items.
type sliceStream struct {
	items []any
	i     int
}

func (s *sliceStream) Next() (any, error) {
	if s.i >= len(s.items) {
		return nil, io.EOF
	}
	s.i++
	return s.items[s.i-1], nil
}

func (s *sliceStream) Close() error { s.i = len(s.items); return nil }
