package httptransport

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/manual"
)

// applyAuth sets a request's credentials. An api_key in the query is
// returned (as key and value) so that it lands after the arguments, as the
// SDK sends it.
func applyAuth(ctx context.Context, req *http.Request, a *manual.Auth, tokens *tokenCache, env utcp.Env, tool string) (queryKey, queryValue string, err error) {
	if a == nil {
		return "", "", nil
	}
	switch a.Type {
	case manual.AuthAPIKey:
		if a.APIKey == "" {
			return "", "", &manual.InvalidArgumentsError{Tool: tool, Problems: []string{"the api_key of the template's auth is empty"}}
		}
		if !validHeaderValue(a.APIKey) || !validHeaderValue(a.VarName) {
			return "", "", &manual.InvalidArgumentsError{Tool: tool, Problems: []string{"the template's api_key contains a control character"}}
		}
		switch a.Location {
		case manual.LocationQuery:
			return a.VarName, a.APIKey, nil
		case manual.LocationCookie:
			req.Header.Add("Cookie", a.VarName+"="+a.APIKey)
		default:
			req.Header.Set(a.VarName, a.APIKey)
		}
	case manual.AuthBasic:
		req.SetBasicAuth(a.Username, a.Password)
	case manual.AuthOAuth2:
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

func (c *tokenCache) token(ctx context.Context, a *manual.Auth, env utcp.Env, tool string) (string, error) {
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

// fetchToken runs the client-credentials flow (golang.org/x/oauth2's):
// credentials in the form body first and, if the endpoint refuses them, as
// HTTP Basic (the SDK tries both, in this order).
func fetchToken(ctx context.Context, a *manual.Auth, env utcp.Env, tool string) (string, time.Duration, error) {
	u, err := url.Parse(a.TokenURL)
	if err != nil {
		return "", 0, (&utcp.TransportError{Tool: tool, Reason: utcp.ReasonAuth}).WithCause(err)
	}
	if err := env.CheckURL(u, tool); err != nil {
		return "", 0, err
	}
	tok, life, err := requestToken(ctx, u.String(), a, oauth2.AuthStyleInParams, env, tool)
	if err == nil {
		return tok, life, nil
	}
	var te *utcp.TransportError
	if !errors.As(err, &te) || te.Reason != utcp.ReasonAuth || te.Status == 0 {
		return "", 0, err
	}
	return requestToken(ctx, u.String(), a, oauth2.AuthStyleInHeader, env, tool)
}

// requestToken asks the token endpoint once, with the credentials where
// style puts them, through the registry's client (its egress policy and
// redirect rule), the answer bounded by tokenTransport.
func requestToken(ctx context.Context, tokenURL string, a *manual.Auth, style oauth2.AuthStyle, env utcp.Env, tool string) (string, time.Duration, error) {
	cfg := clientcredentials.Config{ClientID: a.ClientID, ClientSecret: a.ClientSecret, TokenURL: tokenURL, AuthStyle: style}
	if a.Scope != "" {
		cfg.Scopes = []string{a.Scope}
	}
	rt := &tokenTransport{base: env.HTTPClient.Transport, tool: tool}
	if rt.base == nil {
		rt.base = http.DefaultTransport
	}
	client := *env.HTTPClient
	client.Transport = rt
	tok, err := cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, &client))
	if err != nil {
		return "", 0, tokenError(ctx, err, rt.status, tool)
	}
	return tok.AccessToken, tokenLifetime(tok.Extra("expires_in")), nil
}

// tokenError is what exprd says when the token endpoint gave no token. It
// never repeats the endpoint's body, which may echo credentials, nor keeps
// it behind Unwrap (oauth2.RetrieveError's text holds it).
func tokenError(ctx context.Context, err error, status int, tool string) error {
	var re *oauth2.RetrieveError
	var ue *url.Error
	switch {
	case errors.As(err, &re):
		// A status out of 2xx, or an "error" in a 2xx answer.
		status = re.Response.StatusCode
	case errors.As(err, &ue):
		// The request failed (the client's Do): no answer to speak of.
		return utcp.DoError(ctx, err, tool)
	}
	te := &utcp.TransportError{Tool: tool, Reason: utcp.ReasonAuth, Status: status}
	if status < 400 && (re != nil || strings.Contains(err.Error(), "missing access_token")) {
		te.Body = "no access_token in the token endpoint's answer"
	}
	return te
}

// tokenLifetime reads a token answer's expires_in (seconds, as a number or
// a string): DefaultTokenLifetime when it has none that is positive.
func tokenLifetime(expiresIn any) time.Duration {
	var secs float64
	switch v := expiresIn.(type) {
	case float64:
		secs = v
	case int64: // from a form-encoded answer
		secs = float64(v)
	case string:
		if d, err := time.ParseDuration(v + "s"); err == nil {
			secs = d.Seconds()
		}
	}
	if secs <= 0 {
		return DefaultTokenLifetime
	}
	return time.Duration(secs * float64(time.Second))
}

// tokenTransport is the registry's transport for token requests: it asks
// for JSON, reads each answer whole within maxTokenResponseBytes (as a
// provider's, into the call's memory budget; golang.org/x/oauth2 alone
// would read a megabyte and cut the rest), lets the library read a JSON
// answer as JSON whatever its Content-Type says, and keeps the status of
// the last answer.
type tokenTransport struct {
	base   http.RoundTripper
	tool   string
	status int
}

func (t *tokenTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Accept", "application/json")
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := utcp.ReadBody(req.Context(), resp.Body, -1, maxTokenResponseBytes, t.tool)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	t.status = resp.StatusCode
	if json.Valid(body) {
		resp.Header.Set("Content-Type", "application/json")
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	return resp, nil
}

// basicCredentials is what HTTP Basic auth sends for user and password
// (after "Basic ").
func basicCredentials(user, password string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
}
