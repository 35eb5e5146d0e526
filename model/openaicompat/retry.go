package openaicompat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/exprd/exprd/model"
)

const (
	// userAgent names the client to servers.
	userAgent = "exprd"
	// retryCountHeader tells the server which retry an attempt is (0: the
	// first attempt), as OpenAI's own clients do.
	retryCountHeader = "X-Stainless-Retry-Count"
	// maxErrorBody bounds what is read of a refused request's body; the
	// rest is not worth reading.
	maxErrorBody = 64 << 10
	// maxRetryDrain bounds what is read of a response about to be retried,
	// so that its connection can be reused.
	maxRetryDrain = 4 << 10
	// firstBackoff is the wait before the first retry without Retry-After;
	// it doubles at each retry, up to the max retry delay, less up to a
	// quarter of jitter.
	firstBackoff = 500 * time.Millisecond
)

// send posts body to the chat endpoint, retrying as the package doc says,
// and returns the response of the last attempt, a 2xx or 3xx whose body is
// the caller's, and the number of attempts made. stop, when not nil, ends
// the per-attempt timeout that reading the body is still under; the caller
// calls it when done. Errors: an [*model.HTTPError] for a 4xx or 5xx;
// ErrUnreachable when no status came, wrapping the connection's error or
// the context's (the caller's end, or the attempt's timeout); ctx's error
// when it ended a wait between attempts.
func (p *Provider) send(ctx context.Context, body []byte) (res *http.Response, attempts int, stop context.CancelFunc, err error) {
	for attempt := 0; ; attempt++ {
		actx, cancel := ctx, context.CancelFunc(nil)
		if p.timeout > 0 {
			if d, ok := ctx.Deadline(); !ok || time.Now().Add(p.timeout).Before(d) {
				actx, cancel = context.WithTimeout(ctx, p.timeout)
			}
		}
		res, err = p.attempt(actx, body, attempt)
		if actx.Err() != nil {
			if res != nil {
				_ = res.Body.Close()
			}
			stopAttempt(cancel)
			return nil, attempt + 1, nil, fmt.Errorf("%w after %d attempts: %w", model.ErrUnreachable, attempt+1, actx.Err())
		}
		wait, retry := p.retryWait(ctx, res, attempt)
		if !retry {
			switch {
			case err != nil:
				stopAttempt(cancel)
				return nil, attempt + 1, nil, fmt.Errorf("%w after %d attempts: %w", model.ErrUnreachable, attempt+1, err)
			case res.StatusCode >= http.StatusBadRequest:
				refusal := refused(res, attempt+1)
				stopAttempt(cancel)
				return nil, attempt + 1, nil, refusal
			}
			return res, attempt + 1, cancel, nil
		}
		if res != nil {
			_, _ = io.CopyN(io.Discard, res.Body, maxRetryDrain)
			_ = res.Body.Close()
		}
		stopAttempt(cancel)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, attempt + 1, nil, ctx.Err()
		case <-t.C:
		}
	}
}

func stopAttempt(cancel context.CancelFunc) {
	if cancel != nil {
		cancel()
	}
}

// attempt sends the request once.
func (p *Provider) attempt(ctx context.Context, body []byte, n int) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	h := make(http.Header, len(p.header)+1)
	for k, v := range p.header {
		h[k] = v
	}
	h[retryCountHeader] = []string{strconv.Itoa(n)}
	req.Header = h
	return p.client.Do(req)
}

// retryWait says whether an attempt that got res (nil: no status came) is
// retried, and after what wait. Retried: connection errors, 408, 409, 429
// and 5xx, or what the server's X-Should-Retry says; never a 2xx or 3xx,
// and never past the retries allowed. The wait is Retry-After-Ms or
// Retry-After when the server sent one: longer than the max retry delay, or
// ending past ctx's deadline, it gets no retry, and the caller gets the
// error at once rather than after a pointless wait. Otherwise it is the
// backoff.
func (p *Provider) retryWait(ctx context.Context, res *http.Response, attempt int) (time.Duration, bool) {
	if attempt >= p.maxRetries {
		return 0, false
	}
	if res == nil {
		return p.backoff(attempt), true
	}
	if res.StatusCode < http.StatusBadRequest {
		return 0, false
	}
	switch res.Header.Get("X-Should-Retry") {
	case "true":
	case "false":
		return 0, false
	default:
		if !(&model.HTTPError{StatusCode: res.StatusCode}).Temporary() {
			return 0, false
		}
	}
	now := time.Now()
	wait, ok := retryAfter(res.Header, now)
	if !ok {
		return p.backoff(attempt), true
	}
	if wait > p.maxRetryDelay {
		return 0, false
	}
	if d, has := ctx.Deadline(); has && now.Add(wait).After(d) {
		return 0, false
	}
	return wait, true
}

// backoff is the wait before retry attempt+1 when the server named none.
func (p *Provider) backoff(attempt int) time.Duration {
	d := p.maxRetryDelay
	if attempt < 30 {
		d = min(firstBackoff<<attempt, d)
	}
	if j := int64(d / 4); j > 0 {
		d -= time.Duration(rand.Int64N(j))
	}
	return d
}

// retryAfter reads Retry-After-Ms, then Retry-After (seconds, or an
// HTTP-date).
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && ms >= 0 && !math.IsInf(ms, 0) {
			return durationOf(ms, time.Millisecond), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s < 0 || math.IsNaN(s) {
			return 0, false
		}
		return durationOf(s, time.Second), true
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(at.Sub(now), 0), true
	}
	return 0, false
}

func durationOf(v float64, unit time.Duration) time.Duration {
	if d := v * float64(unit); d < float64(math.MaxInt64) {
		return time.Duration(d)
	}
	return time.Duration(math.MaxInt64)
}

// refused reads a refused request's response into an [*model.HTTPError]:
// its status, its Retry-After, and the OpenAI error object's type, code and
// message when the body holds one ({"error": {...}}).
func refused(res *http.Response, attempts int) error {
	defer res.Body.Close()
	he := &model.HTTPError{StatusCode: res.StatusCode, Attempts: attempts}
	he.RetryAfter, _ = retryAfter(res.Header, time.Now())
	body, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	var wrapper struct {
		Error json.RawMessage `json:"error"`
	}
	var obj struct {
		Message, Type, Code errorText
	}
	if json.Unmarshal(body, &wrapper) == nil && json.Unmarshal(wrapper.Error, &obj) == nil {
		he.Message, he.Type, he.Code = string(obj.Message), string(obj.Type), string(obj.Code)
	}
	return he
}

// errorText is a field of an error object: a string's content, or any
// other value's JSON text (some servers send a numeric code).
type errorText string

func (e *errorText) UnmarshalJSON(b []byte) error {
	var s string
	switch {
	case bytes.Equal(b, nullValue):
		*e = ""
	case json.Unmarshal(b, &s) == nil:
		*e = errorText(s)
	default:
		*e = errorText(b)
	}
	return nil
}
