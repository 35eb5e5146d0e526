package openapi_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/exprd/exprd/utcp/manual"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/httptransport"
	"github.com/exprd/exprd/utcp/internal/utcptest"
	"github.com/exprd/exprd/utcp/openapi"
)

// FuzzConvertOpenAPI: no panic, every error a *ManualError, and the
// parameter_styles of what converts are ones its transport takes.
func FuzzConvertOpenAPI(f *testing.F) {
	utcptest.Seeds(f, "openapi/*.yaml", "config/pets.yaml")
	f.Add([]byte(`{"swagger": "2.0", "info": {"title": "t", "version": "1"}, "host": "a.example", "paths": {"/x/{id}": {"get": {"operationId": "x", "parameters": [{"name": "id", "in": "path", "required": true, "type": "string"}], "responses": {"200": {"description": "ok", "schema": {"$ref": "#/definitions/T"}}}}}}, "definitions": {"T": {"type": "object", "properties": {"next": {"$ref": "#/definitions/T"}}}}}`))
	f.Add([]byte(`{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "https://a.example"}], "paths": {"/y": {"post": {"operationId": "y", "requestBody": {"content": {"application/json": {"schema": {"type": ["string", "null"], "exclusiveMinimum": 3}}}}, "responses": {}}}}}`))
	f.Add([]byte(`{"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "servers": [{"url": "https://a.example"}], "paths": {"/x/{id}": {"get": {"operationId": "x", "parameters": [{"name": "id", "in": "path", "required": true, "style": "matrix", "explode": true, "schema": {"type": "array"}}, {"name": "id", "in": "query", "style": "deepObject"}, {"name": "f", "in": "query", "style": "pipeDelimited", "explode": false}, {"name": "H", "in": "header", "style": "form"}], "responses": {}}}}}`))
	f.Add([]byte(`{"swagger": "2.0", "info": {"title": "t", "version": "1"}, "host": "a.example", "parameters": {"P": {"name": "p", "in": "query", "type": "array", "collectionFormat": "tsv", "x-exprd-collection-format": "multi"}}, "paths": {"/x/{p}": {"get": {"operationId": "x", "parameters": [{"$ref": "#/parameters/P"}, {"name": "h", "in": "header", "type": "array", "collectionFormat": "pipes"}], "responses": {"200": {"description": "ok"}}}}}}`))
	transports, err := httptransport.Transports()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, _, err := openapi.Convert(data, openapi.Options{Manual: "fuzz", SpecURL: "https://spec.example/openapi.json"})
		if err != nil {
			var me *manual.Error
			if !errors.As(err, &me) || !errors.Is(err, manual.ErrInvalid) {
				t.Fatalf("error %v (%T) is not a *ManualError", err, err)
			}
			return
		}
		for _, tool := range m.Tools {
			if _, err := transports[utcp.TypeHTTP](tool.Template.JSON(), utcp.Env{}); err != nil && strings.Contains(err.Error(), "parameter_styles") {
				t.Fatalf("tool %s: its transport refuses its parameter_styles: %v", tool.Name, err)
			}
		}
	})
}
