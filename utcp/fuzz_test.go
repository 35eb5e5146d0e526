package utcp_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exprd/exprd/utcp"
)

// seeds adds every file matching the patterns (under testdata/) to f.
func seeds(f *testing.F, patterns ...string) {
	f.Helper()
	for _, p := range patterns {
		files, err := filepath.Glob(filepath.Join("testdata", p))
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
}

// FuzzParseManual: no panic, every error a *ManualError, and what parses
// writes back to JSON that parses the same.
func FuzzParseManual(f *testing.F) {
	seeds(f, "manuals/*.json", "catalog/g*.json", "config/*.json", "config-bad/*.json")
	f.Add([]byte(`{"version": "1.0", "tools": [{"name": "x", "tool_provider": {"provider_type": "http", "url": "https://a"}}]}`))
	f.Add([]byte(`{"tools": [{"name": "x", "inputs": {"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}, "tool_call_template": {"call_template_type": "http"}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := utcp.ParseManual(data)
		if err != nil {
			var me *utcp.ManualError
			if !errors.As(err, &me) || !errors.Is(err, utcp.ErrInvalidManual) {
				t.Fatalf("error %v (%T) is not a *ManualError", err, err)
			}
			return
		}
		raw, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		m2, err := utcp.ParseManual(raw)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", raw, err)
		}
		if len(m2.Tools) != len(m.Tools) {
			t.Fatalf("re-parse: got %d tools, want %d", len(m2.Tools), len(m.Tools))
		}
	})
}

// FuzzConvertOpenAPI: no panic, every error a *ManualError, and the
// parameter_styles of what converts are ones its transport takes.
func FuzzConvertOpenAPI(f *testing.F) {
	seeds(f, "openapi/*.yaml", "config/pets.yaml")
	f.Add([]byte(`{"swagger": "2.0", "info": {"title": "t", "version": "1"}, "host": "a.example", "paths": {"/x/{id}": {"get": {"operationId": "x", "parameters": [{"name": "id", "in": "path", "required": true, "type": "string"}], "responses": {"200": {"description": "ok", "schema": {"$ref": "#/definitions/T"}}}}}}, "definitions": {"T": {"type": "object", "properties": {"next": {"$ref": "#/definitions/T"}}}}}`))
	f.Add([]byte(`{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "https://a.example"}], "paths": {"/y": {"post": {"operationId": "y", "requestBody": {"content": {"application/json": {"schema": {"type": ["string", "null"], "exclusiveMinimum": 3}}}}, "responses": {}}}}}`))
	f.Add([]byte(`{"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "servers": [{"url": "https://a.example"}], "paths": {"/x/{id}": {"get": {"operationId": "x", "parameters": [{"name": "id", "in": "path", "required": true, "style": "matrix", "explode": true, "schema": {"type": "array"}}, {"name": "id", "in": "query", "style": "deepObject"}, {"name": "f", "in": "query", "style": "pipeDelimited", "explode": false}, {"name": "H", "in": "header", "style": "form"}], "responses": {}}}}}`))
	f.Add([]byte(`{"swagger": "2.0", "info": {"title": "t", "version": "1"}, "host": "a.example", "parameters": {"P": {"name": "p", "in": "query", "type": "array", "collectionFormat": "tsv", "x-exprd-collection-format": "multi"}}, "paths": {"/x/{p}": {"get": {"operationId": "x", "parameters": [{"$ref": "#/parameters/P"}, {"name": "h", "in": "header", "type": "array", "collectionFormat": "pipes"}], "responses": {"200": {"description": "ok"}}}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, _, err := utcp.ConvertOpenAPI(data, utcp.OpenAPIOptions{Manual: "fuzz", SpecURL: "https://spec.example/openapi.json"})
		if err != nil {
			var me *utcp.ManualError
			if !errors.As(err, &me) || !errors.Is(err, utcp.ErrInvalidManual) {
				t.Fatalf("error %v (%T) is not a *ManualError", err, err)
			}
			return
		}
		for _, tool := range m.Tools {
			if err := utcp.DecodeHTTPTemplate(tool.Template.JSON()); err != nil && strings.Contains(err.Error(), "parameter_styles") {
				t.Fatalf("tool %s: its transport refuses its parameter_styles: %v", tool.Name, err)
			}
		}
	})
}
