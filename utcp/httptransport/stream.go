package httptransport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"

	"github.com/exprd/exprd/internal/sse"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/manual"
)

// Streaming defaults.
const (
	// DefaultChunkSize is streamable_http's read size (the SDK's chunk_size).
	DefaultChunkSize = 4096
	// MaxChunkSize bounds chunk_size.
	MaxChunkSize = 1 << 20
	// DefaultStreamContentType is streamable_http's request content type.
	DefaultStreamContentType = "application/octet-stream"
)

var streamMethods = []string{http.MethodGet, http.MethodPost}

// streamableTransport is the `streamable_http` call template: a response
// read chunk by chunk as it arrives (chunked transfer encoding). NDJSON
// responses (application/x-ndjson, application/jsonl, application/json-seq)
// yield one decoded JSON value per line; application/json yields the whole
// body decoded; text/* yields strings and anything else []byte chunks.
type streamableTransport struct {
	spec *httpSpec
	env  utcp.Env
}

var _ utcp.Transport = (*streamableTransport)(nil)

func (c *config) newStreamable(raw json.RawMessage, env utcp.Env) (utcp.Transport, error) {
	spec, err := decodeHTTPSpec(raw, streamMethods, DefaultStreamContentType)
	if err != nil {
		return nil, err
	}
	if spec.chunkSize == 0 {
		spec.chunkSize = DefaultChunkSize
	}
	if err := c.prepare(spec, env); err != nil {
		return nil, err
	}
	return &streamableTransport{spec: spec, env: env}, nil
}

func (s *streamableTransport) Stream(ctx context.Context, t *manual.Tool, args map[string]any) (utcp.Stream, error) {
	req, err := buildRequest(ctx, s.spec, s.spec.method, args, s.env, t.Name)
	if err != nil {
		return nil, err
	}
	resp, err := openStream(ctx, s.env, req, t.Name)
	if err != nil {
		return nil, err
	}
	mt := mediaType(resp.Header.Get("Content-Type"))
	st := &bodyStream{ctx: ctx, body: resp.Body, tool: t.Name, limit: s.env.ResponseLimit(ctx)}
	switch {
	case mt == "application/x-ndjson" || mt == "application/ndjson" || mt == "application/jsonl" ||
		mt == "application/x-jsonlines" || mt == "application/jsonlines" || mt == "application/json-seq":
		st.mode = modeNDJSON
		st.br = bufio.NewReaderSize(resp.Body, s.spec.chunkSize)
	case isJSONMediaType(mt):
		st.mode = modeJSON
	case strings.HasPrefix(mt, "text/"):
		st.mode = modeText
		st.buf = make([]byte, s.spec.chunkSize)
	default:
		st.mode = modeBytes
		st.buf = make([]byte, s.spec.chunkSize)
	}
	return st, nil
}

// Call collects the stream: the list of its chunks, as the SDK returns.
func (s *streamableTransport) Call(ctx context.Context, t *manual.Tool, args map[string]any) (any, error) {
	st, err := s.Stream(ctx, t, args)
	if err != nil {
		return nil, err
	}
	return collect(st, s.env.ResponseLimit(ctx), t.Name)
}

// openStream sends req and checks the status; the caller owns the body.
func openStream(ctx context.Context, env utcp.Env, req *http.Request, tool string) (*http.Response, error) {
	resp, err := env.HTTPClient.Do(req)
	if err != nil {
		return nil, utcp.DoError(ctx, err, tool)
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		body, err := utcp.ReadBody(ctx, resp.Body, -1, min(env.ResponseLimit(ctx), 64<<10), tool)
		if err != nil {
			return nil, env.ProviderError(tool, resp.StatusCode, nil, nil)
		}
		parsed, _ := decodeResponse(body, resp.Header.Get("Content-Type"))
		return nil, env.ProviderError(tool, resp.StatusCode, body, parsed)
	}
	return resp, nil
}

type streamMode int

const (
	modeBytes streamMode = iota
	modeText
	modeJSON
	modeNDJSON
	modeSSE
)

// bodyStream reads a response body as chunks.
type bodyStream struct {
	ctx   context.Context
	body  io.ReadCloser
	tool  string
	limit int64
	mode  streamMode
	buf   []byte
	br    *bufio.Reader
	done  bool

	events    *sse.Reader // sse
	eventType string      // sse: only events of this type ("" = all)
}

func (s *bodyStream) Close() error {
	s.done = true
	return s.body.Close()
}

func (s *bodyStream) Next() (any, error) {
	if s.done {
		return nil, io.EOF
	}
	v, err := s.next()
	if err != nil {
		s.done = true
		s.body.Close()
		if err == io.EOF {
			return nil, io.EOF
		}
		return nil, s.wrapErr(err)
	}
	return v, nil
}

// wrapErr keeps io.EOF for a clean end; a read that fails otherwise is the
// caller's context ending or a broken stream.
func (s *bodyStream) wrapErr(err error) error {
	var te *utcp.TransportError
	if errors.As(err, &te) {
		return te
	}
	if ctxErr := s.ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	return (&utcp.TransportError{Tool: s.tool, Reason: utcp.ReasonBroken}).WithCause(err)
}

func (s *bodyStream) next() (any, error) {
	switch s.mode {
	case modeJSON:
		// A JSON document is one value: it is read whole, then the stream
		// ends.
		body, err := utcp.ReadBody(s.ctx, s.body, -1, s.limit, s.tool)
		if err != nil {
			return nil, err
		}
		s.done = true
		defer s.body.Close()
		if len(bytes.TrimSpace(body)) == 0 {
			return nil, io.EOF
		}
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			return nil, (&utcp.TransportError{Tool: s.tool, Reason: utcp.ReasonMalformed}).WithCause(err)
		}
		return v, nil
	case modeNDJSON:
		for {
			line, err := readLine(s.br, s.limit)
			if err != nil && (err != io.EOF || len(line) == 0) {
				if err == errLineTooLong {
					return nil, (&utcp.TransportError{Tool: s.tool, Reason: utcp.ReasonTooLarge}).WithCause(err)
				}
				return nil, err
			}
			line = bytes.TrimSpace(bytes.TrimPrefix(line, []byte{0x1e})) // json-seq record separator
			if len(line) == 0 {
				if err == io.EOF {
					return nil, io.EOF
				}
				continue
			}
			var v any
			if jerr := json.Unmarshal(line, &v); jerr != nil {
				return nil, (&utcp.TransportError{Tool: s.tool, Reason: utcp.ReasonMalformed}).WithCause(jerr)
			}
			return v, nil
		}
	case modeSSE:
		return s.nextEvent()
	default:
		n, err := s.body.Read(s.buf)
		if n > 0 {
			chunk := bytes.Clone(s.buf[:n])
			if s.mode == modeText {
				return string(chunk), nil
			}
			return chunk, nil
		}
		if err == nil {
			return s.next()
		}
		return nil, err
	}
}

var errLineTooLong = errors.New("line over the size limit")

// readLine reads up to and without a line ending, refusing lines over limit.
// io.EOF comes with the last line when it has no ending.
func readLine(br *bufio.Reader, limit int64) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		line = append(line, frag...)
		if int64(len(line)) > limit {
			return nil, errLineTooLong
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return line, err
		}
		return bytes.TrimRight(line, "\r\n"), nil
	}
}

// collect drains a stream into a list, bounding the total size.
func collect(st utcp.Stream, limit int64, tool string) (any, error) {
	defer st.Close()
	var out []any
	var size int64
	for {
		v, err := st.Next()
		if err == io.EOF {
			if out == nil {
				out = []any{}
			}
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		switch x := v.(type) {
		case []byte:
			size += int64(len(x))
		case string:
			size += int64(len(x))
		default:
			size += 64
		}
		if size > limit {
			return nil, (&utcp.TransportError{Tool: tool, Reason: utcp.ReasonTooLarge}).WithCause(fmt.Errorf("stream over %d bytes", limit))
		}
		out = append(out, v)
	}
}

// sseTransport is the `sse` call template: a GET (a POST when the call has a
// body) whose text/event-stream response yields one chunk per event, its
// data decoded as JSON when it is JSON and else kept as text. With
// event_type set, only events of that type are yielded. The stream ends when
// the provider closes it cleanly; `reconnect` and `retry_timeout` are read
// but a tool call is not reconnected (a reconnect could repeat a call's side
// effects).
type sseTransport struct {
	spec *httpSpec
	env  utcp.Env
}

var _ utcp.Transport = (*sseTransport)(nil)

func (c *config) newSSE(raw json.RawMessage, env utcp.Env) (utcp.Transport, error) {
	spec, err := decodeHTTPSpec(raw, nil, DefaultContentType)
	if err != nil {
		return nil, err
	}
	if err := c.prepare(spec, env); err != nil {
		return nil, err
	}
	return &sseTransport{spec: spec, env: env}, nil
}

func (s *sseTransport) Stream(ctx context.Context, t *manual.Tool, args map[string]any) (utcp.Stream, error) {
	method := http.MethodGet
	if s.spec.bodyField != "" {
		if v, ok := args[s.spec.bodyField]; ok && v != nil {
			method = http.MethodPost
		}
	}
	req, err := buildRequest(ctx, s.spec, method, args, s.env, t.Name)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	resp, err := openStream(ctx, s.env, req, t.Name)
	if err != nil {
		return nil, err
	}
	return &bodyStream{
		ctx: ctx, body: resp.Body, tool: t.Name, limit: s.env.ResponseLimit(ctx),
		mode: modeSSE, events: sse.NewReader(resp.Body, int(min(s.env.ResponseLimit(ctx), math.MaxInt))), eventType: s.spec.eventType,
	}, nil
}

// Call collects the events, as the SDK returns them.
func (s *sseTransport) Call(ctx context.Context, t *manual.Tool, args map[string]any) (any, error) {
	st, err := s.Stream(ctx, t, args)
	if err != nil {
		return nil, err
	}
	return collect(st, s.env.ResponseLimit(ctx), t.Name)
}

// nextEvent reads events (internal/sse: the HTML event-stream format)
// until one passes the filter. A line or an event's data over the limit
// is ReasonTooLarge. A body that ends inside an event (data with no blank
// line after it) is a cut stream, ReasonBroken, as the model side reads it:
// internal/sse's one rule, so that a lost last event is never silent.
func (s *bodyStream) nextEvent() (any, error) {
	for {
		ev, err := s.events.Next()
		switch {
		case errors.Is(err, sse.ErrUnterminated):
			return nil, (&utcp.TransportError{Tool: s.tool, Reason: utcp.ReasonBroken}).WithCause(err)
		case errors.Is(err, sse.ErrTooLarge):
			return nil, (&utcp.TransportError{Tool: s.tool, Reason: utcp.ReasonTooLarge}).WithCause(err)
		case err != nil:
			return nil, err
		}
		if s.eventType != "" && ev.Type != s.eventType {
			continue
		}
		var v any
		if json.Unmarshal(ev.Data, &v) == nil {
			return v, nil
		}
		return string(ev.Data), nil
	}
}
