package utcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/exprd/exprd/internal/schemafast"
	"github.com/exprd/exprd/utcp/internal/utcptest"
	"github.com/exprd/exprd/utcp/manual"
)

// argTools are FuzzCallArguments' tools: an input schema and an http
// template each. The first two have the fast path's simple shape; the
// others go to the validator.
var argTools = []struct {
	name, inputs string
	template     map[string]any // url is relative to the provider
}{
	{"typed", `{"type": "object", "properties": {"id": {"type": "string"}, "n": {"type": "integer"}, "x": {"type": "number"},
		"ok": {"type": "boolean"}, "tags": {"type": "array"}, "meta": {"type": "object"}, "none": {"type": "null"}, "any": {}},
		"required": ["id"], "additionalProperties": false}`,
		map[string]any{"url": "/items/{id}"}},
	{"open", `{"type": "object", "properties": {"q": {"type": "string", "description": "what to find"}, "limit": {"type": "integer"}}}`,
		map[string]any{"url": "/search", "header_fields": []any{"q"}}},
	{"bounded", `{"type": "object", "properties": {"q": {"type": "string", "minLength": 1, "pattern": "^[a-z ]+$"},
		"limit": {"type": "integer", "minimum": 1, "maximum": 100}, "when": {"type": ["string", "null"], "enum": ["now", "later", null]}},
		"required": ["q"]}`,
		map[string]any{"url": "/search"}},
	{"body", `{"type": "object", "properties": {"body": {"type": "object", "properties": {"name": {"type": "string"}},
		"required": ["name"]}, "dry": {"type": "boolean"}}, "required": ["body"]}`,
		map[string]any{"url": "/things", "http_method": "POST", "body_field": "body"}},
	{"nested", `{"type": "object", "properties": {"points": {"type": "array", "maxItems": 4,
		"items": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}, "required": ["x", "y"]}}},
		"additionalProperties": {"type": "string"}}`,
		map[string]any{"url": "/plot/{points}"}},
}

// argProvider counts the requests it is sent and keeps the last one's
// path.
type argProvider struct {
	*httptest.Server
	mu       sync.Mutex
	n        int
	lastPath string
}

func (p *argProvider) seen() (int, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n, p.lastPath
}

// asExprValues turns every whole float64 into an int64, as the evaluator
// and CodeMode hand integers over.
func asExprValues(v any) any {
	switch x := v.(type) {
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x)
		}
	case []any:
		for i := range x {
			x[i] = asExprValues(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = asExprValues(x[k])
		}
	}
	return v
}

// headerWithControl reports whether an argument the template sends as a
// header holds a control character net/http refuses in a header value.
func headerWithControl(template map[string]any, args map[string]any) bool {
	fields, _ := template["header_fields"].([]any)
	for _, name := range fields {
		v, _ := args[name.(string)].(string)
		if strings.ContainsFunc(v, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
			return true
		}
	}
	return false
}

// FuzzCallArguments: a call's arguments, however written, are accepted
// exactly when the tool's input schema accepts them (the fast path never
// disagrees with the validator), and a refused call is an
// *InvalidArgumentsError that sends nothing. An accepted call reaches the
// provider once, under its template's path with a path parameter kept to
// its one segment, or is refused as invalid
// arguments before anything is sent (a header with a line break, a body
// its content type cannot hold); it never panics.
func FuzzCallArguments(f *testing.F) {
	p := &argProvider{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.n++
		p.lastPath = r.URL.EscapedPath()
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	f.Cleanup(p.Close)
	r := utcptest.NewRegistry(f)
	schemas := make([]*jsonschema.Schema, len(argTools))
	for i, tool := range argTools {
		sch, err := schemafast.Compile([]byte(tool.inputs))
		if err != nil {
			f.Fatalf("%s: %v", tool.name, err)
		}
		schemas[i] = sch
		var inputs map[string]any
		if err := json.Unmarshal([]byte(tool.inputs), &inputs); err != nil {
			f.Fatal(err)
		}
		tmpl := map[string]any{"call_template_type": "http"}
		for k, v := range tool.template {
			tmpl[k] = v
		}
		tmpl["url"] = p.URL + tool.template["url"].(string)
		utcptest.Register(f, r, tool.name, utcptest.ManualOf("t", inputs, tmpl))
	}

	seeds := map[string][]string{
		"typed": {`{"id": "a1"}`, `{"id": "..", "n": 3, "x": 1.5, "ok": true, "tags": [1, "a"], "meta": {}, "none": null, "any": [null]}`,
			`{"id": 7}`, `{"id": "a", "n": 1.5}`, `{"id": "a", "n": 1e300}`, `{"id": "a", "extra": 1}`, `{}`, `{"id": "a/b?c#d"}`},
		"open":    {`{"q": "bike\r\nX-Evil: 1", "limit": 10}`, `{"q": "bike", "limit": "10"}`, `{"limit": 2.0}`},
		"bounded": {`{"q": "red bikes", "limit": 100, "when": null}`, `{"q": "", "limit": 0}`, `{"q": "x", "when": "soon"}`},
		"body":    {`{"body": {"name": "n"}, "dry": true}`, `{"body": {"name": 1}}`, `{"body": null}`, `{"body": {"name": "n"}, "other": 1}`},
		"nested":  {`{"points": [{"x": 1, "y": 2}], "label": "a"}`, `{"points": [{"x": 1}]}`, `{"points": [], "label": 3}`},
	}
	for i, tool := range argTools {
		for _, args := range seeds[tool.name] {
			for _, ints := range []bool{false, true} {
				f.Add(uint8(i), []byte(args), ints)
			}
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, data []byte, ints bool) {
		i := int(which) % len(argTools)
		tool := argTools[i]
		var args map[string]any
		if json.Unmarshal(data, &args) != nil || args == nil {
			return
		}
		if ints {
			asExprValues(args)
		}
		name := tool.name + ".t"
		want := schemas[i].Validate(map[string]any(args)) == nil

		described, err := r.Tool(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := described.ValidateArgs(args) == nil; got != want {
			t.Fatalf("%s %s (ints %v): ValidateArgs accepts %v, the validator %v", name, data, ints, got, want)
		}

		before, _ := p.seen()
		_, err = r.Call(context.Background(), name, args)
		after, path := p.seen()
		var ia *manual.InvalidArgumentsError
		switch {
		case err == nil && headerWithControl(tool.template, args):
			t.Fatalf("%s %s: sent a header value with a control character", name, data)
		case err != nil && !errors.As(err, &ia):
			t.Fatalf("%s %s: got %v (%T), want success or an *InvalidArgumentsError", name, data, err, err)
		case err != nil && after != before:
			t.Fatalf("%s %s: refused (%v) after sending %d requests", name, data, err, after-before)
		case err == nil && !want:
			t.Fatalf("%s %s: sent, but the schema refuses the arguments", name, data)
		case err == nil && after != before+1:
			t.Fatalf("%s %s: one call sent %d requests", name, data, after-before)
		case err == nil && !strings.HasPrefix(path, strings.SplitN(tool.template["url"].(string), "{", 2)[0]):
			t.Fatalf("%s %s: request to %q, want it under %s", name, data, path, tool.template["url"])
		}
		if id, ok := args["id"].(string); ok && err == nil && tool.name == "typed" {
			seg := strings.TrimPrefix(path, "/items/")
			if got, uerr := url.PathUnescape(seg); strings.Contains(seg, "/") || uerr != nil || got != id {
				t.Fatalf("%s %s: the id went out as the path %q, want it one segment", name, data, path)
			}
		}
	})
}
