package httptransport

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/exprd/exprd/utcp"
)

// applyAuth sets a request's credentials. An api_key in the query is
// returned (as key and value) so that it lands after the arguments, as the
// SDK sends it.
func applyAuth(ctx context.Context, req *http.Request, a *utcp.Auth, tokens *tokenCache, env utcp.Env, tool string) (queryKey, queryValue string, err error) {
	if a == nil {
		return "", "", nil
	}
	switch a.Type {
	case utcp.AuthAPIKey:
		if a.APIKey == "" {
			return "", "", &utcp.InvalidArgumentsError{Tool: tool, Problems: []string{"the api_key of the template's auth is empty"}}
		}
		if !validHeaderValue(a.APIKey) || !validHeaderValue(a.VarName) {
			return "", "", &utcp.InvalidArgumentsError{Tool: tool, Problems: []string{"the template's api_key contains a control character"}}
		}
		switch a.Location {
		case utcp.LocationQuery:
			return a.VarName, a.APIKey, nil
		case utcp.LocationCookie:
			req.Header.Add("Cookie", a.VarName+"="+a.APIKey)
		default:
			req.Header.Set(a.VarName, a.APIKey)
		}
	case utcp.AuthBasic:
		req.SetBasicAuth(a.Username, a.Password)
	case utcp.AuthOAuth2:
		tok, err := tokens.token(ctx, a, env, tool)
		if err != nil {
			return "", "", err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	return "", "", nil
}

// validHeaderValue reports whether s may be sent as a header's value: no
// control character but tab (CR and LF would split the request), as
// net/http itself checks before sending. A value it would refuse there
// came back as an unreachable provider; it is the call's arguments.
func validHeaderValue(s string) bool { return httpguts.ValidHeaderFieldValue(s) }

// tokenCache keeps OAuth2 client-credentials tokens per manual, token URL,
// client, scope and secret, and fetches each once however many calls wait
// for it. The manual and the secret are in the key so that a manual can
// only ever be handed a token it could have fetched with its own
// credentials: another manual naming the same token URL and client id
// (anyone can read them in a listed manual) must not get its token.
//
// A registry has one cache for each set of transports Transports made
// (its Env.Shared keeps it), so that every tool of every manual shares it.
type tokenCache struct {
	mu      sync.Mutex
	entries map[tokenKey]*tokenEntry
	now     func() time.Time
}

// Close lets the registry's Env.Shared hold the cache; it holds no
// resources.
func (c *tokenCache) Close() error { return nil }

type tokenKey struct {
	manual, url, client, scope string
	secret                     [32]byte // sha256 of the client secret
}

type tokenEntry struct {
	mu      sync.Mutex // held while fetching, so concurrent calls fetch once
	token   string
	refresh time.Time // fetch anew from this instant on
}

func newTokenCache(now func() time.Time) *tokenCache {
	return &tokenCache{entries: make(map[tokenKey]*tokenEntry), now: now}
}

func (c *tokenCache) token(ctx context.Context, a *utcp.Auth, env utcp.Env, tool string) (string, error) {
	key := tokenKey{manual: env.Manual, url: a.TokenURL, client: a.ClientID, scope: a.Scope, secret: sha256.Sum256([]byte(a.ClientSecret))}
	c.mu.Lock()
	e := c.entries[key]
	if e == nil {
		e = &tokenEntry{}
		c.entries[key] = e
	}
	c.mu.Unlock()

	e.mu.Lock()
	defer e.mu.Unlock()
	// A provider that echoes the Authorization header it got must not show
	// the token: each one handed out is one of the manual's secrets (the
	// env's, whichever registration of the manual it is), in place of this
	// entry's token before the last.
	slot := fmt.Sprintf("oauth2 token %p", e)
	if e.token != "" && c.now().Before(e.refresh) {
		env.ConcealAlso(slot, e.token)
		return e.token, nil
	}
	tok, life, err := fetchToken(ctx, a, env, tool)
	if err != nil {
		return "", err
	}
	env.ConcealAlso(slot, tok)
	margin := min(TokenRefreshMargin, life/2)
	e.token, e.refresh = tok, c.now().Add(life-margin)
	return tok, nil
}

// fetchToken runs the client-credentials flow: credentials in the form body
// first and, if the endpoint refuses them, as HTTP Basic (the SDK tries
// both).
func fetchToken(ctx context.Context, a *utcp.Auth, env utcp.Env, tool string) (string, time.Duration, error) {
	u, err := url.Parse(a.TokenURL)
	if err != nil {
		return "", 0, (&utcp.TransportError{Tool: tool, Reason: utcp.ReasonAuth}).WithCause(err)
	}
	if err := env.CheckURL(u, tool); err != nil {
		return "", 0, err
	}
	form := url.Values{"grant_type": {"client_credentials"}}
	if a.Scope != "" {
		form.Set("scope", a.Scope)
	}
	inBody := url.Values{"client_id": {a.ClientID}, "client_secret": {a.ClientSecret}}
	for k, v := range form {
		inBody[k] = v
	}
	tok, life, err := postToken(ctx, u.String(), inBody, nil, env, tool)
	if err == nil {
		return tok, life, nil
	}
	var te *utcp.TransportError
	if !errors.As(err, &te) || te.Reason != utcp.ReasonAuth || te.Status == 0 {
		return "", 0, err
	}
	return postToken(ctx, u.String(), form, a, env, tool)
}

func postToken(ctx context.Context, tokenURL string, form url.Values, basic *utcp.Auth, env utcp.Env, tool string) (string, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return "", 0, (&utcp.TransportError{Tool: tool, Reason: utcp.ReasonAuth}).WithCause(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if basic != nil {
		req.SetBasicAuth(url.QueryEscape(basic.ClientID), url.QueryEscape(basic.ClientSecret))
	}
	resp, err := env.HTTPClient.Do(req)
	if err != nil {
		return "", 0, utcp.DoError(ctx, err, tool)
	}
	defer resp.Body.Close()
	body, err := utcp.ReadBody(ctx, resp.Body, -1, maxTokenResponseBytes, tool)
	if err != nil {
		return "", 0, err
	}
	var parsed struct {
		AccessToken string          `json:"access_token"`
		ExpiresIn   json.RawMessage `json:"expires_in"`
	}
	decodeErr := json.Unmarshal(body, &parsed)
	if resp.StatusCode >= 400 || decodeErr != nil || parsed.AccessToken == "" {
		var shown any
		if resp.StatusCode < 400 && decodeErr == nil {
			// Never repeat a token endpoint's body: it may echo credentials.
			shown = "no access_token in the token endpoint's answer"
		}
		return "", 0, &utcp.TransportError{Tool: tool, Reason: utcp.ReasonAuth, Status: resp.StatusCode, Body: shown}
	}
	life := DefaultTokenLifetime
	if len(parsed.ExpiresIn) > 0 {
		var secs float64
		if json.Unmarshal(parsed.ExpiresIn, &secs) != nil {
			var s string
			if json.Unmarshal(parsed.ExpiresIn, &s) == nil {
				if d, err := time.ParseDuration(s + "s"); err == nil {
					secs = d.Seconds()
				}
			}
		}
		if secs > 0 {
			life = time.Duration(secs * float64(time.Second))
		}
	}
	return parsed.AccessToken, life, nil
}

// basicCredentials is what HTTP Basic auth sends for user and password
// (after "Basic ").
func basicCredentials(user, password string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
}
