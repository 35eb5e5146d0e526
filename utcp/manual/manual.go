package manual

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/exprd/exprd/internal/schemafast"
)

// Defaults a manual gets for what it leaves out.
const (
	DefaultUTCPVersion   = "1.0.0"
	DefaultManualVersion = "1.0.0"
)

// Manual is a UTCP manual: the tools one provider offers. Parse reads
// one; utcp's Registry.Register reads one from a URL, a file or inline text.
type Manual struct {
	UTCPVersion   string
	ManualVersion string
	Tools         []*Tool

	// converted: read from an OpenAPI document, whose operations that
	// need a variable the operator did not bind are skipped, not refused.
	converted bool
}

// Converted reports whether m was read from a converted document
// (ReadConverted): its tools that need a variable the operator has not
// bound are skipped at registration, not refused.
func (m *Manual) Converted() bool { return m.converted }

// Tool is one tool of a manual. After registration Name is the full name
// `<manual>.<tool>` (Registered). A Tool handed out by a Registry is
// shared: read it, never change it.
type Tool struct {
	Name                string
	Description         string
	Inputs              json.RawMessage // JSON Schema (draft 2020-12 unless it says otherwise)
	Outputs             json.RawMessage // JSON Schema
	Tags                []string
	AverageResponseSize *int64
	Template            *CallTemplate
	// Title is a name for people (an MCP tool's title); "" when none.
	Title string
	// Annotations are an MCP tool's hints of what it does; nil when the
	// provider gave none. They are the provider's word, not a guarantee.
	Annotations *ToolAnnotations

	manual     string
	inSchema   *jsonschema.Schema
	inFast     *schemafast.Schema // nil unless the input schema is simple
	outSchema  *jsonschema.Schema
	inputProps []string
}

// ToolAnnotations are an MCP tool's behaviour hints, as its server lists
// them. A nil hint was not given (MCP's defaults: not read-only,
// destructive, not idempotent, open world).
type ToolAnnotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    *bool  `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool  `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
}

// MarshalJSON writes the manual in the UTCP 1.x form.
func (m *Manual) MarshalJSON() ([]byte, error) {
	tools := m.Tools
	if tools == nil {
		tools = []*Tool{}
	}
	return json.Marshal(struct {
		UTCPVersion   string  `json:"utcp_version"`
		ManualVersion string  `json:"manual_version"`
		Tools         []*Tool `json:"tools"`
	}{m.UTCPVersion, m.ManualVersion, tools})
}

// MarshalJSON writes the tool in the UTCP 1.x form, its template as given
// (variables unresolved).
func (t *Tool) MarshalJSON() ([]byte, error) {
	var tmpl json.RawMessage
	if t.Template != nil {
		tmpl = t.Template.raw
	}
	tags := t.Tags
	if tags == nil {
		tags = []string{}
	}
	return json.Marshal(struct {
		Name                string           `json:"name"`
		Description         string           `json:"description"`
		Inputs              json.RawMessage  `json:"inputs,omitempty"`
		Outputs             json.RawMessage  `json:"outputs,omitempty"`
		Tags                []string         `json:"tags"`
		AverageResponseSize *int64           `json:"average_response_size,omitempty"`
		Template            json.RawMessage  `json:"tool_call_template,omitempty"`
		Title               string           `json:"title,omitempty"`
		Annotations         *ToolAnnotations `json:"annotations,omitempty"`
	}{t.Name, t.Description, t.Inputs, t.Outputs, tags, t.AverageResponseSize, tmpl, t.Title, t.Annotations})
}

// ManualName is the name of the manual the tool was registered with ("" before
// registration).
func (t *Tool) ManualName() string { return t.manual }

// Registered is a copy of t as a registry holds it: named by its full
// name, of the manual of that (sanitised) name.
func (t *Tool) Registered(manual, fullName string) *Tool {
	c := *t
	c.Name, c.manual = fullName, manual
	return &c
}

// InputProperties are the names of the input schema's top-level properties,
// sorted.
func (t *Tool) InputProperties() []string { return slices.Clone(t.inputProps) }

// ValidateArgs checks args against the tool's input schema; the error is an
// *InvalidArgumentsError.
func (t *Tool) ValidateArgs(args map[string]any) error {
	if t.inFast != nil && args != nil && isJSONValue(args) && t.inFast.Accepts(args) {
		return nil
	}
	return validateAgainst(t.inSchema, t.Name, args)
}

// CallTemplate says how to reach a tool (or, for registration, a manual). The
// common fields are parsed; the template's own fields stay in JSON() for its
// transport, with ${VAR} references unresolved.
type CallTemplate struct {
	Name             string
	Type             string // call_template_type (provider_type in the older go-utcp form)
	Auth             *Auth  // nil when the template has none
	AllowedProtocols []string
	Timeout          time.Duration // the template's `timeout`; 0 means the registry's default

	fields  map[string]any
	raw     json.RawMessage
	hasVars bool
}

// JSON returns the template as given (call_template_type normalised), with
// variables unresolved.
func (c *CallTemplate) JSON() json.RawMessage { return bytes.Clone(c.raw) }

// StringField is the template's field key when it is a string (an http
// template's "url"), variables unresolved; "" otherwise.
func (c *CallTemplate) StringField(key string) string {
	s, _ := c.fields[key].(string)
	return s
}

// Fields are the template's fields as decoded (call_template_type
// normalised), variables unresolved. They are shared: read them, never
// change them.
func (c *CallTemplate) Fields() map[string]any { return c.fields }

// HasVariables reports whether a string of the template refers to a
// variable (the package func HasVariables).
func (c *CallTemplate) HasVariables() bool { return c.hasVars }

// Keys of a manual and of a tool: anything else is refused, as the SDK's
// strict schemas do. `version`, `provider` and `tool_provider` are the older
// go-utcp form; `title` and `annotations` are an MCP tool's (exprd's own:
// the reference clients refuse them).
var (
	manualKeys = []string{"utcp_version", "manual_version", "tools", "version"}
	toolKeys   = []string{"name", "description", "inputs", "outputs", "tags", "average_response_size", "tool_call_template", "tool_provider", "provider", "title", "annotations"}
	// templateKeys hold a tool's call template, in order of preference.
	templateKeys = []string{"tool_call_template", "tool_provider", "provider"}
)

// Parse reads a UTCP manual (1.0/1.1, or the older go-utcp form) from
// JSON. It is strict: an unknown key on the manual or a tool, a missing or
// mistyped field, or a schema that does not compile is a *Error naming
// the JSON path. Unknown keys inside a call template are kept for its
// transport, which ignores them.
func Parse(data []byte) (*Manual, error) {
	v, err := DecodeJSON(data)
	if err != nil {
		return nil, &Error{Msg: err.Error()}
	}
	return FromValue(v)
}

// DecodeJSON decodes exactly one JSON value, numbers as json.Number.
func DecodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, describeJSONError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("not valid JSON: data after the first value")
	}
	return v, nil
}

func describeJSONError(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("not valid JSON at byte %d: %s", se.Offset, se.Error())
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("not valid JSON: unexpected end")
	}
	return fmt.Errorf("not valid JSON: %s", err.Error())
}

// FromValue reads a decoded manual (DecodeJSON's value) as Parse reads
// its JSON.
func FromValue(v any) (*Manual, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, &Error{Msg: "a manual must be a JSON object, got " + JSONKind(v)}
	}
	if err := checkKeys(obj, manualKeys, ""); err != nil {
		return nil, err
	}
	m := &Manual{UTCPVersion: DefaultUTCPVersion, ManualVersion: DefaultManualVersion}
	for _, k := range []string{"version", "utcp_version"} { // utcp_version wins over the older version
		if s, present, err := optString(obj, k, ""); err != nil {
			return nil, err
		} else if present {
			m.UTCPVersion = s
		}
	}
	if s, present, err := optString(obj, "manual_version", ""); err != nil {
		return nil, err
	} else if present {
		m.ManualVersion = s
	}
	rawTools, ok := obj["tools"]
	if !ok {
		return nil, &Error{Path: "tools", Msg: "missing"}
	}
	list, ok := rawTools.([]any)
	if !ok {
		return nil, &Error{Path: "tools", Msg: "must be an array, got " + JSONKind(rawTools)}
	}
	seen := make(map[string]int, len(list))
	nodes := 0 // the subschemas of the tools read so far
	for i, rt := range list {
		path := fmt.Sprintf("tools[%d]", i)
		if obj, ok := rt.(map[string]any); ok {
			for _, k := range []string{"inputs", "outputs"} {
				n, _ := schemaNodes(obj[k]) // one over MaxSchemaNodes is refused by its tool
				if nodes += n; nodes > MaxConvertedSchemaNodes {
					return nil, &Error{Path: path + "." + k, Msg: fmt.Sprintf(
						"the manual's tools hold more than %d subschemas between them (manual.MaxConvertedSchemaNodes)", MaxConvertedSchemaNodes)}
				}
			}
		}
		t, err := toolFromValue(rt, path)
		if err != nil {
			return nil, err
		}
		if j, dup := seen[t.Name]; dup {
			return nil, &Error{Path: path + ".name", Msg: fmt.Sprintf("%q is already the name of tools[%d]", t.Name, j)}
		}
		seen[t.Name] = i
		m.Tools = append(m.Tools, t)
	}
	return m, nil
}

func toolFromValue(v any, path string) (*Tool, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, &Error{Path: path, Msg: "a tool must be an object, got " + JSONKind(v)}
	}
	if err := checkKeys(obj, toolKeys, path); err != nil {
		return nil, err
	}
	t := &Tool{}
	name, present, err := optString(obj, "name", path)
	if err != nil {
		return nil, err
	}
	if !present {
		return nil, &Error{Path: JoinPath(path, "name"), Msg: "missing"}
	}
	if strings.TrimSpace(name) == "" {
		return nil, &Error{Path: JoinPath(path, "name"), Msg: "must not be empty"}
	}
	t.Name = name
	if t.Description, _, err = optString(obj, "description", path); err != nil {
		return nil, err
	}
	if t.Tags, err = optStrings(obj, "tags", path); err != nil {
		return nil, err
	}
	if t.Title, _, err = optString(obj, "title", path); err != nil {
		return nil, err
	}
	if t.Annotations, err = annotationsFromValue(obj["annotations"], JoinPath(path, "annotations")); err != nil {
		return nil, err
	}
	if n, ok := obj["average_response_size"]; ok && n != nil {
		num, isNum := n.(json.Number)
		size, convErr := num.Int64()
		if !isNum || convErr != nil || size < 0 {
			return nil, &Error{Path: JoinPath(path, "average_response_size"), Msg: "must be a non-negative integer"}
		}
		t.AverageResponseSize = &size
	}
	for _, k := range []string{"inputs", "outputs"} {
		doc, ok := obj[k]
		if !ok || doc == nil {
			doc = map[string]any{}
		}
		sch, raw, err := compileToolSchema(doc, JoinPath(path, k))
		if err != nil {
			return nil, err
		}
		if k == "inputs" {
			t.Inputs, t.inSchema = raw, sch
			t.inFast = schemafast.New(doc)
			t.inputProps = propertyNames(doc)
		} else {
			t.Outputs, t.outSchema = raw, sch
		}
	}
	var tmplKey string
	for _, k := range templateKeys {
		if _, ok := obj[k]; ok {
			if tmplKey != "" {
				return nil, &Error{Path: JoinPath(path, k), Msg: "a tool has one call template; " + tmplKey + " is already given"}
			}
			tmplKey = k
		}
	}
	if tmplKey == "" {
		return nil, &Error{Path: JoinPath(path, "tool_call_template"), Msg: "missing"}
	}
	if t.Template, err = templateFromValue(obj[tmplKey], JoinPath(path, tmplKey)); err != nil {
		return nil, err
	}
	return t, nil
}

// annotationKeys are the keys of a tool's annotations.
var annotationKeys = []string{"title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}

// annotationsFromValue reads a tool's annotations (nil when absent).
func annotationsFromValue(v any, path string) (*ToolAnnotations, error) {
	if v == nil {
		return nil, nil
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, &Error{Path: path, Msg: "must be an object, got " + JSONKind(v)}
	}
	if err := checkKeys(obj, annotationKeys, path); err != nil {
		return nil, err
	}
	a := &ToolAnnotations{}
	var err error
	if a.Title, _, err = optString(obj, "title", path); err != nil {
		return nil, err
	}
	for _, h := range []struct {
		key string
		dst **bool
	}{{"readOnlyHint", &a.ReadOnlyHint}, {"destructiveHint", &a.DestructiveHint}, {"idempotentHint", &a.IdempotentHint}, {"openWorldHint", &a.OpenWorldHint}} {
		x, ok := obj[h.key]
		if !ok || x == nil {
			continue
		}
		b, isBool := x.(bool)
		if !isBool {
			return nil, &Error{Path: JoinPath(path, h.key), Msg: "must be a boolean, got " + JSONKind(x)}
		}
		*h.dst = &b
	}
	return a, nil
}

func compileToolSchema(doc any, path string) (*jsonschema.Schema, json.RawMessage, error) {
	switch doc.(type) {
	case map[string]any, bool:
	default:
		return nil, nil, &Error{Path: path, Msg: "a JSON Schema must be an object or a boolean, got " + JSONKind(doc)}
	}
	sch, err := CompileSchema(doc)
	if err != nil {
		return nil, nil, &Error{Path: path, Msg: "invalid JSON Schema: " + err.Error()}
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, nil, &Error{Path: path, Msg: "cannot encode: " + err.Error()}
	}
	return sch, raw, nil
}

func propertyNames(doc any) []string {
	obj, _ := doc.(map[string]any)
	props, _ := obj["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// ParseCallTemplate reads one call template from JSON (for a manual's own
// template, or a tool's). Errors are *Error with the field's path.
func ParseCallTemplate(data []byte) (*CallTemplate, error) {
	v, err := DecodeJSON(data)
	if err != nil {
		return nil, &Error{Msg: err.Error()}
	}
	return templateFromValue(v, "")
}

func templateFromValue(v any, path string) (*CallTemplate, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, &Error{Path: path, Msg: "a call template must be an object, got " + JSONKind(v)}
	}
	fields := make(map[string]any, len(obj))
	for k, val := range obj {
		fields[k] = val
	}
	c := &CallTemplate{fields: fields}
	kind, present, err := optString(obj, "call_template_type", path)
	if err != nil {
		return nil, err
	}
	if !present {
		if kind, present, err = optString(obj, "provider_type", path); err != nil {
			return nil, err
		}
		if present {
			delete(fields, "provider_type")
			fields["call_template_type"] = kind
		}
	}
	if !present || kind == "" {
		return nil, &Error{Path: JoinPath(path, "call_template_type"), Msg: "missing"}
	}
	c.Type = kind
	if c.Name, _, err = optString(obj, "name", path); err != nil {
		return nil, err
	}
	if c.AllowedProtocols, err = optStrings(obj, "allowed_communication_protocols", path); err != nil {
		return nil, err
	}
	if a, ok := obj["auth"]; ok && a != nil {
		if c.Auth, err = parseAuth(a); err != nil {
			return nil, ErrorAt(err, JoinPath(path, "auth"))
		}
	}
	if to, ok := obj["timeout"]; ok && to != nil {
		if c.Timeout, err = parseTimeout(to); err != nil {
			return nil, &Error{Path: JoinPath(path, "timeout"), Msg: err.Error()}
		}
	}
	c.hasVars = containsVariables(fields)
	if c.raw, err = json.Marshal(fields); err != nil {
		return nil, &Error{Path: path, Msg: "cannot encode: " + err.Error()}
	}
	return c, nil
}

// MaxTemplateTimeout bounds a template's `timeout`.
const MaxTemplateTimeout = time.Hour

// parseTimeout reads a template's timeout: a number of milliseconds (the
// SDK's unit for streamable_http) or a Go duration string ("30s").
func parseTimeout(v any) (time.Duration, error) {
	var d time.Duration
	switch x := v.(type) {
	case json.Number:
		ms, err := x.Float64()
		if err != nil || math.IsNaN(ms) || ms <= 0 || ms > float64(MaxTemplateTimeout/time.Millisecond) {
			return 0, fmt.Errorf("must be a number of milliseconds in (0, %d]", MaxTemplateTimeout/time.Millisecond)
		}
		d = time.Duration(ms * float64(time.Millisecond))
	case string:
		var err error
		if d, err = time.ParseDuration(x); err != nil || d <= 0 || d > MaxTemplateTimeout {
			return 0, fmt.Errorf("must be a duration in (0, %s], got %q", MaxTemplateTimeout, x)
		}
	default:
		return 0, errors.New("must be a number of milliseconds or a duration string, got " + JSONKind(v))
	}
	return d, nil
}
