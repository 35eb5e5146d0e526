package openapi

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/exprd/exprd/utcp/manual"

	"github.com/exprd/exprd/utcp"
)

// auth builds a tool's auth from the operation's (or the document's)
// security requirement. Secrets are placeholders, one set per security
// scheme: ${<SCHEME>_API_KEY}, ${<SCHEME>_USERNAME} and _PASSWORD,
// ${<SCHEME>_CLIENT_ID} and _CLIENT_SECRET (SCHEME upper-cased, non-word
// characters as _), resolved per manual like every variable. When the
// discovery template's auth_tools is of the same kind, it is used instead.
func (c *converter) auth(op map[string]any) map[string]any {
	reqs, declared := op["security"].([]any)
	if !declared {
		reqs, _ = c.root["security"].([]any)
	}
	comps, _ := c.root["components"].(map[string]any)
	schemes, _ := comps["securitySchemes"].(map[string]any)
	for _, r := range reqs {
		req, _ := r.(map[string]any)
		for _, name := range slices.Sorted(maps.Keys(req)) {
			scheme, ok := c.deref(schemes[name]).(map[string]any)
			if !ok {
				continue
			}
			a := schemeAuth(name, scheme)
			if a == nil {
				continue
			}
			if compatibleAuth(a, c.opts.AuthTools) {
				return authMap(c.opts.AuthTools)
			}
			return authMap(a)
		}
	}
	return nil
}

func schemeAuth(name string, scheme map[string]any) *manual.Auth {
	prefix := strings.ToUpper(utcp.SanitizeManualName(name))
	ph := func(s string) string { return "${" + prefix + "_" + s + "}" }
	typ, _ := scheme["type"].(string)
	switch strings.ToLower(typ) {
	case "apikey":
		in, _ := scheme["in"].(string)
		if in == "" {
			in = manual.LocationHeader
		}
		varName, _ := scheme["name"].(string)
		if varName == "" {
			varName = "Authorization"
		}
		return &manual.Auth{Type: manual.AuthAPIKey, APIKey: ph("API_KEY"), VarName: varName, Location: in}
	case "basic":
		return &manual.Auth{Type: manual.AuthBasic, Username: ph("USERNAME"), Password: ph("PASSWORD")}
	case "http":
		switch s, _ := scheme["scheme"].(string); strings.ToLower(s) {
		case "basic":
			return &manual.Auth{Type: manual.AuthBasic, Username: ph("USERNAME"), Password: ph("PASSWORD")}
		case "bearer":
			return &manual.Auth{Type: manual.AuthAPIKey, APIKey: "Bearer " + ph("API_KEY"), VarName: "Authorization", Location: manual.LocationHeader}
		}
	case "oauth2":
		flows, _ := scheme["flows"].(map[string]any)
		for _, f := range []string{"clientCredentials", "authorizationCode", "password", "implicit"} {
			flow, _ := flows[f].(map[string]any)
			if tokenURL, _ := flow["tokenUrl"].(string); tokenURL != "" {
				scopes, _ := flow["scopes"].(map[string]any)
				return &manual.Auth{Type: manual.AuthOAuth2, TokenURL: tokenURL, ClientID: ph("CLIENT_ID"), ClientSecret: ph("CLIENT_SECRET"), Scope: strings.Join(slices.Sorted(maps.Keys(scopes)), " ")}
			}
		}
	}
	return nil
}

func compatibleAuth(a, tools *manual.Auth) bool {
	if tools == nil || a.Type != tools.Type {
		return false
	}
	if a.Type == manual.AuthAPIKey {
		return strings.EqualFold(a.VarName, tools.VarName) && a.Location == tools.Location
	}
	return true
}

func authMap(a *manual.Auth) map[string]any {
	raw, _ := json.Marshal(a)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return m
}
