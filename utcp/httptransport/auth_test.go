package httptransport_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/httptransport"
	"github.com/exprd/exprd/utcp/internal/utcptest"
)

// tokenEndpoint is a loopback OAuth2 token endpoint that counts the tokens
// it hands out.
type tokenEndpoint struct {
	*utcptest.Provider
	issued    atomic.Int32
	expiresIn int
	basicOnly bool // refuse credentials in the body, as some servers do
}

func newTokenEndpoint(t *testing.T, expiresIn int, basicOnly bool) *tokenEndpoint {
	te := &tokenEndpoint{expiresIn: expiresIn, basicOnly: basicOnly}
	te.Provider = utcptest.NewProvider(t, func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		id, secret := r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
		if u, p, ok := r.BasicAuth(); ok {
			id, secret = u, p
		} else if te.basicOnly {
			id = ""
		}
		if r.PostForm.Get("grant_type") != "client_credentials" || id != "app" || secret != "s3cret" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"invalid_client","echo":"` + secret + `"}`))
			return
		}
		n := te.issued.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": fmt.Sprintf("tok-%d-%s", n, r.PostForm.Get("scope")), "token_type": "bearer", "expires_in": te.expiresIn})
	})
	return te
}

// fakeClock is the token cache's clock in tests: time passes when the test
// says so.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func oauthManual(api, tokenURL string, scopes ...string) string {
	var tools []string
	for i, s := range scopes {
		tools = append(tools, fmt.Sprintf(`{"name": "t%d", "tool_call_template": {"call_template_type": "http", "url": %q,
		  "auth": {"auth_type": "oauth2", "token_url": %q, "client_id": "app", "client_secret": "${SECRET}", "scope": %q}}}`, i, api, tokenURL, s))
	}
	return `{"utcp_version": "1", "tools": [` + strings.Join(tools, ",") + `]}`
}

func TestOAuth2ClientCredentials(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	vars := utcp.WithVariables(map[string]string{"api_SECRET": "s3cret"})

	t.Run("one token for many calls, sent as a bearer", func(t *testing.T) {
		t.Parallel()
		tokens := newTokenEndpoint(t, 3600, false)
		api := utcptest.NewProvider(t, nil)
		r := utcptest.NewRegistry(t, vars)
		utcptest.Register(t, r, "api", oauthManual(api.URL, tokens.URL+"/token", "read"))
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := r.Call(ctx, "api.t0", nil); err != nil {
					t.Errorf("Call: %v", err)
				}
			}()
		}
		wg.Wait()
		if _, err := r.Call(ctx, "api.t0", nil); err != nil {
			t.Fatalf("Call: %v", err)
		}
		if got := tokens.issued.Load(); got != 1 {
			t.Errorf("token requests: got %d, want 1", got)
		}
		for _, rq := range api.Requests() {
			if got := rq.Header.Get("Authorization"); got != "Bearer tok-1-read" {
				t.Errorf("Authorization: got %q, want Bearer tok-1-read", got)
			}
		}
	})
	// Anyone can read a manual's token URL and client id; a manual that
	// names them with a secret of its own must not be handed the token
	// another manual fetched (it would send it wherever it likes).
	t.Run("never handed to another manual", func(t *testing.T) {
		t.Parallel()
		tokens := newTokenEndpoint(t, 3600, false)
		api, thief := utcptest.NewProvider(t, nil), utcptest.NewProvider(t, nil)
		r := utcptest.NewRegistry(t, utcp.WithVariables(map[string]string{"api_SECRET": "s3cret", "thief_SECRET": "guess"}))
		utcptest.Register(t, r, "api", oauthManual(api.URL, tokens.URL+"/token", "read"))
		utcptest.Register(t, r, "thief", oauthManual(thief.URL, tokens.URL+"/token", "read"))
		if _, err := r.Call(ctx, "api.t0", nil); err != nil {
			t.Fatalf("Call: %v", err)
		}
		if _, err := r.Call(ctx, "thief.t0", nil); err == nil {
			t.Errorf("the thief's call: got no error, want its own (refused) token request to fail it")
		}
		if got := len(thief.Requests()); got != 0 {
			t.Errorf("the thief's provider saw %d requests (%v), want 0", got, thief.Requests())
		}
	})
	t.Run("cached per scope", func(t *testing.T) {
		t.Parallel()
		tokens := newTokenEndpoint(t, 3600, false)
		api := utcptest.NewProvider(t, nil)
		r := utcptest.NewRegistry(t, vars)
		utcptest.Register(t, r, "api", oauthManual(api.URL, tokens.URL+"/token", "read", "write"))
		for _, tool := range []string{"api.t0", "api.t1", "api.t0", "api.t1"} {
			if _, err := r.Call(ctx, tool, nil); err != nil {
				t.Fatalf("Call: %v", err)
			}
		}
		if got := tokens.issued.Load(); got != 2 {
			t.Errorf("token requests: got %d, want 2 (one per scope)", got)
		}
	})
	t.Run("refreshed before it expires", func(t *testing.T) {
		t.Parallel()
		tokens := newTokenEndpoint(t, 60, false) // refreshed 30 s (the margin) before it expires
		api := utcptest.NewProvider(t, nil)
		clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
		transports, err := httptransport.Transports(httptransport.WithClock(clock.Now))
		if err != nil {
			t.Fatal(err)
		}
		r := utcptest.NewRegistry(t, vars, utcp.WithTransports(transports))
		utcptest.Register(t, r, "api", oauthManual(api.URL, tokens.URL+"/token", ""))
		call := func() {
			t.Helper()
			if _, err := r.Call(ctx, "api.t0", nil); err != nil {
				t.Fatalf("Call: %v", err)
			}
		}
		call()
		clock.Advance(60*time.Second - httptransport.TokenRefreshMargin - time.Nanosecond)
		call()
		if got := tokens.issued.Load(); got != 1 {
			t.Fatalf("token requests just before the refresh: got %d, want 1", got)
		}
		clock.Advance(time.Nanosecond)
		call()
		if got := tokens.issued.Load(); got != 2 {
			t.Errorf("token requests at the refresh: got %d, want 2", got)
		}
	})
	t.Run("credentials as HTTP Basic when the body is refused", func(t *testing.T) {
		t.Parallel()
		tokens := newTokenEndpoint(t, 3600, true)
		api := utcptest.NewProvider(t, nil)
		r := utcptest.NewRegistry(t, vars)
		utcptest.Register(t, r, "api", oauthManual(api.URL, tokens.URL+"/token", "x"))
		if _, err := r.Call(ctx, "api.t0", nil); err != nil {
			t.Fatalf("Call: %v", err)
		}
		if got := tokens.issued.Load(); got != 1 {
			t.Errorf("tokens: got %d, want 1", got)
		}
	})
	t.Run("a refused token is an auth error that does not echo the endpoint", func(t *testing.T) {
		t.Parallel()
		tokens := newTokenEndpoint(t, 3600, false)
		api := utcptest.NewProvider(t, nil)
		r := utcptest.NewRegistry(t, utcp.WithVariables(map[string]string{"api_SECRET": "wrong"}))
		utcptest.Register(t, r, "api", oauthManual(api.URL, tokens.URL+"/token", "x"))
		_, err := r.Call(ctx, "api.t0", nil)
		var te *utcp.TransportError
		if !errors.As(err, &te) || te.Reason != utcp.ReasonAuth || te.Status != 401 {
			t.Fatalf("got %v, want ReasonAuth 401", err)
		}
		if strings.Contains(err.Error(), "wrong") {
			t.Errorf("message %q repeats the token endpoint's body", err)
		}
		if n := len(api.Requests()); n != 0 {
			t.Errorf("the API saw %d requests, want 0", n)
		}
	})
}
