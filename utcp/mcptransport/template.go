package mcptransport

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/manual"
)

// Type is the call template type of MCP servers.
const Type = "mcp"

// Server transports, as a template's `transport` names them.
const (
	TransportHTTP  = "http"  // streamable HTTP (the SDK's StreamableClientTransport)
	TransportSSE   = "sse"   // the 2024-11-05 HTTP+SSE transport
	TransportStdio = "stdio" // a process on exprd's host, over its stdin and stdout
)

// template is an mcp call template: a manual's (every server) or a tool's
// (one server, the tool's name on it and the fingerprint of its registered
// definition).
type template struct {
	servers  map[string]*serverSpec
	names    []string // servers' names, sorted
	toolName string   // `tool_name`: the tool's name on its server
	finger   string   // `fingerprint`: of the definition registered
}

// serverSpec is one entry of config.mcpServers, variables resolved.
type serverSpec struct {
	name      string
	transport string
	// http, sse
	url     string
	headers map[string]string
	query   url.Values // an api_key auth sent in the query
	// stdio
	command string
	args    []string
	env     map[string]string
	cwd     string

	timeout time.Duration // the server's `timeout` (seconds), 0 when none
	key     string        // names the server's session in the pool
}

type rawTemplate struct {
	Config *struct {
		Servers map[string]json.RawMessage `json:"mcpServers"`
	} `json:"config"`
	Auth        json.RawMessage `json:"auth"`
	ToolName    *string         `json:"tool_name"`
	Fingerprint *string         `json:"fingerprint"`
}

type rawServer struct {
	Transport *string           `json:"transport"`
	URL       *string           `json:"url"`
	Headers   map[string]string `json:"headers"`
	Timeout   any               `json:"timeout"`
	Command   *string           `json:"command"`
	Args      []string          `json:"args"`
	Env       map[string]string `json:"env"`
	Cwd       *string           `json:"cwd"`
}

// parseTemplate reads a template (variables resolved) for env's manual:
// every refused field is a *manual.FieldError naming it. A stdio server is
// refused unless the manual is the operator's (utcp.Env.Operator).
func parseTemplate(raw json.RawMessage, env utcp.Env) (*template, error) {
	var rt rawTemplate
	if err := manual.DecodeFields(raw, &rt); err != nil {
		return nil, err
	}
	if rt.Config == nil {
		return nil, &manual.FieldError{Path: "config", Msg: `missing: give {"mcpServers": {"NAME": {...}}}`}
	}
	if len(rt.Config.Servers) == 0 {
		return nil, &manual.FieldError{Path: "config.mcpServers", Msg: "must name at least one server"}
	}
	auth, err := manual.ParseAuth(rt.Auth)
	if err != nil {
		if fe, ok := err.(*manual.FieldError); ok {
			return nil, fe.Under("auth")
		}
		return nil, err
	}
	if auth != nil && auth.Type == manual.AuthOAuth2 {
		return nil, &manual.FieldError{Path: "auth.auth_type", Msg: `oauth2 is not supported for mcp: send a token with api_key (var_name "Authorization", api_key "Bearer ${TOKEN}")`}
	}
	t := &template{servers: map[string]*serverSpec{}}
	for name, sraw := range rt.Config.Servers {
		path := "config.mcpServers." + name
		if name == "" || strings.ContainsAny(name, ". \t\n") {
			return nil, &manual.FieldError{Path: "config.mcpServers", Msg: fmt.Sprintf("%q: a server's name must be non-empty, without dots or spaces (tools are named <manual>.<server>.<tool>)", name)}
		}
		s, err := parseServer(name, sraw, auth, env)
		if err != nil {
			if fe, ok := err.(*manual.FieldError); ok {
				return nil, fe.Under(path)
			}
			return nil, err
		}
		t.servers[name] = s
		t.names = append(t.names, name)
	}
	slices.Sort(t.names)
	if rt.ToolName != nil {
		if *rt.ToolName == "" {
			return nil, &manual.FieldError{Path: "tool_name", Msg: "must not be empty"}
		}
		t.toolName = *rt.ToolName
	}
	if rt.Fingerprint != nil {
		t.finger = *rt.Fingerprint
	}
	return t, nil
}

func parseServer(name string, raw json.RawMessage, auth *manual.Auth, env utcp.Env) (*serverSpec, error) {
	var rs rawServer
	if err := manual.DecodeFields(raw, &rs); err != nil {
		return nil, err
	}
	s := &serverSpec{name: name}
	switch {
	case rs.Transport != nil:
		s.transport = *rs.Transport
	case rs.Command != nil:
		s.transport = TransportStdio
	default:
		s.transport = TransportHTTP
	}
	if rs.Timeout != nil {
		d, err := parseSeconds(rs.Timeout)
		if err != nil {
			return nil, &manual.FieldError{Path: "timeout", Msg: err.Error()}
		}
		s.timeout = d
	}
	switch s.transport {
	case TransportHTTP, TransportSSE:
		if rs.URL == nil || *rs.URL == "" {
			return nil, &manual.FieldError{Path: "url", Msg: "missing"}
		}
		if rs.Command != nil {
			return nil, &manual.FieldError{Path: "command", Msg: "only a stdio server has a command"}
		}
		u, err := url.Parse(*rs.URL)
		if err != nil || u.Host == "" {
			return nil, &manual.FieldError{Path: "url", Msg: "not an absolute URL"}
		}
		if err := checkURL(env, u); err != nil {
			return nil, err
		}
		s.url = u.String()
		s.headers = map[string]string{}
		for k, v := range rs.Headers {
			s.headers[k] = v
		}
		if err := applyAuth(s, auth); err != nil {
			return nil, err
		}
	case TransportStdio:
		if !env.Operator() {
			return nil, &manual.FieldError{Path: "transport", Msg: "a stdio MCP server runs a process on exprd's host: only the operator may configure one (a manual in --manuals-dir), never a manual registered over the API"}
		}
		if rs.Command == nil || *rs.Command == "" {
			return nil, &manual.FieldError{Path: "command", Msg: "missing"}
		}
		if rs.URL != nil || len(rs.Headers) > 0 {
			return nil, &manual.FieldError{Path: "url", Msg: "a stdio server has no url or headers"}
		}
		if auth != nil {
			return nil, &manual.FieldError{Path: "auth", Msg: "a stdio server takes no auth: give it what it needs in env"}
		}
		s.command, s.args, s.env = *rs.Command, rs.Args, rs.Env
		if rs.Cwd != nil {
			s.cwd = *rs.Cwd
		}
	default:
		return nil, &manual.FieldError{Path: "transport", Msg: fmt.Sprintf(`must be "http", "sse" or "stdio", got %q`, s.transport)}
	}
	key, _ := json.Marshal([]any{env.Manual, name, s.transport, s.url, s.headers, s.query, s.command, s.args, s.env, s.cwd})
	s.key = string(key)
	return s, nil
}

// checkURL refuses, as a field error, a URL the egress policy refuses
// before any DNS, and plain http:// to a host it does not list.
func checkURL(env utcp.Env, u *url.URL) error {
	if err := env.CheckHostField("url", u.Hostname()); err != nil {
		return err
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
	case "http":
		if !env.PlaintextAllowed(u.Hostname()) {
			return &manual.FieldError{Path: "url", Msg: "without TLS only the hosts the operator lists may be reached: use an https:// URL"}
		}
	default:
		return &manual.FieldError{Path: "url", Msg: "must be an http:// or https:// URL"}
	}
	return nil
}

// applyAuth turns a template's auth into what every request sends.
func applyAuth(s *serverSpec, a *manual.Auth) error {
	if a == nil {
		return nil
	}
	switch a.Type {
	case manual.AuthAPIKey:
		switch a.Location {
		case manual.LocationHeader:
			s.headers[a.VarName] = a.APIKey
		case manual.LocationCookie:
			s.headers["Cookie"] = a.VarName + "=" + a.APIKey
		case manual.LocationQuery:
			s.query = url.Values{a.VarName: {a.APIKey}}
		}
	case manual.AuthBasic:
		s.headers["Authorization"] = "Basic " + base64.StdEncoding.EncodeToString([]byte(a.Username+":"+a.Password))
	}
	return nil
}

// parseSeconds reads a server's `timeout`: seconds, as the reference
// clients write it, or a Go duration string.
func parseSeconds(v any) (time.Duration, error) {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || x <= 0 || x > manual.MaxTemplateTimeout.Seconds() {
			return 0, fmt.Errorf("must be a number of seconds in (0, %g]", manual.MaxTemplateTimeout.Seconds())
		}
		return time.Duration(x * float64(time.Second)), nil
	case string:
		d, err := time.ParseDuration(x)
		if err != nil || d <= 0 || d > manual.MaxTemplateTimeout {
			return 0, fmt.Errorf("must be a duration in (0, %s], got %q", manual.MaxTemplateTimeout, x)
		}
		return d, nil
	}
	return 0, fmt.Errorf("must be a number of seconds or a duration string")
}

// canonicalJSON re-encodes a JSON value with sorted keys, numbers as
// written: the form fingerprints are taken of.
func canonicalJSON(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}
