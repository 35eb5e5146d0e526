package openaicompat_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/model/openaicompat"
	"github.com/exprd/exprd/model/scripted"
)

var ok = scripted.Turn{Text: "fine"}

func httpErr(t *testing.T, err error) *model.HTTPError {
	t.Helper()
	var he *model.HTTPError
	if !errors.As(err, &he) {
		t.Fatalf("got %v, want a *model.HTTPError", err)
	}
	return he
}

// TestRetries: 429 and 5xx are retried, honouring Retry-After in seconds
// and as an HTTP-date, and so is what the server's X-Should-Retry asks
// for; the retry count reaches the server.
func TestRetries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		first    scripted.ErrorReply
		minDelay time.Duration
	}{
		{"429 with Retry-After in seconds", scripted.ErrorReply{Status: 429, RetryAfter: "1"}, time.Second},
		{"503 with Retry-After as an HTTP-date", scripted.ErrorReply{Status: 503, RetryAfterDateMS: 1500}, 400 * time.Millisecond},
		{"500 without Retry-After: backoff", scripted.ErrorReply{Status: 500}, 300 * time.Millisecond},
		{"429 with Retry-After-Ms", scripted.ErrorReply{Status: 429, Header: map[string]string{"Retry-After-Ms": "250"}}, 250 * time.Millisecond},
		{"a plain-text body", scripted.ErrorReply{Status: 502, Body: json.RawMessage(`"bad gateway"`), RetryAfter: "0"}, 0},
		{"400 with X-Should-Retry: true", scripted.ErrorReply{Status: 400, RetryAfter: "0", Header: map[string]string{"X-Should-Retry": "true"}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := serve(t, scripted.Turn{Error: &tt.first}, ok)
			p := provider(t, srv, nil)
			t0 := time.Now()
			_, resp, err := turn(t, p, ask)
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Since(t0); d < tt.minDelay || d > 5*time.Second {
				t.Errorf("got the reply after %v, want at least %v", d, tt.minDelay)
			}
			reqs := srv.Requests()
			if resp.Message.Content != "fine" || len(reqs) != 2 {
				t.Fatalf("got %q after %d requests, want fine after 2", resp.Message.Content, len(reqs))
			}
			if got := reqs[1].Header.Get("X-Stainless-Retry-Count"); got != "1" {
				t.Errorf("got retry count %q on the retry, want 1", got)
			}
		})
	}
}

// TestRetryLimits: attempts are capped, a Retry-After over the max delay or
// past the caller's deadline gets no retry, and neither does a 4xx, a
// status the server's X-Should-Retry refuses, or a stream that has begun.
func TestRetryLimits(t *testing.T) {
	t.Parallel()
	unavailable := scripted.Turn{Error: &scripted.ErrorReply{Status: 503, RetryAfter: "0"}}
	tests := []struct {
		name         string
		turns        []scripted.Turn
		edit         func(*openaicompat.ProviderConfig)
		deadline     time.Duration
		wantStatus   int
		wantErr      error
		wantRequests int
		wantAttempts int
		wantRA       time.Duration
		maxTime      time.Duration
	}{
		{name: "capped attempts", turns: []scripted.Turn{unavailable, unavailable, unavailable, ok},
			wantStatus: 503, wantRequests: 3, wantAttempts: 3},
		{name: "more retries than the default", turns: []scripted.Turn{unavailable, unavailable, unavailable, unavailable, unavailable, ok},
			edit: func(c *openaicompat.ProviderConfig) { c.MaxRetries = ptr(openaicompat.MaxMaxRetries) }, wantRequests: 6},
		{name: "retries off", turns: []scripted.Turn{unavailable, ok}, edit: func(c *openaicompat.ProviderConfig) { c.MaxRetries = ptr(0) },
			wantStatus: 503, wantRequests: 1, wantAttempts: 1},
		{name: "Retry-After over the max delay", turns: []scripted.Turn{{Error: &scripted.ErrorReply{Status: 429, RetryAfter: "30"}}, ok},
			edit:       func(c *openaicompat.ProviderConfig) { c.MaxRetryDelay = openaicompat.Duration(time.Second) },
			wantStatus: 429, wantRequests: 1, wantAttempts: 1, wantRA: 30 * time.Second, maxTime: time.Second},
		{name: "Retry-After past the deadline", turns: []scripted.Turn{{Error: &scripted.ErrorReply{Status: 429, RetryAfter: "5"}}, ok},
			deadline: 2 * time.Second, wantStatus: 429, wantRequests: 1, wantAttempts: 1, wantRA: 5 * time.Second, maxTime: time.Second},
		{name: "503 with X-Should-Retry: false", turns: []scripted.Turn{{Error: &scripted.ErrorReply{Status: 503, Header: map[string]string{"X-Should-Retry": "false"}}}, ok},
			wantStatus: 503, wantRequests: 1, wantAttempts: 1},
		{name: "400 is not retried", turns: []scripted.Turn{{Error: &scripted.ErrorReply{Status: 400,
			Body: json.RawMessage(`{"error":{"message":"bad tool schema","type":"invalid_request_error","code":"invalid_schema"}}`)}}, ok},
			wantStatus: 400, wantRequests: 1, wantAttempts: 1},
		{name: "a plain-text error body", turns: []scripted.Turn{{Error: &scripted.ErrorReply{Status: 502, Body: json.RawMessage(`"bad gateway"`)}}},
			edit: func(c *openaicompat.ProviderConfig) { c.MaxRetries = ptr(0) }, wantStatus: 502, wantRequests: 1, wantAttempts: 1},
		{name: "no retry once the stream has begun", turns: []scripted.Turn{{Text: "one two three", CutAfter: ptr(2)}, ok},
			wantErr: model.ErrStreamCut, wantRequests: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := serve(t, tt.turns...)
			p := provider(t, srv, tt.edit)
			ctx := context.Background()
			if tt.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.deadline)
				defer cancel()
			}
			t0 := time.Now()
			var err error
			if s, serr := p.Stream(ctx, ask); serr != nil {
				err = serr
			} else {
				_, _, err = drain(t, s)
			}
			if tt.maxTime > 0 && time.Since(t0) > tt.maxTime {
				t.Errorf("took %v, want at most %v", time.Since(t0), tt.maxTime)
			}
			if n := len(srv.Requests()); n != tt.wantRequests {
				t.Errorf("got %d requests, want %d", n, tt.wantRequests)
			}
			switch {
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("got %v, want %v", err, tt.wantErr)
				}
				return
			case tt.wantStatus == 0:
				if err != nil {
					t.Errorf("got %v, want a reply", err)
				}
				return
			}
			he := httpErr(t, err)
			if he.StatusCode != tt.wantStatus || he.Attempts != tt.wantAttempts || he.RetryAfter != tt.wantRA {
				t.Errorf("got status %d after %d attempts, Retry-After %v; want %d, %d, %v",
					he.StatusCode, he.Attempts, he.RetryAfter, tt.wantStatus, tt.wantAttempts, tt.wantRA)
			}
			if tt.wantStatus == 400 && (he.Message != "bad tool schema" || he.Type != "invalid_request_error" || he.Code != "invalid_schema") {
				t.Errorf("got message %q type %q code %q", he.Message, he.Type, he.Code)
			}
		})
	}
}

// TestContextReachesServer: the caller's deadline and cancellation end the
// HTTP request, and the server sees it end.
func TestContextReachesServer(t *testing.T) {
	t.Parallel()
	t.Run("deadline before the reply", func(t *testing.T) {
		t.Parallel()
		srv := serve(t, scripted.Turn{Text: "late", DelayMS: 10_000})
		p := provider(t, srv, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := p.Stream(ctx, ask)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want context.DeadlineExceeded", err)
		}
		waitFor(t, "the server to see the request end", func() bool { return srv.Requests()[0].Aborted })
	})
	t.Run("cancelled mid-stream", func(t *testing.T) {
		t.Parallel()
		srv := serve(t, scripted.Turn{TextChunks: []string{"a", "b", "c"}, ChunkDelayMS: 10_000})
		p := provider(t, srv, nil)
		ctx, cancel := context.WithCancel(context.Background())
		s, err := p.Stream(ctx, ask)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		time.AfterFunc(50*time.Millisecond, cancel)
		for {
			if _, err = s.Recv(); err != nil {
				break
			}
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
		waitFor(t, "the server to see the request end", func() bool { return srv.Requests()[0].Aborted })
	})
	t.Run("per-attempt timeout", func(t *testing.T) {
		t.Parallel()
		srv := serve(t, scripted.Turn{Text: "late", DelayMS: 10_000})
		p := provider(t, srv, func(c *openaicompat.ProviderConfig) {
			c.Timeout = openaicompat.Duration(100 * time.Millisecond)
			c.MaxRetries = ptr(0)
		})
		_, err := p.Stream(context.Background(), ask)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want context.DeadlineExceeded", err)
		}
		waitFor(t, "the server to see the request end", func() bool { return srv.Requests()[0].Aborted })
	})
	t.Run("cancelled while waiting to retry", func(t *testing.T) {
		t.Parallel()
		srv := serve(t, scripted.Turn{Error: &scripted.ErrorReply{Status: 429, RetryAfter: "20"}}, ok)
		p := provider(t, srv, nil)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		t0 := time.Now()
		_, err := p.Stream(ctx, ask)
		if !errors.Is(err, context.Canceled) || time.Since(t0) > 5*time.Second {
			t.Fatalf("got %v after %v, want context.Canceled at once", err, time.Since(t0))
		}
		if n := len(srv.Requests()); n != 1 {
			t.Errorf("got %d requests, want 1", n)
		}
	})
}

// TestUnreachable: a server that cannot be reached is model.ErrUnreachable
// once the retries are spent, and model.Describe says so without the
// address.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close() // nothing listens there any more: connections are refused
	p, err := openaicompat.New("gone", openaicompat.ProviderConfig{BaseURL: "http://" + addr + "/v1", Model: "m", MaxRetries: ptr(1),
		MaxRetryDelay: openaicompat.Duration(10 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	_, err = p.Stream(context.Background(), ask)
	if !errors.Is(err, model.ErrUnreachable) {
		t.Fatalf("got %v, want model.ErrUnreachable", err)
	}
	var he *model.HTTPError
	if errors.As(err, &he) {
		t.Errorf("got an HTTPError %v, want none: no status came", he)
	}
	if got, want := model.Describe(err), "the model server could not be reached"; got != want {
		t.Errorf("Describe: got %q, want %q", got, want)
	}
}
