package openapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/exprd/exprd/internal/turns"
	"github.com/exprd/exprd/utcp/manual"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/httptransport"
	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi3"
)

// Options steer Convert.
type Options struct {
	// Manual names the generated call templates (the manual's name).
	Manual string
	// SpecURL is where the document was fetched from: relative server URLs
	// resolve against it, and a document fetched from a host that is not
	// loopback may not send calls to loopback. Empty for files and text.
	SpecURL string
	// BaseURL, when set, replaces the document's servers.
	BaseURL string
	// AuthTools is used as the auth of every operation that requires auth of
	// the same kind (the discovery template's auth_tools).
	AuthTools *manual.Auth
	// Headers are sent by every generated tool.
	Headers map[string]string
}

// maxSchemaDepth bounds the nesting of a converted schema, counted
// through its references: manual.MaxSchemaDepth, which every tool schema
// keeps as written, so that what converts also compiles.
const maxSchemaDepth = manual.MaxSchemaDepth

// openAPIMethods are the operations converted, in this order.
var openAPIMethods = []string{"get", "post", "put", "delete", "patch"}

// Converter is the utcp.Converter of OpenAPI 3 and Swagger 2 documents:
// utcp.WithConverter(openapi.Converter{}) lets a registry register them
// from a URL, a file or a discovery template.
type Converter struct{}

var _ utcp.Converter = Converter{}

// Converts reports whether doc is an OpenAPI document: an object with
// openapi, swagger or paths.
func (Converter) Converts(doc any) bool {
	obj, ok := doc.(map[string]any)
	if !ok {
		return false
	}
	for _, k := range []string{"openapi", "swagger", "paths"} {
		if _, ok := obj[k]; ok {
			return true
		}
	}
	return false
}

// Convert converts a decoded document as ConvertContext does.
func (Converter) Convert(ctx context.Context, doc any, opts utcp.ConvertOptions) (*manual.Manual, []manual.SkippedTool, error) {
	return convertValue(ctx, doc, Options{Manual: opts.Manual, SpecURL: opts.SpecURL, AuthTools: opts.AuthTools, Headers: opts.Headers})
}

// String names what the converter reads, for the registry's refusal of a
// document that is neither a manual nor OpenAPI.
func (Converter) String() string { return "an OpenAPI document (openapi, swagger or paths)" }

// Convert turns an OpenAPI 3 (or Swagger 2) document, JSON or YAML, into a
// UTCP manual the way the reference clients do (docs/utcp-compat.md#openapi):
// each operation with an operationId becomes a tool of that name, path and
// query parameters become inputs, header parameters become header_fields, and
// the request body becomes the `body` input sent as the body; the URL is
// servers[0] plus the path. Unlike the reference clients' templates, each
// carries the document's serialisation of its parameters in parameter_styles
// (style and explode; a Swagger 2 collectionFormat as its OpenAPI 3
// equivalent), so that an array is sent as the document says (`tags=a&tags=b`
// by default) rather than as `tags[]=a&tags[]=b`. Schemas are JSON Schema
// 2020-12, each carrying under $defs the document's components it reaches.
// Operations without an operationId are returned as skipped, and so are those
// that cannot be read (manual.ReadConverted). Errors are *manual.Error; a
// document whose conversion would pass its budget is a *TooLargeError, which
// is one too.
func Convert(data []byte, opts Options) (m *manual.Manual, skipped []manual.SkippedTool, err error) {
	return ConvertContext(context.Background(), data, opts)
}

// ConvertContext is Convert that stops when ctx ends, with ctx's error.
func ConvertContext(ctx context.Context, data []byte, opts Options) (m *manual.Manual, skipped []manual.SkippedTool, err error) {
	v, err := utcp.DecodeDocument(data, "", "")
	if err != nil {
		return nil, nil, &manual.Error{Manual: opts.Manual, Msg: err.Error()}
	}
	if !(Converter{}).Converts(v) {
		return nil, nil, &manual.Error{Manual: opts.Manual, Msg: "not an OpenAPI document (no openapi, swagger or paths)"}
	}
	return convertValue(ctx, v, opts)
}

func convertValue(ctx context.Context, v any, opts Options) (m *manual.Manual, skipped []manual.SkippedTool, err error) {
	// kin-openapi is third-party code fed untrusted documents: a panic in it
	// is a refused document, not a dead server.
	defer func() {
		if r := recover(); r != nil {
			m, skipped, err = nil, nil, &manual.Error{Manual: opts.Manual, Msg: "not a usable OpenAPI document"}
		}
	}()
	root, ok := v.(map[string]any)
	if !ok {
		return nil, nil, &manual.Error{Manual: opts.Manual, Msg: "an OpenAPI document must be an object"}
	}
	swagger2 := isSwagger2(root)
	root, raw, err := loadOpenAPI(root)
	if err != nil {
		return nil, nil, &manual.Error{Manual: opts.Manual, Msg: err.Error()}
	}
	if err := turns.Yield(ctx); err != nil {
		return nil, nil, err
	}
	// What kin-openapi finds wrong with an OpenAPI 3 document is the
	// reason given when nothing of it converts, and asked only then.
	refused := func() error {
		if swagger2 {
			return nil
		}
		if err := diagnose(raw); err != nil {
			return &manual.Error{Manual: opts.Manual, Msg: err.Error()}
		}
		return nil
	}
	c := &converter{ctx: ctx, root: root, opts: opts, swagger2: swagger2, schemas: newSchemaScope(ctx, root, opts.Manual),
		docBytes: len(raw), budget: ConvertedBudget(len(raw))}
	converted, skipped, err := c.convert()
	if ctxErr := ctx.Err(); ctxErr != nil {
		return nil, nil, ctxErr
	}
	var tooLarge *TooLargeError
	if err != nil && !errors.As(err, &tooLarge) {
		if why := refused(); why != nil {
			return nil, nil, why
		}
	}
	if err != nil {
		return nil, nil, err
	}
	m, more, err := manual.ReadConverted(ctx, converted, opts.Manual)
	if ctxErr := ctx.Err(); ctxErr != nil {
		return nil, nil, ctxErr
	}
	if err != nil || len(m.Tools) == 0 {
		// Nothing converted: what kin-openapi found wrong says why.
		if why := refused(); why != nil {
			return nil, nil, why
		}
	}
	if err != nil {
		return nil, nil, err
	}
	skipped = append(skipped, more...)
	if len(m.Tools) == 0 && len(skipped) > 0 {
		if why := refused(); why != nil {
			return nil, nil, why
		}
		return nil, nil, &manual.Error{Manual: opts.Manual, Msg: fmt.Sprintf("none of the document's %d operations could be converted; %s: %s",
			len(skipped), skipped[0].Name, skipped[0].Reason)}
	}
	return m, skipped, nil
}

// loadOpenAPI returns the document to convert, as decoded JSON, and the
// document as it was given, as JSON (what its conversion's budget is
// measured against, and what diagnose reads): Swagger 2 is turned into
// OpenAPI 3 (toV3; an error when it cannot be), OpenAPI 3 is converted as
// it is. A document nested deeper than MaxMeanDepth is refused before
// kin-openapi reads it.
func loadOpenAPI(root map[string]any) (out map[string]any, raw []byte, err error) {
	if raw, err = json.Marshal(root); err != nil {
		return nil, nil, err
	}
	if err := checkNesting(raw); err != nil {
		return nil, nil, err
	}
	if !isSwagger2(root) {
		return root, raw, nil
	}
	given := raw
	tuples := bytes.Contains(raw, []byte(`"items":[`))
	if tuples {
		tuplesAside(root, 0)
	}
	if marked := markCollectionFormats(root); tuples || marked {
		if raw, err = json.Marshal(root); err != nil {
			return nil, nil, err
		}
	}
	var doc2 openapi2.T
	if err := json.Unmarshal(raw, &doc2); err != nil {
		return nil, nil, fmt.Errorf("not a valid Swagger 2 document: %s", firstLine(err.Error()))
	}
	doc3, err := toV3(&doc2)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot convert Swagger 2: %s", firstLine(err.Error()))
	}
	raw3, err := json.Marshal(doc3)
	if err != nil {
		return nil, nil, err
	}
	v, err := utcp.DecodeDocument(raw3, "application/json", "")
	if err != nil {
		return nil, nil, err
	}
	out, _ = v.(map[string]any)
	return out, given, nil
}

// MaxDiagnosedBytes bounds the OpenAPI 3 documents kin-openapi reads for
// the reason one converts to nothing (a $ref that resolves nowhere, an
// external one, a field of the wrong type): its reading resolves each
// reference anew wherever it is met, in time that grows faster than the
// document. A larger document that converts to nothing is refused with
// the conversion's own reason (which operation, and why).
const MaxDiagnosedBytes = 256 << 10

// diagnose is what kin-openapi finds wrong with an OpenAPI 3 document
// (raw: JSON), nil when it finds nothing or the document is over
// MaxDiagnosedBytes.
func diagnose(raw []byte) error {
	if len(raw) > MaxDiagnosedBytes {
		return nil
	}
	doc := &openapi3.T{}
	err := json.Unmarshal(raw, doc) // JSON: kin-openapi's YAML reader is quadratic in a mapping's keys
	if err == nil {
		loader := openapi3.NewLoader()
		loader.IsExternalRefsAllowed = false
		err = loader.ResolveRefsIn(doc, nil)
	}
	if err != nil {
		return fmt.Errorf("not a valid OpenAPI document: %s", firstLine(err.Error()))
	}
	return nil
}

func isSwagger2(root map[string]any) bool {
	sw, ok := root["swagger"].(string)
	return ok && strings.HasPrefix(sw, "2")
}

type converter struct {
	ctx      context.Context
	root     map[string]any
	opts     Options
	swagger2 bool // converted from Swagger 2: parameters carry collectionFormatKey
	schemas  *schemaScope
	docBytes int // the document's, as JSON
	budget   int // what the converted manual may still take, in bytes
}

func (c *converter) convert() (map[string]any, []manual.SkippedTool, error) {
	base, err := c.baseURL()
	if err != nil {
		return nil, nil, err
	}
	paths, _ := c.root["paths"].(map[string]any)
	keys := slices.Sorted(maps.Keys(paths))
	var tools []any
	var skipped []manual.SkippedTool
	for _, p := range keys {
		item, _ := c.deref(paths[p]).(map[string]any)
		if item == nil {
			continue
		}
		for _, method := range openAPIMethods {
			op, ok := item[method].(map[string]any)
			if !ok {
				continue
			}
			if err := turns.Yield(c.ctx); err != nil {
				return nil, nil, err
			}
			where := fmt.Sprintf("paths[%q].%s", p, method)
			id, _ := op["operationId"].(string)
			if strings.TrimSpace(id) == "" {
				skipped = append(skipped, manual.SkippedTool{Name: strings.ToUpper(method) + " " + p, Reason: "no operationId"})
				continue
			}
			tool, dropped, err := c.tool(id, p, method, item, op, base, where)
			if ctxErr := c.ctx.Err(); ctxErr != nil {
				return nil, nil, ctxErr
			}
			var tooLarge *TooLargeError
			if errors.As(err, &tooLarge) {
				return nil, nil, err
			}
			if err != nil {
				var me *manual.Error
				reason := err.Error()
				if errors.As(err, &me) {
					reason = strings.TrimPrefix(strings.TrimPrefix(me.Path, where), ".") + ": " + me.Msg
				}
				skipped = append(skipped, manual.SkippedTool{Name: id, Reason: reason})
				continue
			}
			if dropped != "" {
				skipped = append(skipped, manual.SkippedTool{Name: id, Registered: true, Reason: "output schema dropped: " + dropped})
			}
			tools = append(tools, tool)
		}
	}
	if tools == nil {
		tools = []any{}
	}
	return map[string]any{"utcp_version": manual.DefaultUTCPVersion, "manual_version": c.manualVersion(), "tools": tools}, skipped, nil
}

func (c *converter) manualVersion() string {
	info, _ := c.root["info"].(map[string]any)
	if v, ok := info["version"].(string); ok && v != "" {
		return v
	}
	return manual.DefaultManualVersion
}

// serverVar matches {name} in a server URL.
var serverVar = regexp.MustCompile(`\{([^{}]+)\}`)

func (c *converter) baseURL() (string, error) {
	if c.opts.BaseURL != "" {
		return c.opts.BaseURL, nil
	}
	var base string
	if servers, ok := c.root["servers"].([]any); ok && len(servers) > 0 {
		s0, _ := servers[0].(map[string]any)
		base, _ = s0["url"].(string)
		vars, _ := s0["variables"].(map[string]any)
		base = serverVar.ReplaceAllStringFunc(base, func(m string) string {
			v, _ := vars[m[1:len(m)-1]].(map[string]any)
			if d, ok := v["default"].(string); ok {
				return d
			}
			return m
		})
	}
	spec, _ := url.Parse(c.opts.SpecURL)
	if spec != nil && spec.Host == "" {
		spec = nil
	}
	switch {
	case base == "" && spec == nil:
		return "", &manual.Error{Manual: c.opts.Manual, Path: "servers", Msg: "missing: the document names no server and was not fetched from a URL"}
	case base == "":
		base = spec.Scheme + "://" + spec.Host
	default:
		u, err := url.Parse(base)
		if err != nil {
			return "", &manual.Error{Manual: c.opts.Manual, Path: "servers[0].url", Msg: "not a URL"}
		}
		if !u.IsAbs() {
			if spec == nil {
				return "", &manual.Error{Manual: c.opts.Manual, Path: "servers[0].url", Msg: "relative, and the document was not fetched from a URL"}
			}
			u = spec.ResolveReference(u)
			base = u.String()
		}
		// A document from a remote host may not aim calls at our loopback
		// (GHSA-39j6-4867-gg4w).
		if spec != nil && !isLoopbackHost(spec.Hostname()) && isLoopbackHost(u.Hostname()) {
			return "", &manual.Error{Manual: c.opts.Manual, Path: "servers[0].url", Msg: "a document fetched from a remote host may not name a loopback server"}
		}
	}
	return base, nil
}

// deref follows a local $ref (once per level; cycles end at a depth bound).
func (c *converter) deref(v any) any {
	for range maxSchemaDepth {
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return v
		}
		target, ok := resolvePointer(c.root, ref)
		if !ok {
			return nil
		}
		v = target
	}
	return nil
}

// tool converts one operation. An output schema that cannot be converted
// is left out, and dropped says why. What the tool takes of the
// converted manual's budget is charged here: past it, a *TooLargeError.
func (c *converter) tool(id, path, method string, item, op map[string]any, base, where string) (tool map[string]any, dropped string, err error) {
	props := map[string]any{}
	var required []any
	var headerFields []any
	var inReach reached
	// Path-level parameters first; an operation's own replace those of the
	// same name and location.
	type paramKey struct{ name, in string }
	params := map[paramKey]map[string]any{}
	var order []paramKey
	for _, list := range []any{item["parameters"], op["parameters"]} {
		arr, _ := list.([]any)
		for _, p := range arr {
			pm, _ := c.deref(p).(map[string]any)
			name, _ := pm["name"].(string)
			in, _ := pm["in"].(string)
			if name == "" {
				continue
			}
			k := paramKey{name, in}
			if _, seen := params[k]; !seen {
				order = append(order, k)
			}
			params[k] = pm
		}
	}
	var styled []openAPIParam
	for _, k := range order {
		pm := params[k]
		if k.in == "cookie" {
			continue // not sent by the HTTP template; left out of the inputs
		}
		styled = append(styled, openAPIParam{name: k.name, in: k.in, def: pm})
		if k.in == "header" && !containsAny(headerFields, k.name) {
			headerFields = append(headerFields, k.name)
		}
		schemaNode := pm["schema"]
		if schemaNode == nil {
			if content, ok := pm["content"].(map[string]any); ok {
				for _, ct := range slices.Sorted(maps.Keys(content)) {
					if media, ok := content[ct].(map[string]any); ok {
						schemaNode = media["schema"]
						break
					}
				}
			}
		}
		pw := where + ".parameters." + k.name
		conv, err := c.schemas.convert(schemaNode, pw)
		if err != nil {
			return nil, "", err
		}
		if err := c.schemas.reach(conv, &inReach, pw); err != nil {
			return nil, "", err
		}
		prop := conv.schema
		if d, ok := pm["description"].(string); ok && d != "" {
			prop = withDescription(prop, d)
		}
		props[k.name] = prop
		if r, _ := pm["required"].(bool); r && !containsAny(required, k.name) {
			required = append(required, k.name)
		}
	}
	contentType := httptransport.DefaultContentType
	hasBody := false
	if rb, ok := c.deref(op["requestBody"]).(map[string]any); ok {
		content, _ := rb["content"].(map[string]any)
		ct, media := pickMedia(content, []string{"application/json", "+json", "application/x-www-form-urlencoded"})
		if media != nil {
			bw := where + ".requestBody"
			conv, err := c.schemas.convert(media["schema"], bw)
			if err != nil {
				return nil, "", err
			}
			if err := c.schemas.reach(conv, &inReach, bw); err != nil {
				return nil, "", err
			}
			desc, _ := rb["description"].(string)
			if desc == "" {
				desc = "Request body"
			}
			props[httptransport.DefaultBodyField] = withDescription(conv.schema, desc)
			if r, _ := rb["required"].(bool); r && !containsAny(required, httptransport.DefaultBodyField) {
				required = append(required, httptransport.DefaultBodyField)
			}
			hasBody = true
			if ct != "" && !strings.Contains(ct, "*") {
				contentType = ct
			}
		}
	}
	inputs := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		inputs["required"] = required
	}

	outputs := map[string]any{}
	var outReach reached
	if responses, ok := op["responses"].(map[string]any); ok {
		for _, code := range []string{"200", "201", "default"} {
			resp, ok := c.deref(responses[code]).(map[string]any)
			if !ok {
				continue
			}
			content, _ := resp["content"].(map[string]any)
			_, media := pickMedia(content, []string{"application/json", "+json", "text/plain"})
			if media != nil && media["schema"] != nil {
				ow := where + ".responses." + code
				conv, err := c.schemas.convert(media["schema"], ow)
				if err == nil {
					err = c.schemas.reach(conv, &outReach, ow)
				}
				if err := turns.Yield(c.ctx); err != nil {
					return nil, "", err
				}
				if err != nil {
					outReach = reached{}
					dropped = err.Error()
					var me *manual.Error
					if errors.As(err, &me) {
						dropped = me.Msg
					}
					break
				}
				if om, ok := conv.schema.(map[string]any); ok {
					outputs = om
				} else {
					outReach = reached{}
				}
			}
			break
		}
	}

	callURL := strings.TrimRight(base, "/") + "/" + strings.TrimLeft(path, "/")
	tmpl := map[string]any{
		"name":               c.opts.Manual,
		"call_template_type": utcp.TypeHTTP,
		"http_method":        strings.ToUpper(method),
		"url":                callURL,
		"content_type":       contentType,
	}
	bodyField := ""
	if hasBody {
		bodyField = httptransport.DefaultBodyField
		tmpl["body_field"] = bodyField
	}
	if styles := c.parameterStyles(styled, headerFields, bodyField, callURL); styles != nil {
		tmpl["parameter_styles"] = styles
	}
	if len(headerFields) > 0 {
		tmpl["header_fields"] = headerFields
	}
	if len(c.opts.Headers) > 0 {
		h := make(map[string]any, len(c.opts.Headers))
		for k, v := range c.opts.Headers {
			h[k] = v
		}
		tmpl["headers"] = h
	}
	if auth := c.auth(op); auth != nil {
		tmpl["auth"] = auth
	}
	desc := operationDescription(op)
	var tags []any
	if ts, ok := op["tags"].([]any); ok {
		for _, t := range ts {
			if s, ok := t.(string); ok {
				tags = append(tags, s)
			}
		}
	}
	tool = map[string]any{
		"name":               id,
		"description":        desc,
		"inputs":             inputs,
		"outputs":            outputs,
		"tool_call_template": tmpl,
	}
	if tags != nil {
		tool["tags"] = tags
	}
	if err := c.charge(tool, &inReach, &outReach); err != nil {
		return nil, "", err
	}
	c.schemas.attach(inputs, &inReach)
	c.schemas.attach(outputs, &outReach)
	return tool, dropped, nil
}

// charge takes what the tool will be as JSON, its $defs included, from
// the converted manual's budget: a *TooLargeError past it.
func (c *converter) charge(tool map[string]any, in, out *reached) error {
	raw, err := json.Marshal(tool) // before its $defs are attached
	if err != nil {
		return &manual.Error{Manual: c.opts.Manual, Msg: "cannot encode a converted tool: " + err.Error()}
	}
	size := len(raw) + in.size + out.size
	if size > c.budget {
		return &TooLargeError{Manual: c.opts.Manual, Limit: ConvertedBudget(c.docBytes), DocumentBytes: c.docBytes}
	}
	c.budget -= size
	return nil
}

// MaxDescriptionBytes bounds what a converted tool's description keeps
// of its operation's description.
const MaxDescriptionBytes = 1024

// operationDescription is what a converted tool says it does: the
// operation's summary, then, after a blank line, its description (the
// first MaxDescriptionBytes of it, cut at a word's end), or whichever of
// the two the operation has. The reference converters keep only the
// summary; the description is what tells a model, and search, what the
// operation is for when the summary is a title ("Rename a branch").
func operationDescription(op map[string]any) string {
	summary, _ := op["summary"].(string)
	long, _ := op["description"].(string)
	summary, long = strings.TrimSpace(summary), strings.TrimSpace(long)
	if len(long) > MaxDescriptionBytes {
		long = strings.TrimSpace(utcp.CutWords(long, MaxDescriptionBytes)) + " …"
	}
	switch {
	case summary == "" || summary == long:
		return long
	case long == "":
		return summary
	}
	return summary + "\n\n" + long
}

// pickMedia picks a media type by preference ("+json" matches any JSON
// suffix type), else the first one in name order.
func pickMedia(content map[string]any, prefs []string) (string, map[string]any) {
	if len(content) == 0 {
		return "", nil
	}
	keys := slices.Sorted(maps.Keys(content))
	for _, p := range prefs {
		for _, k := range keys {
			mt := strings.ToLower(strings.TrimSpace(strings.Split(k, ";")[0]))
			if mt == p || strings.HasPrefix(p, "+") && strings.HasSuffix(mt, p) {
				m, _ := content[k].(map[string]any)
				return mt, m
			}
		}
	}
	m, _ := content[keys[0]].(map[string]any)
	return strings.ToLower(strings.TrimSpace(strings.Split(keys[0], ";")[0])), m
}

func withDescription(schema any, desc string) any {
	m, ok := schema.(map[string]any)
	if !ok {
		if b, isBool := schema.(bool); isBool && b {
			return map[string]any{"description": desc}
		}
		return schema
	}
	if _, has := m["description"]; !has {
		m["description"] = desc
	}
	return m
}

func containsAny(list []any, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// resolvePointer follows a local JSON pointer ("#/a/b") in root.
func resolvePointer(root any, ref string) (any, bool) {
	if !strings.HasPrefix(ref, "#") {
		return nil, false
	}
	p := strings.TrimPrefix(ref, "#")
	if p == "" {
		return root, true
	}
	if !strings.HasPrefix(p, "/") {
		return nil, false
	}
	cur := root
	for _, tok := range strings.Split(p[1:], "/") {
		if t, err := url.PathUnescape(tok); err == nil {
			tok = t
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := cur.(type) {
		case map[string]any:
			v, ok := x[tok]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			var i int
			if _, err := fmt.Sscanf(tok, "%d", &i); err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			cur = x[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// isLoopbackHost reports whether host names this machine: localhost or a
// loopback address. The egress policy refuses loopback unless listed; this
// keeps a remote document from aiming at it even where it is listed.
func isLoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	return err == nil && a.Unmap().IsLoopback()
}

// firstLine is an error text's first line, bounded.
func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) <= 300 {
		return s
	}
	return utcp.CutRunes(s, 300) + "…"
}
