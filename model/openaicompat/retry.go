package openaicompat

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/exprd/exprd/model"
)

// tracker is a per-call middleware: it runs once per attempt, inside the
// SDK's retry loop, so it sees every response before the loop decides.
type tracker struct {
	attempts int
	status   int
	header   http.Header
}

// middleware counts attempts, remembers the last status, and adds one rule
// to the SDK's retry loop: when Retry-After asks for a wait that would end
// after the caller's deadline, there is no retry and the caller gets the
// 429 or 503 at once, not a deadline error after a pointless wait. It says
// so with the SDK's own x-should-retry response header.
func (t *tracker) middleware(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	t.attempts++
	res, err := next(req)
	if err != nil || res == nil {
		return res, err
	}
	t.status, t.header = res.StatusCode, res.Header
	if res.StatusCode >= http.StatusBadRequest {
		if wait, ok := retryAfter(res.Header, time.Now()); ok {
			if deadline, has := req.Context().Deadline(); has && time.Now().Add(wait).After(deadline) {
				res.Header.Set("X-Should-Retry", "false")
			}
		}
	}
	return res, err
}

// retryAfter reads Retry-After-Ms, then Retry-After (seconds, or an
// HTTP-date), as the SDK does.
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

// requestErr turns what the SDK returned for a request into this package's
// errors: the context's error when the caller ended the turn, an
// [*model.HTTPError] for a status, ErrMalformedChunk for a 200 whose body
// would not decode, ErrUnreachable when no status came.
func (p *Provider) requestErr(ctx context.Context, err error, t *tracker) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return p.wrap(ctxErr)
	}
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		he := &model.HTTPError{StatusCode: apiErr.StatusCode, Type: apiErr.Type, Code: apiErr.Code,
			Message: apiErr.Message, Attempts: t.attempts}
		if apiErr.Response != nil {
			he.RetryAfter, _ = retryAfter(apiErr.Response.Header, time.Now())
		}
		return p.wrap(he)
	}
	switch {
	case t.status >= http.StatusBadRequest:
		// An error body that is not an OpenAI error object.
		he := &model.HTTPError{StatusCode: t.status, Attempts: t.attempts}
		he.RetryAfter, _ = retryAfter(t.header, time.Now())
		return p.wrap(he)
	case t.status >= 200 && t.status < 300:
		return p.wrap(fmt.Errorf("%w: %w", model.ErrMalformedChunk, err))
	case t.status != 0:
		return p.wrap(fmt.Errorf("unexpected HTTP status %d: %w", t.status, err))
	}
	return p.wrap(fmt.Errorf("%w after %d attempts: %w", model.ErrUnreachable, t.attempts, err))
}
