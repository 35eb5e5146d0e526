package mcptransport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"unicode/utf8"

	"github.com/exprd/exprd/utcp"
)

// maxErrorBody bounds what exprd reads of an HTTP error answer (the SDK
// decodes a JSON-RPC error from it).
const maxErrorBody = 64 << 10

// newHTTPClient is the SDK's HTTP client for one server: the registry's
// client underneath (its egress dialer, its redirect rule, no proxy), the
// template's headers on every request, and what a server answers bounded:
// a JSON answer is read whole within the call's response limit and
// reserved from the memory budget as it is read (utcp.ReadBody), an event
// stream is counted and reserved as it is read, and either must be valid
// UTF-8.
func newHTTPClient(env utcp.Env, spec *serverSpec) *http.Client {
	base := env.HTTPClient
	return &http.Client{
		Transport:     &limitedTransport{base: base.Transport, env: env, spec: spec},
		CheckRedirect: base.CheckRedirect,
	}
}

type limitedTransport struct {
	base http.RoundTripper
	env  utcp.Env
	spec *serverSpec
}

func (t *limitedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if len(t.spec.headers) > 0 || len(t.spec.query) > 0 {
		// A RoundTripper leaves its request as it came: what it adds goes
		// on a copy, and only then.
		req = req.Clone(ctx)
	}
	for k, v := range t.spec.headers {
		if req.Header.Get(k) == "" {
			req.Header.Set(k, v)
		}
	}
	if len(t.spec.query) > 0 {
		q := req.URL.Query()
		for k, vs := range t.spec.query {
			q[k] = vs
		}
		req.URL.RawQuery = q.Encode()
	}
	if err := t.env.CheckURL(req.URL, ""); err != nil {
		return nil, err
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, utcp.DoError(ctx, err, "")
	}
	st := callStateOf(ctx)
	limit := t.env.ResponseLimit(ctx)
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case resp.StatusCode >= 400:
		body, err := utcp.ReadBody(ctx, resp.Body, -1, min(limit, maxErrorBody), "")
		resp.Body.Close()
		if err != nil {
			body = nil
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
	case mt == "application/json":
		body, err := utcp.ReadBody(ctx, resp.Body, resp.ContentLength, limit, "")
		resp.Body.Close()
		if err == nil && !utf8.Valid(body) {
			err = malformed(errors.New("the answer is not valid UTF-8"))
		}
		if err != nil {
			st.fail(err)
			return nil, err
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
	default:
		// An event stream: a call's is bounded as a whole, by the call's
		// response limit; the session's own (a GET) by the size of each
		// event (the SDK's MaxEventSize) and the notification rate.
		r := &streamReader{body: resp.Body, ctx: ctx, st: st}
		if st != nil {
			r.limit = limit
		}
		resp.Body = r
	}
	return resp, nil
}

// streamReader is a response body counted as it is read: over its limit
// (0: none), or not UTF-8, it fails the call it answers.
type streamReader struct {
	body  io.ReadCloser
	ctx   context.Context
	st    *callState
	limit int64
	read  int64
	held  int64 // reserved from the memory budget
	utf8  utf8Check
	err   error
}

// reserveChunk is how much of a stream is reserved at a time.
const reserveChunk = 64 << 10

func (r *streamReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	n, err := r.body.Read(p)
	r.read += int64(n)
	switch {
	case r.limit > 0 && r.read > r.limit:
		r.err = (&utcp.TransportError{Reason: utcp.ReasonTooLarge}).WithCause(fmt.Errorf("event stream over %d bytes", r.limit))
	case !r.utf8.valid(p[:n]) || (err == io.EOF && r.utf8.pending()):
		r.err = malformed(errors.New("the event stream is not valid UTF-8"))
	case r.st != nil && r.read > r.held:
		if rerr := utcp.ReserveAnswer(r.ctx, reserveChunk, ""); rerr != nil {
			r.err = rerr
		}
		r.held += reserveChunk
	}
	if r.err != nil {
		r.st.fail(r.err)
		return 0, r.err
	}
	return n, err
}

func (r *streamReader) Close() error { return r.body.Close() }

func malformed(cause error) *utcp.TransportError {
	return (&utcp.TransportError{Reason: utcp.ReasonMalformed}).WithCause(cause)
}

// utf8Check validates a byte stream read in pieces: a rune cut between two
// pieces is carried to the next.
type utf8Check struct {
	carry [utf8.UTFMax]byte
	n     int
}

func (u *utf8Check) valid(p []byte) bool {
	if u.n > 0 && len(p) > 0 {
		var b [2 * utf8.UTFMax]byte
		copy(b[:], u.carry[:u.n])
		m := copy(b[u.n:u.n+utf8.UTFMax], p)
		full := b[:u.n+m]
		if !utf8.FullRune(full) {
			u.n = copy(u.carry[:], full)
			return true
		}
		r, size := utf8.DecodeRune(full)
		if r == utf8.RuneError && size == 1 {
			return false
		}
		p = p[size-u.n:]
		u.n = 0
	}
	tail := 0
	for i := len(p) - 1; i >= 0 && i >= len(p)-(utf8.UTFMax-1); i-- {
		if utf8.RuneStart(p[i]) {
			if !utf8.FullRune(p[i:]) {
				tail = len(p) - i
			}
			break
		}
	}
	if !utf8.Valid(p[:len(p)-tail]) {
		return false
	}
	u.n += copy(u.carry[u.n:], p[len(p)-tail:])
	return true
}

// pending reports a rune left cut at the end of the stream.
func (u *utf8Check) pending() bool { return u.n > 0 }
