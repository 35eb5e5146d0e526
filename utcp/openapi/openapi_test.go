package openapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/exprd/exprd/utcp/manual"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/internal/utcptest"
	"github.com/exprd/exprd/utcp/openapi"
)

func TestConvertOpenAPI(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../testdata/openapi/petstore.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m, skipped, err := openapi.Convert(data, openapi.Options{Manual: "pets", SpecURL: "https://pets.example/spec/openapi.yaml"})
	if err != nil {
		t.Fatalf("Convert: %v", err)
	}
	if len(skipped) != 1 || skipped[0].Name != "DELETE /pets/{petId}" {
		t.Errorf("skipped: got %v, want the operation without operationId", skipped)
	}
	if m.ManualVersion != "2.1.0" {
		t.Errorf("manual_version: got %s, want the document's 2.1.0", m.ManualVersion)
	}
	byName := map[string]*manual.Tool{}
	for _, tool := range m.Tools {
		byName[tool.Name] = tool
	}
	if len(byName) != 3 {
		t.Fatalf("tools: got %d, want listPets, createPet, showPetById", len(byName))
	}
	tmpl := func(name string) map[string]any {
		var v map[string]any
		if err := json.Unmarshal(byName[name].Template.JSON(), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}

	list := tmpl("listPets")
	if list["url"] != "https://pets.example/api/v2/pets" || list["http_method"] != "GET" {
		t.Errorf("listPets url, method: got %v %v, want servers[0] (relative, with its variable) + path", list["url"], list["http_method"])
	}
	if !reflect.DeepEqual(list["header_fields"], []any{"X-Request-Id"}) {
		t.Errorf("listPets header_fields: got %v, want [X-Request-Id]", list["header_fields"])
	}
	form := map[string]any{"style": "form", "explode": true}
	wantStyles := map[string]any{"limit": form, "tags": form, "X-Request-Id": map[string]any{"style": "simple", "explode": false}}
	if !reflect.DeepEqual(list["parameter_styles"], wantStyles) {
		t.Errorf("listPets parameter_styles: got %v, want %v (every parameter but the cookie, with OpenAPI's defaults)", list["parameter_styles"], wantStyles)
	}
	if _, has := list["body_field"]; has {
		t.Errorf("listPets: got a body_field, want none (no request body)")
	}
	wantAuth := map[string]any{"auth_type": "api_key", "api_key": "${STOREKEY_API_KEY}", "var_name": "X-Store-Key", "location": "header"}
	if !reflect.DeepEqual(list["auth"], wantAuth) {
		t.Errorf("listPets auth: got %v, want %v", list["auth"], wantAuth)
	}
	if got, want := byName["listPets"].InputProperties(), []string{"X-Request-Id", "limit", "tags"}; !reflect.DeepEqual(got, want) {
		t.Errorf("listPets inputs: got %v, want %v (cookie parameters are left out)", got, want)
	}
	if byName["listPets"].Description != "List pets in the store" || !reflect.DeepEqual(byName["listPets"].Tags, []string{"pets"}) {
		t.Errorf("listPets description/tags: got %q %v", byName["listPets"].Description, byName["listPets"].Tags)
	}

	create := tmpl("createPet")
	if create["body_field"] != "body" || create["http_method"] != "POST" || create["content_type"] != "application/json" {
		t.Errorf("createPet: got body_field %v method %v content_type %v", create["body_field"], create["http_method"], create["content_type"])
	}
	createTool := byName["createPet"]
	cases := []struct {
		args map[string]any
		ok   bool
	}{
		{map[string]any{"body": map[string]any{"name": "Rex", "age": 3, "owner": nil}}, true},
		{map[string]any{"body": map[string]any{"name": "Rex", "age": 0}}, false}, // exclusiveMinimum: true → > 0
		{map[string]any{"body": map[string]any{"age": 3}}, false},                // name required
		{map[string]any{}, false}, // body required
		{map[string]any{"body": map[string]any{"name": "Rex", "parent": map[string]any{"name": "Old"}}}, false}, // parent is a Pet: id required
		{map[string]any{"body": map[string]any{"name": "Rex", "parent": map[string]any{"name": "Old", "id": "p1"}}}, true},
	}
	for i, c := range cases {
		err := createTool.ValidateArgs(c.args)
		if (err == nil) != c.ok {
			t.Errorf("createPet case %d: got %v, want ok=%v", i, err, c.ok)
		}
	}

	show := tmpl("showPetById")
	if show["url"] != "https://pets.example/api/v2/pets/{petId}" {
		t.Errorf("showPetById url: got %v", show["url"])
	}
	if _, has := show["auth"]; has {
		t.Errorf("showPetById: got auth, want none (security: [] overrides the document's)")
	}
	if err := byName["showPetById"].ValidateArgs(map[string]any{}); err == nil {
		t.Errorf("showPetById without petId: got no error, want petId required (path-level parameter)")
	}
}

func TestConvertOpenAPIRefuses(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, doc, specURL, want string
	}{
		{"no server and no URL", `{"openapi": "3.0.0", "info": {"title": "t", "version": "1"}, "paths": {}}`, "", "servers: missing"},
		{"remote document naming loopback", `{"openapi": "3.0.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "http://127.0.0.1:8080"}], "paths": {}}`, "https://evil.example/openapi.json", "servers[0].url: a document fetched from a remote host may not name a loopback server"},
		{"only an external ref", `{"openapi": "3.0.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "https://a.example"}], "paths": {"/x": {"get": {"operationId": "x", "parameters": [{"in": "query", "name": "q", "schema": {"$ref": "other.yaml#/X"}}], "responses": {"200": {"description": "ok"}}}}}}`, "", "not a valid OpenAPI document"},
		{"not OpenAPI", `{"hello": "world"}`, "", "not an OpenAPI document"},
		{"paths not an object", `{"openapi": "3.0.0", "paths": []}`, "", "not a valid OpenAPI document"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := openapi.Convert([]byte(tc.doc), openapi.Options{Manual: "m", SpecURL: tc.specURL})
			if !errors.Is(err, manual.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want ErrInvalidManual containing %q", err, tc.want)
			}
		})
	}
}

func TestConvertSwagger2(t *testing.T) {
	t.Parallel()
	doc := `{"swagger": "2.0", "info": {"title": "old", "version": "1"}, "host": "old.example", "basePath": "/v1", "schemes": ["https"],
	  "paths": {"/things/{id}": {"put": {"operationId": "putThing", "consumes": ["application/json"],
	    "parameters": [{"name": "id", "in": "path", "required": true, "type": "string"},
	                   {"name": "thing", "in": "body", "required": true, "schema": {"$ref": "#/definitions/Thing"}}],
	    "responses": {"200": {"description": "ok"}}}}},
	  "definitions": {"Thing": {"type": "object", "properties": {"n": {"type": "integer"}}}}}`
	m, _, err := openapi.Convert([]byte(doc), openapi.Options{Manual: "old"})
	if err != nil {
		t.Fatalf("Convert: %v", err)
	}
	var tmpl map[string]any
	_ = json.Unmarshal(m.Tools[0].Template.JSON(), &tmpl)
	if tmpl["url"] != "https://old.example/v1/things/{id}" || tmpl["body_field"] != "body" {
		t.Errorf("got url %v body_field %v", tmpl["url"], tmpl["body_field"])
	}
	if err := m.Tools[0].ValidateArgs(map[string]any{"id": "1", "body": map[string]any{"n": "x"}}); err == nil {
		t.Errorf("a string n: got no error, want the body's schema to apply")
	}
}

// TestDiscoverFromURL registers from a provider that serves a UTCP manual,
// an OpenAPI document (JSON and YAML), or neither.
func TestDiscoverFromURL(t *testing.T) {
	t.Parallel()
	petstore, err := os.ReadFile("../testdata/openapi/petstore.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var p *utcptest.Provider
	p = utcptest.NewProvider(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/utcp":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, utcptest.ManualOf("echo", nil, map[string]any{"call_template_type": "http", "http_method": "POST", "url": p.URL + "/echo"}))
		case "/openapi.yaml":
			w.Header().Set("Content-Type", "application/yaml")
			_, _ = w.Write(petstore)
		case "/openapi.json":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {"/hello": {"get": {"operationId": "hello", "responses": {"200": {"description": "ok"}}}}}}`)
		case "/api/v2/pets":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `[{"id": "p1", "name": "Rex"}]`)
		case "/neither":
			_, _ = io.WriteString(w, `{"name": "just json"}`)
		default:
			http.NotFound(w, r)
		}
	})
	ctx := context.Background()

	t.Run("UTCP manual", func(t *testing.T) {
		r := utcptest.NewRegistry(t)
		reg, err := r.Register(ctx, "echoer", utcp.FromURL(p.URL+"/utcp"))
		if err != nil || !reflect.DeepEqual(reg.Tools, []string{"echoer.echo"}) {
			t.Fatalf("got %v %v, want echoer.echo", reg, err)
		}
	})
	t.Run("OpenAPI YAML, then a call", func(t *testing.T) {
		r := utcptest.NewRegistry(t, utcp.WithVariables(map[string]string{"pets_STOREKEY_API_KEY": "s3cret"}))
		reg, err := r.Register(ctx, "pets", utcp.FromURL(p.URL+"/openapi.yaml"))
		if err != nil {
			t.Fatalf("Register: %v", err)
		}
		if want := []string{"pets.createPet", "pets.listPets", "pets.showPetById"}; !reflect.DeepEqual(reg.Tools, want) {
			t.Fatalf("tools: got %v, want %v", reg.Tools, want)
		}
		got, err := r.Call(ctx, "pets.listPets", map[string]any{"X-Request-Id": "r1", "limit": 2, "tags": []any{"dog", "cat"}})
		if err != nil {
			t.Fatalf("Call: %v", err)
		}
		if !reflect.DeepEqual(got, []any{map[string]any{"id": "p1", "name": "Rex"}}) {
			t.Errorf("result: got %v", got)
		}
		reqs := p.Requests()
		last := reqs[len(reqs)-1]
		if last.URI != "/api/v2/pets?limit=2&tags=dog&tags=cat" || last.Header.Get("X-Request-Id") != "r1" || last.Header.Get("X-Store-Key") != "s3cret" {
			t.Errorf("provider got %s X-Request-Id=%q X-Store-Key=%q", last.URI, last.Header.Get("X-Request-Id"), last.Header.Get("X-Store-Key"))
		}
	})
	t.Run("OpenAPI JSON without servers uses the document's host", func(t *testing.T) {
		r := utcptest.NewRegistry(t)
		if _, err := r.Register(ctx, "h", utcp.FromURL(p.URL+"/openapi.json")); err != nil {
			t.Fatalf("Register: %v", err)
		}
		tool, err := r.Tool("h.hello")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(tool.Template.JSON()), `"url":"`+p.URL+`/hello"`) {
			t.Errorf("template: got %s, want url %s/hello", tool.Template.JSON(), p.URL)
		}
	})
	t.Run("neither is refused", func(t *testing.T) {
		r := utcptest.NewRegistry(t)
		_, err := r.Register(ctx, "x", utcp.FromURL(p.URL+"/neither"))
		if !errors.Is(err, manual.ErrInvalid) || !strings.Contains(err.Error(), "neither a UTCP manual") {
			t.Errorf("got %v, want a refusal", err)
		}
	})
	t.Run("404 is a transport error", func(t *testing.T) {
		r := utcptest.NewRegistry(t)
		_, err := r.Register(ctx, "x", utcp.FromURL(p.URL+"/missing"))
		var te *utcp.TransportError
		if !errors.As(err, &te) || te.Status != 404 {
			t.Errorf("got %v, want a 404 TransportError", err)
		}
	})
	t.Run("plain http to a remote host is refused", func(t *testing.T) {
		r := utcptest.NewRegistry(t)
		_, err := r.Register(ctx, "x", utcp.FromURL("http://example.com/utcp"))
		var te *utcp.TransportError
		if !errors.As(err, &te) || te.Reason != utcp.ReasonInsecureURL {
			t.Errorf("got %v, want ReasonInsecureURL", err)
		}
	})
}
