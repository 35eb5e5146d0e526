package httptransport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/manual"
)

// HTTP template defaults, as the SDK's.
const (
	DefaultHTTPMethod  = http.MethodGet
	DefaultContentType = "application/json"
	DefaultBodyField   = "body"
)

// httpFields are the fields of the http, streamable_http and sse templates;
// each type reads the ones it has. Unknown fields are dropped.
type httpFields struct {
	URL          string          `json:"url"`
	Method       string          `json:"http_method"`
	ContentType  string          `json:"content_type"`
	Headers      map[string]any  `json:"headers"`
	HeaderFields []string        `json:"header_fields"`
	BodyField    json.RawMessage `json:"body_field"`
	Auth         json.RawMessage `json:"auth"`
	AuthTools    json.RawMessage `json:"auth_tools"`
	ChunkSize    *int            `json:"chunk_size"`
	EventType    *string         `json:"event_type"`
	// ParameterStyles is exprd's own: how an argument is serialised
	// (paramstyle.go). The reference clients drop it as an unknown key.
	ParameterStyles map[string]json.RawMessage `json:"parameter_styles"`
}

// httpSpec is a decoded, checked HTTP-family template.
type httpSpec struct {
	url          string
	method       string
	contentType  string
	headers      map[string]string
	headerFields []string
	bodyField    string // "" when the template maps no argument to the body
	auth         *manual.Auth
	authTools    *manual.Auth
	chunkSize    int
	eventType    string
	styles       map[string]paramStyle // by argument; nil for a native manual's template
	tokens       *tokenCache           // the registry's, for oauth2 auth

	static    *url.URL             // the parsed URL when it has no {param}
	staticErr *utcp.TransportError // why the policy refuses static, if it does
}

var httpMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch}

// decodeHTTPSpec reads the fields common to the HTTP family; methods lists the
// methods the type allows (nil: none, the type picks its own).
func decodeHTTPSpec(raw json.RawMessage, methods []string, defaultContentType string) (*httpSpec, error) {
	var f httpFields
	if err := manual.DecodeFields(raw, &f); err != nil {
		return nil, err
	}
	s := &httpSpec{
		url:          f.URL,
		method:       strings.ToUpper(f.Method),
		contentType:  f.ContentType,
		headerFields: f.HeaderFields,
		bodyField:    DefaultBodyField,
	}
	if strings.TrimSpace(s.url) == "" {
		return nil, &manual.FieldError{Path: "url", Msg: "missing"}
	}
	if param, ok := manual.PathParameterVariable(s.url); ok {
		// Quoted as the manual writes it: a variable's name, never its
		// value (the template is read before any is substituted).
		return nil, &manual.FieldError{Path: "url", Msg: fmt.Sprintf(
			"the path parameter %s holds a variable: a path parameter is named by the template and filled from the call's argument of that name, never from a variable", param)}
	}
	if methods != nil {
		if s.method == "" {
			s.method = DefaultHTTPMethod
		}
		if !slices.Contains(methods, s.method) {
			return nil, &manual.FieldError{Path: "http_method", Msg: fmt.Sprintf("must be one of %s, got %q", strings.Join(methods, ", "), f.Method)}
		}
	}
	if s.contentType == "" {
		s.contentType = defaultContentType
	}
	if len(f.Headers) > 0 {
		s.headers = make(map[string]string, len(f.Headers))
	}
	for k, v := range f.Headers {
		str, ok := v.(string)
		if !ok {
			return nil, &manual.FieldError{Path: manual.JoinPath("headers", k), Msg: "must be a string, got " + manual.JSONKind(v)}
		}
		if !httpguts.ValidHeaderFieldName(k) || !validHeaderValue(str) {
			return nil, &manual.FieldError{Path: manual.JoinPath("headers", k), Msg: "a header name must be a non-empty token and its value have no control character"}
		}
		s.headers[k] = str
	}
	if len(f.BodyField) > 0 {
		var bf *string
		if err := json.Unmarshal(f.BodyField, &bf); err != nil {
			return nil, &manual.FieldError{Path: "body_field", Msg: "must be a string or null"}
		}
		s.bodyField = ""
		if bf != nil {
			s.bodyField = *bf
		}
	}
	if err := s.decodeParamStyles(f.ParameterStyles); err != nil {
		return nil, err
	}
	var err error
	if s.auth, err = manual.ParseAuth(f.Auth); err != nil {
		return nil, prefixFieldErr(err, "auth")
	}
	if s.authTools, err = manual.ParseAuth(f.AuthTools); err != nil {
		return nil, prefixFieldErr(err, "auth_tools")
	}
	if f.ChunkSize != nil {
		if *f.ChunkSize <= 0 || *f.ChunkSize > MaxChunkSize {
			return nil, &manual.FieldError{Path: "chunk_size", Msg: fmt.Sprintf("must be in [1, %d]", MaxChunkSize)}
		}
		s.chunkSize = *f.ChunkSize
	}
	if f.EventType != nil {
		s.eventType = *f.EventType
	}
	return s, nil
}

func prefixFieldErr(err error, path string) error {
	var fe *manual.FieldError
	if errors.As(err, &fe) {
		return fe.Under(path)
	}
	return &manual.FieldError{Path: path, Msg: err.Error()}
}

// buildRequest maps a call's arguments onto a request exactly as the reference
// clients do (docs/utcp-compat.md#the-http-template), in this order:
// header_fields, then body_field, then {param} path parameters, then
// everything left as query parameters (for every method). An argument the
// template gives a parameter style is written in that style instead
// (paramstyle.go).
func buildRequest(ctx context.Context, s *httpSpec, method string, args map[string]any, env utcp.Env, tool string) (*http.Request, error) {
	// consumed holds the arguments taken by headers, the body and the path;
	// the rest go to the query.
	var consumedBuf [8]string
	consumed := consumedBuf[:0]
	type header struct{ k, v string }
	var hfBuf [4]header
	hfs := hfBuf[:0]
	for _, name := range s.headerFields {
		v, ok := args[name]
		if !ok || slices.Contains(consumed, name) {
			continue
		}
		consumed = append(consumed, name)
		str := jsString(v)
		if st, styled := s.styles[name]; styled {
			if v == nil {
				continue // undefined: no header, as RFC 6570 expands nothing
			}
			str = styledHeader(v, st)
		}
		if !validHeaderValue(str) {
			return nil, &manual.InvalidArgumentsError{Tool: tool, Problems: []string{fmt.Sprintf("at /%s: a header value must not contain a control character", name)}}
		}
		hfs = append(hfs, header{name, str})
	}
	var body []byte
	hasBody := false
	if s.bodyField != "" && !slices.Contains(consumed, s.bodyField) {
		if v, ok := args[s.bodyField]; ok {
			consumed = append(consumed, s.bodyField)
			if v != nil {
				var err error
				if body, err = encodeBody(v, s.contentType); err != nil {
					return nil, &manual.InvalidArgumentsError{Tool: tool, Problems: []string{fmt.Sprintf("at /%s: %v", s.bodyField, err)}}
				}
				hasBody = true
			}
		}
	}
	var u *url.URL
	if s.static != nil {
		if s.staticErr != nil {
			e := *s.staticErr
			e.Tool = tool
			return nil, &e
		}
	} else {
		rawURL, err := expandPathParams(s.url, args, s.styles, &consumed, tool)
		if err != nil {
			return nil, err
		}
		if u, err = url.Parse(rawURL); err != nil {
			return nil, (&utcp.TransportError{Tool: tool, Reason: utcp.ReasonInsecureURL}).WithCause(err)
		}
		if err := env.CheckURL(u, tool); err != nil {
			return nil, err
		}
		u.Fragment, u.RawFragment = "", ""
	}
	var rd io.Reader
	if hasBody {
		rd = bytes.NewReader(body)
	}
	// The URL is already parsed: the request is built around it rather than
	// from its text.
	req, err := http.NewRequestWithContext(ctx, method, "", rd)
	if err != nil {
		return nil, (&utcp.TransportError{Tool: tool, Reason: utcp.ReasonUnreachable}).WithCause(err)
	}
	if u == nil {
		*req.URL = *s.static
	} else {
		req.URL = u
	}
	req.Host = req.URL.Host
	hdr := req.Header
	for k, v := range s.headers {
		hdr.Set(k, v)
	}
	for _, h := range hfs {
		hdr.Set(h.k, h.v)
	}
	if hasBody && hdr.Get("Content-Type") == "" {
		hdr.Set("Content-Type", s.contentType)
	}
	qk, qv, err := applyAuth(ctx, req, s.auth, s.tokens, env, tool)
	if err != nil {
		return nil, err
	}
	var q queryBuilder
	q.b.Grow(len(req.URL.RawQuery) + 16*len(args) + len(qk) + len(qv))
	q.b.WriteString(req.URL.RawQuery)
	var keyBuf [16]string
	keys := keyBuf[:0]
	for k := range args {
		if !slices.Contains(consumed, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if st, styled := s.styles[k]; styled {
			q.addStyled(k, args[k], st)
		} else {
			q.addValue(k, args[k])
		}
	}
	if qk != "" {
		q.add(qk, qv)
	}
	req.URL.RawQuery = q.b.String()
	return req, nil
}

// prepareStaticURL parses and checks a template URL without path
// parameters once, so that a call need not. A host the egress policy
// refuses before any DNS (an IP literal such as 169.254.169.254) refuses
// the template itself: a *FieldError naming url, at registration. Other
// refusals (plain http:// to an unlisted host) are kept for each call.
func (s *httpSpec) prepareStaticURL(env utcp.Env) error {
	if strings.Contains(s.url, "{") {
		return nil
	}
	u, err := url.Parse(s.url)
	if err != nil {
		return nil // reported on each call by the slow path
	}
	if cerr := env.CheckURL(u, ""); cerr != nil {
		var te *utcp.TransportError
		if errors.As(cerr, &te) {
			if te.Reason == utcp.ReasonEgress {
				return env.CheckHostField("url", u.Hostname())
			}
			s.staticErr = te
		}
	}
	u.Fragment, u.RawFragment = "", ""
	s.static = u
	return nil
}

// pathParam matches {name} in a URL template.
var pathParam = regexp.MustCompile(`\{([^{}]+)\}`)

// expandPathParams replaces each {name} with the URL-encoded argument (in
// its parameter style, when it has one) and marks it consumed; a missing
// one is an error before anything is sent. Every {name} of tmpl is the
// template's own: the registry writes a variable's braces as %7B and %7D
// (and refuses a variable inside a {name}), so the names quoted in its
// errors are never text of a variable's value.
func expandPathParams(tmpl string, args map[string]any, styles map[string]paramStyle, consumed *[]string, tool string) (string, error) {
	if !strings.Contains(tmpl, "{") {
		return tmpl, nil
	}
	taken := *consumed // by header_fields and the body, which come first
	var missing, used, dots []string
	out := pathParam.ReplaceAllStringFunc(tmpl, func(m string) string {
		name := m[1 : len(m)-1]
		v, ok := args[name]
		if !ok || slices.Contains(taken, name) {
			if !slices.Contains(missing, name) {
				missing = append(missing, name)
			}
			return m
		}
		if !slices.Contains(used, name) {
			used = append(used, name)
		}
		var seg string
		if st, styled := styles[name]; styled {
			seg = styledPath(name, v, st)
		} else {
			seg = encodeURIComponent(jsString(v))
		}
		// encodeURIComponent keeps dots, as the reference clients do;
		// a value of "." or ".." would be a dot segment, which the
		// provider resolves to this path or the one above it.
		if seg == "." || seg == ".." {
			dots = append(dots, name)
		}
		return seg
	})
	if len(missing) > 0 || len(dots) > 0 {
		var probs []string
		for _, n := range missing {
			probs = append(probs, fmt.Sprintf("missing path parameter %q", n))
		}
		for _, n := range dots {
			probs = append(probs, fmt.Sprintf("at /%s: a path parameter cannot be \".\" or \"..\"", n))
		}
		return "", &manual.InvalidArgumentsError{Tool: tool, Problems: probs}
	}
	*consumed = append(*consumed, used...)
	return out, nil
}

// encodeBody encodes the body argument for the template's content type:
// JSON unless the type is form-encoded or the value is a string for a
// non-JSON type. A string for a JSON type is sent as is when it already is
// JSON text (as axios does), else JSON-encoded.
func encodeBody(v any, contentType string) ([]byte, error) {
	mt := mediaType(contentType)
	switch {
	case isJSONMediaType(mt) || mt == "":
		if s, ok := v.(string); ok && json.Valid([]byte(s)) {
			return []byte(s), nil
		}
		return json.Marshal(v)
	case mt == "application/x-www-form-urlencoded":
		if s, ok := v.(string); ok {
			return []byte(s), nil
		}
		obj, ok := v.(map[string]any)
		if !ok {
			return json.Marshal(v)
		}
		q := &queryBuilder{}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			q.addValue(k, obj[k])
		}
		return []byte(q.b.String()), nil
	default:
		switch x := v.(type) {
		case string:
			return []byte(x), nil
		case []byte:
			return x, nil
		}
		return json.Marshal(v)
	}
}

// mediaType is the lower-cased type/subtype of a Content-Type, without
// parameters (mime.ParseMediaType allocates a map for them).
func mediaType(ct string) string {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	ct = strings.TrimSpace(ct)
	for i := 0; i < len(ct); i++ {
		if c := ct[i]; c >= 'A' && c <= 'Z' {
			return strings.ToLower(ct)
		}
	}
	return ct
}

func isJSONMediaType(mt string) bool {
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}
