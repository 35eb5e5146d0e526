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
	"github.com/exprd/exprd/utcp/utcpall"
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

// TestOAuth2TokenEndpointFails: whatever a token endpoint answers instead
// of a token, the call fails with exprd's own words, its status and never
// the endpoint's body (which may echo the client secret), not even behind
// Unwrap; an endpoint that answered is asked again with the credentials as
// HTTP Basic, one whose answer is over the size limit is not.
func TestOAuth2TokenEndpointFails(t *testing.T) {
	t.Parallel()
	const tool = `tool "api.t0": `
	tests := []struct {
		name        string
		status      int
		contentType string
		body        string
		reason      utcp.Reason
		want        string
		requests    int
	}{
		{"401 echoing the secret", 401, "application/json", `{"error":"invalid_client","echo":"s3cret"}`, utcp.ReasonAuth,
			tool + "could not obtain an OAuth2 token (the token endpoint answered 401)", 2},
		{"500", 500, "text/plain", "s3cret", utcp.ReasonAuth,
			tool + "could not obtain an OAuth2 token (the token endpoint answered 500)", 2},
		{"garbage", 200, "text/html", "<html>s3cret</html>", utcp.ReasonAuth,
			tool + "could not obtain an OAuth2 token (the token endpoint answered 200)", 2},
		{"JSON without access_token", 200, "application/json", `{"token_type":"bearer","echo":"s3cret"}`, utcp.ReasonAuth,
			tool + "could not obtain an OAuth2 token (the token endpoint answered 200): no access_token in the token endpoint's answer", 2},
		{"an error in a 200", 200, "application/json", `{"error":"invalid_scope","error_description":"s3cret"}`, utcp.ReasonAuth,
			tool + "could not obtain an OAuth2 token (the token endpoint answered 200): no access_token in the token endpoint's answer", 2},
		{"over the size limit", 200, "application/json", `{"access_token":"` + strings.Repeat("s3cret", 64<<10/6) + `"}`, utcp.ReasonTooLarge,
			tool + "provider response over the size limit", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tokens := utcptest.NewProvider(t, answering(tc.status, tc.contentType, tc.body))
			api := utcptest.NewProvider(t, nil)
			r := utcptest.NewRegistry(t, utcp.WithVariables(map[string]string{"api_SECRET": "s3cret"}))
			utcptest.Register(t, r, "api", oauthManual(api.URL, tokens.URL+"/token", "x"))
			_, err := r.Call(context.Background(), "api.t0", nil)
			var te *utcp.TransportError
			if !errors.As(err, &te) || te.Reason != tc.reason {
				t.Fatalf("got %v, want a transport error of reason %s", err, tc.reason)
			}
			if err.Error() != tc.want {
				t.Errorf("message: got %q, want %q", err, tc.want)
			}
			for e := error(err); e != nil; e = errors.Unwrap(e) {
				if strings.Contains(e.Error(), "s3cret") {
					t.Errorf("%T in the error's chain repeats the secret: %q", e, e)
				}
			}
			if got := len(tokens.Requests()); got != tc.requests {
				t.Errorf("token requests: got %d, want %d", got, tc.requests)
			}
			if n := len(api.Requests()); n != 0 {
				t.Errorf("the API saw %d requests, want 0", n)
			}
		})
	}
}

// TestOAuth2TokenAnswers: the forms of a token endpoint's answer exprd
// takes, each token's life read from it; the request asks for JSON, with
// the credentials in the form body.
func TestOAuth2TokenAnswers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, contentType, body string
		life                    time.Duration
	}{
		{"JSON", "application/json", `{"access_token":"tok","token_type":"bearer","expires_in":120}`, 120 * time.Second},
		{"expires_in as a string", "application/json", `{"access_token":"tok","expires_in":"120"}`, 120 * time.Second},
		{"no expires_in", "application/json", `{"access_token":"tok"}`, httptransport.DefaultTokenLifetime},
		{"JSON labelled text/plain", "text/plain", `{"access_token":"tok","expires_in":120}`, 120 * time.Second},
		{"form-encoded", "application/x-www-form-urlencoded", `access_token=tok&token_type=bearer&expires_in=120`, 120 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tokens := utcptest.NewProvider(t, answering(http.StatusOK, tc.contentType, tc.body))
			api := utcptest.NewProvider(t, nil)
			clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
			transports, err := httptransport.Transports(httptransport.WithClock(clock.Now))
			if err != nil {
				t.Fatal(err)
			}
			r := utcptest.NewRegistry(t, utcp.WithVariables(map[string]string{"api_SECRET": "s3cret"}), utcp.WithTransports(transports))
			utcptest.Register(t, r, "api", oauthManual(api.URL, tokens.URL+"/token", "read"))
			call := func() {
				t.Helper()
				if _, err := r.Call(context.Background(), "api.t0", nil); err != nil {
					t.Fatalf("Call: %v", err)
				}
			}
			call()
			clock.Advance(tc.life - httptransport.TokenRefreshMargin - time.Nanosecond)
			call()
			if got := len(tokens.Requests()); got != 1 {
				t.Fatalf("token requests before the refresh: got %d, want 1", got)
			}
			clock.Advance(time.Nanosecond)
			call()
			if got := len(tokens.Requests()); got != 2 {
				t.Errorf("token requests at the refresh: got %d, want 2", got)
			}
			for _, rq := range api.Requests() {
				if got := rq.Header.Get("Authorization"); got != "Bearer tok" {
					t.Errorf("Authorization: got %q, want Bearer tok", got)
				}
			}
			rq := tokens.Requests()[0]
			if got := rq.Header.Get("Accept"); got != "application/json" {
				t.Errorf("the token request's Accept: got %q, want application/json", got)
			}
			if want := "client_id=app&client_secret=s3cret&grant_type=client_credentials&scope=read"; rq.Body != want {
				t.Errorf("the token request's body: got %q, want %q", rq.Body, want)
			}
		})
	}
}

// TestOAuth2TokenRequestUsesTheRegistrysClient: the token request leaves
// through the registry's client, whose redirect rule holds (a token
// endpoint may not send it to another host) and whose egress policy does.
func TestOAuth2TokenRequestUsesTheRegistrysClient(t *testing.T) {
	t.Parallel()
	vars := utcp.WithVariables(map[string]string{"api_SECRET": "s3cret"})
	tests := []struct {
		name     string
		registry func(t *testing.T) *utcp.Registry
		// tokenURL is the manual's token URL, which must not bring a
		// request to tokens.
		tokenURL func(t *testing.T, tokens *tokenEndpoint) string
		reason   utcp.Reason
	}{
		{"no redirect to another host",
			func(t *testing.T) *utcp.Registry { return utcptest.NewRegistry(t, vars) },
			func(t *testing.T, tokens *tokenEndpoint) string {
				redirect := utcptest.NewProvider(t, func(w http.ResponseWriter, r *http.Request) {
					http.Redirect(w, r, strings.Replace(tokens.URL, "127.0.0.1", "localhost", 1)+"/token", http.StatusTemporaryRedirect)
				})
				return redirect.URL + "/token"
			},
			utcp.ReasonRedirect},
		{"egress policy",
			func(t *testing.T) *utcp.Registry {
				r, err := utcpall.New(vars) // the default policy: public addresses only
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = r.Close() })
				return r
			},
			func(t *testing.T, tokens *tokenEndpoint) string {
				return strings.Replace(tokens.URL, "http://", "https://", 1) + "/token"
			},
			utcp.ReasonEgress},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tokens := newTokenEndpoint(t, 3600, false)
			r := tc.registry(t)
			utcptest.Register(t, r, "api", oauthManual("https://api.example.com/x", tc.tokenURL(t, tokens), "x"))
			_, err := r.Call(context.Background(), "api.t0", nil)
			var te *utcp.TransportError
			if !errors.As(err, &te) || te.Reason != tc.reason {
				t.Fatalf("got %v, want %s", err, tc.reason)
			}
			if n := len(tokens.Requests()); n != 0 {
				t.Errorf("the token endpoint saw %d requests, want 0", n)
			}
		})
	}
}

// answering is a provider's handler that answers status, contentType and
// body whatever it is asked.
func answering(status int, contentType, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}
}
