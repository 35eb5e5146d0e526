package utcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v4"

	"github.com/exprd/exprd/internal/turns"
	"github.com/exprd/exprd/membudget"
	"github.com/exprd/exprd/utcp/manual"
)

// Source is where Registry.Register reads a manual from. Build one with
// FromURL, FromFile, FromText, FromTemplate or FromManual.
type Source struct {
	kind     sourceKind
	location string
	content  string
	template json.RawMessage
	manual   *manual.Manual
	allowed  []string
}

type sourceKind int

const (
	sourceURL sourceKind = iota + 1
	sourceFile
	sourceText
	sourceTemplate
	sourceManual
)

// FromURL reads the manual at a URL: a GET whose response is a UTCP manual,
// or a document the registry's Converter reads (an OpenAPI 3 or Swagger 2
// document, in JSON or YAML), converted. It is the http call template
// {"call_template_type": "http", "url": u}, so the registry needs an http
// transport; like any http template, its tools must be `http` unless
// AllowProtocols says more.
func FromURL(u string) Source { return Source{kind: sourceURL, location: u} }

// FromFile reads a manual, or a document the registry's Converter reads,
// from a file (JSON or YAML).
// The operator wrote it, so its tools may use any registered transport unless
// AllowProtocols narrows them. The manual's name defaults to the file's base
// name without its extension.
func FromFile(path string) Source { return Source{kind: sourceFile, location: path} }

// FromText registers an inline manual: the text call template
// {"call_template_type": "text", "content": content}. As in the SDK its
// allowed protocols default to ["text"], so a manual of http tools needs
// AllowProtocols("http"); exprd refuses (rather than silently registering
// nothing) when every tool is filtered out.
func FromText(content string) Source { return Source{kind: sourceText, content: content} }

// FromTemplate registers through a manual call template of any registered
// type whose transport can discover (http, text, grpc). The
// template's name names the manual unless Register is given one; its
// allowed_communication_protocols (default: its own type) filter the tools.
func FromTemplate(template json.RawMessage) Source {
	return Source{kind: sourceTemplate, template: template}
}

// FromManual registers a manual already parsed (or built in code). Its tools
// may use any registered transport unless AllowProtocols narrows them.
func FromManual(m *manual.Manual) Source { return Source{kind: sourceManual, manual: m} }

// AllowProtocols sets the call template types the source's tools may use,
// replacing the default.
func (s Source) AllowProtocols(types ...string) Source {
	s.allowed = append([]string{}, types...)
	return s
}

// callTemplate returns the source's manual call template, nil for files and
// parsed manuals.
func (s Source) callTemplate() (*manual.CallTemplate, error) {
	var raw []byte
	switch s.kind {
	case sourceURL:
		raw, _ = json.Marshal(map[string]any{"call_template_type": TypeHTTP, "url": s.location, "http_method": http.MethodGet})
	case sourceText:
		raw, _ = json.Marshal(map[string]any{"call_template_type": TypeText, "content": s.content})
	case sourceTemplate:
		raw = s.template
	default:
		return nil, nil
	}
	return manual.ParseCallTemplate(raw)
}

// DecodeDocument decodes a discovered document as the registry does: YAML
// when its media type or location says so, else JSON, else YAML (any YAML:
// keys the manual does not know are left to the manual's own checks).
// Numbers come back as json.Number.
func DecodeDocument(data []byte, mediaType, location string) (any, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("the document is empty")
	}
	yamlFirst := strings.Contains(mediaType, "yaml") || hasYAMLExt(location)
	if !yamlFirst {
		v, jsonErr := manual.DecodeJSON(data)
		if jsonErr == nil {
			return v, nil
		}
		if t := bytes.TrimSpace(data); t[0] == '{' || t[0] == '[' {
			return nil, jsonErr
		}
	}
	return decodeYAML(data)
}

func hasYAMLExt(loc string) bool {
	if i := strings.IndexAny(loc, "?#"); i >= 0 {
		loc = loc[:i]
	}
	ext := strings.ToLower(filepath.Ext(loc))
	return ext == ".yaml" || ext == ".yml"
}

func decodeYAML(data []byte) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, errors.New("not valid YAML")
		}
	}()
	var raw any
	// The first document only, as yaml.Unmarshal reads. Duplicate keys are
	// not looked for: the YAML reader does it by comparing every key of a
	// mapping with every other, which made a document of 40,000 keys take
	// 16 s. A key given twice keeps its last value, as in JSON.
	l, err := yaml.NewLoader(bytes.NewReader(data), yaml.WithV3Defaults(), yaml.WithUniqueKeys(false), yaml.WithSingleDocument())
	if err == nil {
		err = l.Load(&raw)
	}
	if err != nil {
		return nil, fmt.Errorf("neither valid JSON nor valid YAML: %s", firstLine(err.Error()))
	}
	return yamlToJSON(raw, 0)
}

// yamlToJSON turns a YAML value into what manual.DecodeJSON would give.
func yamlToJSON(v any, depth int) (any, error) {
	if depth > 512 {
		return nil, errors.New("YAML nested too deep")
	}
	switch x := v.(type) {
	case nil, bool, string:
		return x, nil
	case int:
		return json.Number(strconv.Itoa(x)), nil
	case int64:
		return json.Number(strconv.FormatInt(x, 10)), nil
	case uint64:
		return json.Number(strconv.FormatUint(x, 10)), nil
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return nil, errors.New("YAML number is not finite")
		}
		return json.Number(strconv.FormatFloat(x, 'g', -1, 64)), nil
	case time.Time:
		return x.Format(time.RFC3339Nano), nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			c, err := yamlToJSON(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			c, err := yamlToJSON(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			c, err := yamlToJSON(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[fmt.Sprint(k)] = c
		}
		return out, nil
	default:
		return fmt.Sprint(x), nil
	}
}

// isManual tells a UTCP manual from other documents, as the reference
// clients do: a manual has a non-empty utcp_version (or the older
// `version`) and a tools array.
func isManual(v any) bool {
	obj, ok := v.(map[string]any)
	if !ok {
		return false
	}
	_, toolsIsArray := obj["tools"].([]any)
	for _, k := range []string{"utcp_version", "version"} {
		if s, ok := obj[k].(string); ok && s != "" && toolsIsArray {
			return true
		}
	}
	return false
}

// manualFromDocument reads a discovered document as a manual, or through
// the registry's converter.
func (r *Registry) manualFromDocument(ctx context.Context, doc *Document, opts ConvertOptions) (m *manual.Manual, skipped []manual.SkippedTool, err error) {
	// For a caller's request, what reading and converting it builds is
	// held in the memory budget until it is done, as a tool's answer is
	// while it is read (four registrations of hostile OpenAPI documents of
	// 0.4-0.5 MB took a process 190 MB past its idle size, which no budget
	// knew of); the operator's manuals (--manuals-dir) and a replica
	// reading what another registered are not a caller's.
	caller := membudget.CallerOf(ctx)
	if caller != "" {
		mem, err := r.cfg.memory.Reserve(ctx, "the provider's document", DocumentMemory(len(doc.Body)))
		if err != nil {
			return nil, nil, err
		}
		defer mem.Release()
	}
	// It computes for up to seconds (a provider's document, so a
	// caller's): it takes the caller's turns, as a program does
	// (turns.Compute).
	err = turns.Compute(ctx, caller, func(ctx context.Context) error {
		var err error
		m, skipped, err = r.readDocument(ctx, doc, opts)
		return err
	})
	return m, skipped, err
}

// DocumentMemory is what reading a discovered document of n bytes and
// converting it to a manual reserves from the memory budget while it
// runs: 48 bytes a byte, and 4 MiB besides for a small document. The
// heap's peak while one converts, garbage not yet collected included, was
// 16 (Twilio), 28 (OpenAI), 46 (GitHub) and 52 (a hostile document of
// shared schemas, stopped at openapi.MaxExpansion) bytes a byte of it.
func DocumentMemory(n int) int64 { return 48*int64(n) + 4<<20 }

// readDocument is manualFromDocument on a turn.
func (r *Registry) readDocument(ctx context.Context, doc *Document, opts ConvertOptions) (*manual.Manual, []manual.SkippedTool, error) {
	v, err := DecodeDocument(doc.Body, doc.ContentType, doc.Location)
	if err != nil {
		return nil, nil, &manual.Error{Manual: opts.Manual, Msg: err.Error()}
	}
	conv := r.cfg.converter
	switch {
	case isManual(v):
		m, err := manual.FromValue(v)
		if err != nil {
			var me *manual.Error
			if errors.As(err, &me) {
				me.Manual = opts.Manual
			}
			return nil, nil, err
		}
		return m, nil, nil
	case conv != nil && conv.Converts(v):
		return conv.Convert(ctx, v, opts)
	case conv == nil:
		return nil, nil, &manual.Error{Manual: opts.Manual, Msg: "not a UTCP manual (utcp_version and tools), and this registry converts no other documents"}
	default:
		what := "a document this registry converts"
		if s, ok := conv.(fmt.Stringer); ok {
			what = s.String()
		}
		return nil, nil, &manual.Error{Manual: opts.Manual, Msg: "neither a UTCP manual (utcp_version and tools) nor " + what}
	}
}

// firstLine is an error text's first line, bounded.
func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return truncate(s, 300)
}

// readFileCapped reads a file of at most limit bytes.
func readFileCapped(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("over %d bytes", limit)
	}
	return data, nil
}

// discover fetches and reads the manual a source names.
func (r *Registry) discover(ctx context.Context, name string, src Source, tmpl *manual.CallTemplate, env Env) (*manual.Manual, []manual.SkippedTool, error) {
	switch src.kind {
	case sourceManual:
		if src.manual == nil {
			return nil, nil, &manual.Error{Manual: name, Msg: "no manual given"}
		}
		raw, err := json.Marshal(src.manual)
		if err != nil {
			return nil, nil, &manual.Error{Manual: name, Msg: "cannot encode the manual: " + err.Error()}
		}
		m, err := manual.Parse(raw)
		if err != nil {
			var me *manual.Error
			if errors.As(err, &me) {
				me.Manual = name
			}
			return nil, nil, err
		}
		return m, nil, nil
	case sourceFile:
		data, err := readFileCapped(src.location, r.cfg.maxResponse)
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, nil, &manual.Error{Manual: name, Msg: "cannot read " + filepath.Base(src.location) + ": " + err.Error()}
		}
		return r.manualFromDocument(ctx, &Document{Body: data, Location: src.location}, ConvertOptions{Manual: name})
	}
	fields := tmpl.Fields()
	var content any
	if tmpl.Type == TypeText {
		// An inline manual's own templates are resolved on each call, in
		// their own time: only the template around it is resolved here.
		fields = make(map[string]any, len(tmpl.Fields()))
		for k, v := range tmpl.Fields() {
			fields[k] = v
		}
		content = fields["content"]
		delete(fields, "content")
	}
	if err := r.variables.CheckBound(fields, name, ""); err != nil {
		return nil, nil, err
	}
	resolved, err := r.variables.SubstituteTemplate(fields, name)
	if err != nil {
		return nil, nil, err
	}
	if content != nil {
		resolved["content"] = content
	}
	raw, err := json.Marshal(resolved)
	if err != nil {
		return nil, nil, &manual.Error{Manual: name, Msg: err.Error()}
	}
	f := r.factories[tmpl.Type]
	if f == nil {
		return nil, nil, &manual.Error{Manual: name, Path: "call_template_type", Msg: fmt.Sprintf("no transport for type %q", tmpl.Type)}
	}
	tr, err := f(raw, env)
	if err != nil {
		return nil, nil, prefixWithManual(manual.ErrorAt(err, ""), name)
	}
	d, ok := tr.(Discoverer)
	if !ok {
		return nil, nil, &manual.Error{Manual: name, Path: "call_template_type", Msg: fmt.Sprintf("a %q template cannot be registered: its transport does not discover manuals", tmpl.Type)}
	}
	timeout := tmpl.Timeout
	if timeout == 0 {
		timeout = r.cfg.timeout
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	doc, err := d.Discover(dctx)
	if err != nil {
		if ctx.Err() == nil && dctx.Err() == context.DeadlineExceeded {
			return nil, nil, &TimeoutError{Tool: name, Timeout: timeout}
		}
		return nil, nil, err
	}
	opts := ConvertOptions{Manual: name, AuthTools: doc.AuthTools, Headers: doc.Headers}
	if src.kind != sourceText && tmpl.Type != TypeText {
		opts.SpecURL = doc.Location
	}
	return r.manualFromDocument(ctx, doc, opts)
}

func prefixWithManual(err error, name string) error {
	var me *manual.Error
	if errors.As(err, &me) {
		me.Manual = name
	}
	return err
}
