package manual

import "encoding/json"

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

// ParseAuth reads an `auth` object (an http template's auth or
// auth_tools) from JSON: nil when raw is empty or null. Errors are
// *FieldError relative to the object. Unknown keys are ignored, as inside
// any call template.
func ParseAuth(raw json.RawMessage) (*Auth, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	v, err := DecodeJSON(raw)
	if err != nil {
		return nil, &FieldError{Msg: err.Error()}
	}
	return parseAuth(v)
}

// parseAuth reads an `auth` object (decoded JSON); errors are *FieldError
// relative to it. Unknown keys are ignored, as inside any call template.
func parseAuth(v any) (*Auth, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, &FieldError{Msg: "must be an object, got " + JSONKind(v)}
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
			return "", &FieldError{Path: key, Msg: "must be a string, got " + JSONKind(x)}
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
