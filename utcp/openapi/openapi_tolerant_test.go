package openapi_test

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/exprd/exprd/utcp/manual"

	"github.com/exprd/exprd/utcp/openapi"
)

// doc3 is an OpenAPI 3.1 document with the operations given (JSON, by
// path) and the component schemas given.
func doc3(paths, schemas string) []byte {
	return []byte(`{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "https://api.example"}],
		"paths": ` + paths + `, "components": {"schemas": ` + schemas + `}}`)
}

// op is an operation posting a body of schema in and answering out.
func op(id, in, out string) string {
	return `{"operationId": "` + id + `", "summary": "` + id + `",
		"requestBody": {"content": {"application/json": {"schema": ` + in + `}}},
		"responses": {"200": {"content": {"application/json": {"schema": ` + out + `}}}}}`
}

// TestOpenAPIIsReadTolerantly: a flaw in a document written by someone
// else costs only what depends on it, and is reported.
func TestOpenAPIIsReadTolerantly(t *testing.T) {
	t.Parallel()
	good := `{"type": "object"}`
	for _, tt := range []struct {
		name        string
		doc         []byte
		wantTools   []string
		wantSkipped []manual.SkippedTool // Reason checked by substring
		wantErr     string
	}{
		{
			name:        "an operation whose input references nothing is skipped",
			doc:         doc3(`{"/a": {"post": `+op("good", good, good)+`}, "/b": {"post": `+op("broken", `{"$ref": "#/components/schemas/Missing"}`, good)+`}}`, `{}`),
			wantTools:   []string{"good"},
			wantSkipped: []manual.SkippedTool{{Name: "broken", Reason: `$ref "#/components/schemas/Missing" does not resolve`}},
		},
		{
			name:        "an output schema that is not valid is dropped, the tool registers",
			doc:         doc3(`{"/a": {"post": `+op("listThings", good, `{"$ref": "#/components/schemas/Thing"}`)+`}}`, `{"Thing": {"type": "object", "required": ["id", "id"]}}`),
			wantTools:   []string{"listThings"},
			wantSkipped: []manual.SkippedTool{{Name: "listThings", Registered: true, Reason: "output schema dropped: invalid JSON Schema"}},
		},
		{
			name:        "an output schema with an external $ref is dropped: external references are never fetched",
			doc:         doc3(`{"/a": {"post": `+op("remote", good, `{"$ref": "https://elsewhere.example/x.json#/X"}`)+`}}`, `{}`),
			wantTools:   []string{"remote"},
			wantSkipped: []manual.SkippedTool{{Name: "remote", Registered: true, Reason: `output schema dropped: $ref "https://elsewhere.example/x.json#/X" does not resolve inside the document`}},
		},
		{
			name:      "a bad definition nothing uses is ignored",
			doc:       doc3(`{"/a": {"post": `+op("good", good, good)+`}}`, `{"Unused": {"type": "object", "required": ["x", "x"]}}`),
			wantTools: []string{"good"},
		},
		{
			name:        "an input schema that is not valid skips its operation",
			doc:         doc3(`{"/a": {"post": `+op("good", good, good)+`}, "/b": {"post": `+op("bad", `{"type": "object", "required": ["x", "x"]}`, good)+`}}`, `{}`),
			wantTools:   []string{"good"},
			wantSkipped: []manual.SkippedTool{{Name: "bad", Reason: "inputs: invalid JSON Schema"}},
		},
		{
			name:        "two operations of one operationId: the second is skipped",
			doc:         doc3(`{"/a": {"post": `+op("same", good, good)+`}, "/b": {"post": `+op("same", good, good)+`}}`, `{}`),
			wantTools:   []string{"same"},
			wantSkipped: []manual.SkippedTool{{Name: "same", Reason: "another operation has this operationId"}},
		},
		{
			name:    "a document with no operation left is refused, saying why",
			doc:     doc3(`{"/b": {"post": `+op("bad", `{"type": "object", "required": ["x", "x"]}`, good)+`}}`, `{}`),
			wantErr: "none of the document's 1 operations could be converted; bad: inputs: invalid JSON Schema",
		},
		{
			name: "a 2019-09 recursive filter (OpenAI's CompoundFilter) refers to its own definition",
			doc: doc3(`{"/s": {"post": `+op("search", `{"$ref": "#/components/schemas/Filter"}`, good)+`}}`,
				`{"Filter": {"$recursiveAnchor": true, "type": "object", "properties": {"filters": {"type": "array", "items": {"oneOf": [{"type": "string"}, {"$recursiveRef": "#"}]}}}}}`),
			wantTools: []string{"search"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, skipped, err := openapi.Convert(tt.doc, openapi.Options{Manual: "m"})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range m.Tools {
				names = append(names, tool.Name)
			}
			if !slices.Equal(names, tt.wantTools) {
				t.Errorf("tools: got %v, want %v", names, tt.wantTools)
			}
			if len(skipped) != len(tt.wantSkipped) {
				t.Fatalf("skipped: got %+v, want %+v", skipped, tt.wantSkipped)
			}
			for i, w := range tt.wantSkipped {
				g := skipped[i]
				if g.Name != w.Name || g.Registered != w.Registered || !strings.Contains(g.Reason, w.Reason) {
					t.Errorf("skipped[%d]: got %+v, want %+v (reason containing)", i, g, w)
				}
			}
		})
	}
}

// TestRecursiveFilterValidates: the converted recursion checks nested
// filters as the document means.
func TestRecursiveFilterValidates(t *testing.T) {
	t.Parallel()
	doc := doc3(`{"/s": {"post": `+op("search", `{"$ref": "#/components/schemas/Filter"}`, `{"type": "object"}`)+`}}`,
		`{"Filter": {"$recursiveAnchor": true, "type": "object", "properties": {"filters": {"type": "array", "items": {"oneOf": [{"type": "string"}, {"$recursiveRef": "#"}]}}}}}`)
	m, _, err := openapi.Convert(doc, openapi.Options{Manual: "m"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		body string
		ok   bool
	}{
		{`{"filters": ["a", {"filters": ["b", {"filters": []}]}]}`, true},
		{`{"filters": ["a", {"filters": [1]}]}`, false},
	} {
		var body any
		_ = json.Unmarshal([]byte(tt.body), &body)
		err := m.Tools[0].ValidateArgs(map[string]any{"body": body})
		if (err == nil) != tt.ok {
			t.Errorf("body %s: got %v, want ok=%v", tt.body, err, tt.ok)
		}
	}
}

// TestSwagger2TupleItems: a Swagger 2 document with a draft-4 tuple
// `items: [...]` (which kin-openapi cannot read) registers, the tuple kept
// as prefixItems.
func TestSwagger2TupleItems(t *testing.T) {
	t.Parallel()
	doc := []byte(`{"swagger": "2.0", "info": {"title": "t", "version": "1"}, "host": "api.example", "schemes": ["https"],
		"paths": {"/p": {"post": {"operationId": "point", "consumes": ["application/json"],
			"parameters": [{"in": "body", "name": "body", "schema": {"$ref": "#/definitions/Point"}}],
			"responses": {"200": {"description": "ok"}}}}},
		"definitions": {"Point": {"type": "object", "properties": {"xy": {"type": "array", "items": [{"type": "number"}, {"type": "number"}]}}},
			"Unused": {"type": "array", "items": [{"type": "string"}]}}}`)
	m, skipped, err := openapi.Convert(doc, openapi.Options{Manual: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Tools) != 1 || len(skipped) != 0 {
		t.Fatalf("got %d tools, skipped %v; want point and nothing skipped", len(m.Tools), skipped)
	}
	if !strings.Contains(string(m.Tools[0].Inputs), `"prefixItems":[{"type":"number"},{"type":"number"}]`) {
		t.Errorf("inputs: got %s, want the tuple as prefixItems", m.Tools[0].Inputs)
	}
	for _, tt := range []struct {
		xy any
		ok bool
	}{{[]any{1.5, 2.0}, true}, {[]any{"a", 2.0}, false}} {
		err := m.Tools[0].ValidateArgs(map[string]any{"body": map[string]any{"xy": tt.xy}})
		if (err == nil) != tt.ok {
			t.Errorf("xy %v: got %v, want ok=%v", tt.xy, err, tt.ok)
		}
	}
}

// TestPublishedDocuments: the real documents in testdata/catalogs (MIT,
// unmodified) register, what is left out reported per operation.
func TestPublishedDocuments(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		file       string
		tools      int
		registered []string // registered without their output schema
	}{
		{"openai-openapi.json", 288, []string{"ListContainers", "CreateContainer", "RetrieveContainer"}},
		{"twilio-api-v2010.json", 197, nil},
		{"twilio-messaging-v1.json", 58, nil},
	} {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile("../testdata/catalogs/" + tt.file)
			if err != nil {
				t.Fatal(err)
			}
			m, skipped, err := openapi.Convert(data, openapi.Options{Manual: "m"})
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Tools) != tt.tools {
				t.Errorf("got %d tools, want %d", len(m.Tools), tt.tools)
			}
			var dropped []string
			for _, s := range skipped {
				if !s.Registered {
					t.Errorf("skipped %s: %s", s.Name, s.Reason)
				}
				dropped = append(dropped, s.Name)
			}
			if !slices.Equal(dropped, tt.registered) {
				t.Errorf("output schemas dropped: got %v, want %v", dropped, tt.registered)
			}
		})
	}
}
