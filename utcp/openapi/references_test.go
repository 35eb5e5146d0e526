package openapi_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/exprd/exprd/utcp/manual"

	"github.com/exprd/exprd/utcp/openapi"
)

// TestExternalReferencesAreNeverRead: a reference to another document (a
// file, a URL) resolves nowhere, in the conversion and in kin-openapi's
// reading of a document that converts to nothing: nothing is fetched and
// no file is read, wherever the reference stands.
func TestExternalReferencesAreNeverRead(t *testing.T) {
	t.Parallel()
	// What the references name, were they read: each would add to the
	// operation what the assertions below find missing.
	parts := `{"S": {"type": "string"}, "P": {"name": "q", "in": "query", "schema": {"type": "string"}},
		"B": {"content": {"application/json": {"schema": {"type": "string"}}}},
		"R": {"description": "ok", "content": {"application/json": {"schema": {"type": "string"}}}},
		"I": {"get": {"operationId": "fromElsewhere", "responses": {"200": {"description": "ok"}}}}}`
	var fetched atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, parts)
	}))
	t.Cleanup(srv.Close)
	file := filepath.Join(t.TempDir(), "parts.json")
	if err := os.WriteFile(file, []byte(parts), 0o600); err != nil {
		t.Fatal(err)
	}
	targets := map[string]string{
		"a file":          file + "#/",
		"a file URL":      "file://" + file + "#/",
		"a relative file": "parts.json#/",
		"a URL":           srv.URL + "/parts.json#/",
	}
	positions := []struct {
		name, paths string // paths: %s is the reference, without its last token
		check       func(t *testing.T, m *manual.Manual, skipped []manual.SkippedTool)
	}{
		{"a schema", `"/ext": {"post": {"operationId": "ext", "requestBody": {"content": {"application/json": {"schema": {"$ref": "%sS"}}}}, "responses": {"200": {"description": "ok"}}}}`,
			func(t *testing.T, m *manual.Manual, skipped []manual.SkippedTool) {
				if len(skipped) != 1 || skipped[0].Name != "ext" || !strings.Contains(skipped[0].Reason, "does not resolve inside the document") {
					t.Errorf("skipped: got %v, want ext, its reference resolving nowhere", skipped)
				}
			}},
		{"a parameter", `"/ext": {"get": {"operationId": "ext", "parameters": [{"$ref": "%sP"}], "responses": {"200": {"description": "ok"}}}}`,
			func(t *testing.T, m *manual.Manual, _ []manual.SkippedTool) {
				if in := tool(m, "ext").InputProperties(); len(in) != 0 {
					t.Errorf("ext inputs: got %v, want none", in)
				}
			}},
		{"a request body", `"/ext": {"post": {"operationId": "ext", "requestBody": {"$ref": "%sB"}, "responses": {"200": {"description": "ok"}}}}`,
			func(t *testing.T, m *manual.Manual, _ []manual.SkippedTool) {
				if in := tool(m, "ext").InputProperties(); len(in) != 0 {
					t.Errorf("ext inputs: got %v, want none", in)
				}
			}},
		{"a response", `"/ext": {"get": {"operationId": "ext", "responses": {"200": {"$ref": "%sR"}}}}`,
			func(t *testing.T, m *manual.Manual, _ []manual.SkippedTool) {
				if out := string(tool(m, "ext").Outputs); out != "{}" {
					t.Errorf("ext outputs: got %s, want {}", out)
				}
			}},
		{"a path item", `"/ext": {"$ref": "%sI"}`,
			func(t *testing.T, m *manual.Manual, _ []manual.SkippedTool) {
				if len(m.Tools) != 1 {
					t.Errorf("got %d tools, want good alone", len(m.Tools))
				}
			}},
	}
	for target, ref := range targets {
		for _, pos := range positions {
			t.Run(target+" as "+pos.name, func(t *testing.T) {
				paths := `{"/good": {"get": {"operationId": "good", "responses": {"200": {"description": "ok"}}}}, ` + fmt.Sprintf(pos.paths, ref) + `}`
				doc := `{"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "servers": [{"url": "https://api.example"}], "paths": ` + paths + `}`
				m, skipped, err := openapi.Convert([]byte(doc), openapi.Options{Manual: "m"})
				if err != nil {
					t.Fatal(err)
				}
				pos.check(t, m, skipped)
				// Without a server nothing converts, and kin-openapi's
				// loader reads the document for the reason: it refuses
				// the reference rather than read it.
				var noServer map[string]any
				_ = json.Unmarshal([]byte(doc), &noServer)
				delete(noServer, "servers")
				raw, _ := json.Marshal(noServer)
				_, _, err = openapi.Convert(raw, openapi.Options{Manual: "m"})
				if !errors.Is(err, manual.ErrInvalid) || !strings.Contains(err.Error(), "encountered disallowed external reference") {
					t.Errorf("without a server: got %v, want kin-openapi's refusal of the reference", err)
				}
			})
		}
	}
	t.Cleanup(func() {
		if n := fetched.Load(); n != 0 {
			t.Errorf("the URL was fetched %d times, want never", n)
		}
	})
}

func tool(m *manual.Manual, name string) *manual.Tool {
	for _, t := range m.Tools {
		if t.Name == name {
			return t
		}
	}
	return &manual.Tool{}
}

// TestKeywordsNextToAReference: the keywords written next to a $ref apply
// with it, as JSON Schema 2020-12 reads them.
func TestKeywordsNextToAReference(t *testing.T) {
	t.Parallel()
	body := `{"type": "object", "properties": {"name": {"$ref": "#/components/schemas/Name", "maxLength": 3, "description": "short"}}}`
	doc := doc3(`{"/a": {"post": `+op("a", body, `{"type": "object"}`)+`}}`, `{"Name": {"type": "string"}}`)
	m, _, err := openapi.Convert(doc, openapi.Options{Manual: "m"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name any
		ok   bool
	}{{"abc", true}, {"abcd", false}, {7, false}} {
		if err := m.Tools[0].ValidateArgs(map[string]any{"body": map[string]any{"name": tc.name}}); (err == nil) != tc.ok {
			t.Errorf("name %v: got %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
	if !strings.Contains(string(m.Tools[0].Inputs), `"description":"short"`) {
		t.Errorf("inputs: got %s, want the description next to the $ref kept", m.Tools[0].Inputs)
	}
}
