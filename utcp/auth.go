package utcp

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Auth types and api_key locations, as the SDK spells them.
const (
	AuthAPIKey = "api_key"
	AuthBasic  = "basic"
	AuthOAuth2 = "oauth2"

	LocationHeader = "header"
	LocationQuery  = "query"
	LocationCookie = "cookie"

	// DefaultAPIKeyName is api_key's var_name when none is given.
	DefaultAPIKeyName = "X-Api-Key"
)

// OAuth2 token cache settings.
const (
	// DefaultTokenLifetime is how long a token without expires_in is kept
	// (the SDK's value).
	DefaultTokenLifetime = time.Hour
	// TokenRefreshMargin: a token is fetched anew this long before it
	// expires (or at half its life, when that is shorter), so a request never
	// leaves with a token about to lapse.
	TokenRefreshMargin = 30 * time.Second
	// maxTokenResponseBytes bounds a token endpoint's answer.
	maxTokenResponseBytes = 64 << 10
)

// Auth is a call template's `auth`. Which fields count depends on Type.
type Auth struct {
	Type string `json:"auth_type"`

	APIKey   string `json:"api_key,omitempty"`
	VarName  string `json:"var_name,omitempty"`
	Location string `json:"location,omitempty"`

	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`

	TokenURL     string `json:"token_url,omitempty"`
	ClientID     string `json:"client_id,omitempty"`
	ClientSecret string `json:"client_secret,omitempty"`
	Scope        string `json:"scope,omitempty"`
}

// parseAuth reads an `auth` object (decoded JSON); errors are *FieldError
// relative to it. Unknown keys are ignored, as inside any call template.
func parseAuth(v any) (*Auth, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, &FieldError{Msg: "must be an object, got " + jsonKind(v)}
	}
	str := func(key string, required bool) (string, error) {
		x, ok := obj[key]
		if !ok || x == nil {
			if required {
				return "", &FieldError{Path: key, Msg: "missing"}
			}
			return "", nil
		}
		s, ok := x.(string)
		if !ok {
			return "", &FieldError{Path: key, Msg: "must be a string, got " + jsonKind(x)}
		}
		return s, nil
	}
	a := &Auth{}
	var err error
	if a.Type, err = str("auth_type", true); err != nil {
		return nil, err
	}
	switch a.Type {
	case AuthAPIKey:
		if a.APIKey, err = str("api_key", true); err != nil {
			return nil, err
		}
		if a.VarName, err = str("var_name", false); err != nil {
			return nil, err
		}
		if a.VarName == "" {
			a.VarName = DefaultAPIKeyName
		}
		if a.Location, err = str("location", false); err != nil {
			return nil, err
		}
		switch a.Location {
		case "":
			a.Location = LocationHeader
		case LocationHeader, LocationQuery, LocationCookie:
		default:
			return nil, &FieldError{Path: "location", Msg: `must be "header", "query" or "cookie", got "` + a.Location + `"`}
		}
	case AuthBasic:
		if a.Username, err = str("username", true); err != nil {
			return nil, err
		}
		if a.Password, err = str("password", true); err != nil {
			return nil, err
		}
	case AuthOAuth2:
		if a.TokenURL, err = str("token_url", true); err != nil {
			return nil, err
		}
		if a.ClientID, err = str("client_id", true); err != nil {
			return nil, err
		}
		if a.ClientSecret, err = str("client_secret", true); err != nil {
			return nil, err
		}
		if a.Scope, err = str("scope", false); err != nil {
			return nil, err
		}
	default:
		return nil, &FieldError{Path: "auth_type", Msg: `must be "api_key", "basic" or "oauth2", got "` + a.Type + `"`}
	}
	return a, nil
}

// applyAuth sets a request's credentials. An api_key in the query is
// returned (as key and value) so that it lands after the arguments, as the
// SDK sends it.
func applyAuth(ctx context.Context, req *http.Request, a *Auth, env Env, tool string) (queryKey, queryValue string, err error) {
	if a == nil {
		return "", "", nil
	}
	switch a.Type {
	case AuthAPIKey:
		if a.APIKey == "" {
			return "", "", &InvalidArgumentsError{Tool: tool, Problems: []string{"the api_key of the template's auth is empty"}}
		}
		if hasCRLF(a.APIKey) || hasCRLF(a.VarName) {
			return "", "", &InvalidArgumentsError{Tool: tool, Problems: []string{"the template's api_key contains CR or LF"}}
		}
		switch a.Location {
		case LocationQuery:
			return a.VarName, a.APIKey, nil
		case LocationCookie:
			req.Header.Add("Cookie", a.VarName+"="+a.APIKey)
		default:
			req.Header.Set(a.VarName, a.APIKey)
		}
	case AuthBasic:
		req.SetBasicAuth(a.Username, a.Password)
	case AuthOAuth2:
		tok, err := env.tokens.token(ctx, a, env, tool)
		if err != nil {
			return "", "", err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	return "", "", nil
}

func hasCRLF(s string) bool { return strings.ContainsAny(s, "\r\n") }

// tokenCache keeps OAuth2 client-credentials tokens per manual, token URL,
// client, scope and secret, and fetches each once however many calls wait
// for it. The manual and the secret are in the key so that a manual can
// only ever be handed a token it could have fetched with its own
// credentials: another manual naming the same token URL and client id
// (anyone can read them in a listed manual) must not get its token.
type tokenCache struct {
	mu      sync.Mutex
	entries map[tokenKey]*tokenEntry
	now     func() time.Time
}

type tokenKey struct {
	manual, url, client, scope string
	secret                     [32]byte // sha256 of the client secret
}

type tokenEntry struct {
	mu      sync.Mutex // held while fetching, so concurrent calls fetch once
	token   string
	refresh time.Time // fetch anew from this instant on
}

func newTokenCache() *tokenCache {
	return &tokenCache{entries: make(map[tokenKey]*tokenEntry), now: time.Now}
}

func (c *tokenCache) token(ctx context.Context, a *Auth, env Env, tool string) (string, error) {
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
	if e.token != "" && c.now().Before(e.refresh) {
		return e.token, nil
	}
	tok, life, err := fetchToken(ctx, a, env, tool)
	if err != nil {
		return "", err
	}
	margin := min(TokenRefreshMargin, life/2)
	e.token, e.refresh = tok, c.now().Add(life-margin)
	return tok, nil
}

// fetchToken runs the client-credentials flow: credentials in the form body
// first and, if the endpoint refuses them, as HTTP Basic (the SDK tries
// both).
func fetchToken(ctx context.Context, a *Auth, env Env, tool string) (string, time.Duration, error) {
	u, err := url.Parse(a.TokenURL)
	if err != nil {
		return "", 0, &TransportError{Tool: tool, Reason: ReasonAuth, cause: err}
	}
	if err := env.checkURL(u, tool); err != nil {
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
	var te *TransportError
	if !errors.As(err, &te) || te.Reason != ReasonAuth || te.Status == 0 {
		return "", 0, err
	}
	return postToken(ctx, u.String(), form, a, env, tool)
}

func postToken(ctx context.Context, tokenURL string, form url.Values, basic *Auth, env Env, tool string) (string, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return "", 0, &TransportError{Tool: tool, Reason: ReasonAuth, cause: err}
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if basic != nil {
		req.SetBasicAuth(url.QueryEscape(basic.ClientID), url.QueryEscape(basic.ClientSecret))
	}
	resp, err := env.HTTPClient.Do(req)
	if err != nil {
		return "", 0, classifyDoError(ctx, err, tool)
	}
	defer resp.Body.Close()
	body, err := readCapped(ctx, resp.Body, maxTokenResponseBytes, tool)
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
		return "", 0, &TransportError{Tool: tool, Reason: ReasonAuth, Status: resp.StatusCode, Body: shown}
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
