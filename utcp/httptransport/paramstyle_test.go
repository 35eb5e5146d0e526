package httptransport_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/httptransport"
	"github.com/exprd/exprd/utcp/internal/utcptest"
	"github.com/exprd/exprd/utcp/manual"
	"github.com/exprd/exprd/utcp/openapi"
)

// openAPIDoc is a one-operation OpenAPI 3 document: GET path with the
// given parameters.
func openAPIDoc(path string, params ...map[string]any) []byte {
	list := make([]any, len(params))
	for i, p := range params {
		list[i] = p
	}
	doc, _ := json.Marshal(map[string]any{
		"openapi": "3.0.3",
		"info":    map[string]any{"title": "t", "version": "1"},
		"paths": map[string]any{path: map[string]any{"get": map[string]any{
			"operationId": "op", "parameters": list,
			"responses": map[string]any{"200": map[string]any{"description": "ok"}},
		}}},
	})
	return doc
}

// registerConverted converts doc against the provider and registers it
// as manual "api".
func registerConverted(t *testing.T, r *utcp.Registry, p *utcptest.Provider, doc []byte) {
	t.Helper()
	m, _, err := openapi.Convert(doc, openapi.Options{Manual: "api", BaseURL: p.URL})
	if err != nil {
		t.Fatalf("openapi.Convert: %v", err)
	}
	if _, err := r.Register(context.Background(), "api", utcp.FromManual(m)); err != nil {
		t.Fatalf("Register: %v", err)
	}
}

// callOnce calls tool and returns what the provider utcptest.Received.
func callOnce(t *testing.T, r *utcp.Registry, p *utcptest.Provider, tool string, args map[string]any) utcptest.Received {
	t.Helper()
	if _, err := r.Call(context.Background(), tool, args); err != nil {
		t.Fatalf("Call: %v", err)
	}
	reqs := p.Requests()
	if len(reqs) == 0 {
		t.Fatal("the provider utcptest.Received nothing")
	}
	return reqs[len(reqs)-1]
}

// TestOpenAPIParameterStyles: a tool converted from OpenAPI 3 sends each
// parameter as the document's style and explode say (the specification's
// style examples; RFC 6570 for path styles), not as the reference clients'
// `color[]=blue`. Delimiters RFC 3986 does not allow in a query (`|`, the
// brackets of deepObject) are sent percent-encoded, as OpenAPI 3.1.1
// advises; what the provider decodes is the specification's form.
func TestOpenAPIParameterStyles(t *testing.T) {
	t.Parallel()
	colors := []any{"blue", "black", "brown"}
	rgb := map[string]any{"R": 100, "G": 200, "B": 150}
	query := func(extra map[string]any) map[string]any {
		p := map[string]any{"name": "color", "in": "query", "schema": map[string]any{}}
		for k, v := range extra {
			p[k] = v
		}
		return p
	}
	inPath := func(extra map[string]any) map[string]any {
		p := query(extra)
		p["in"], p["required"] = "path", true
		return p
	}
	for _, tc := range []struct {
		name       string
		path       string // default /x
		param      map[string]any
		arg        any
		wantURI    string
		wantQuery  url.Values        // what the provider decodes, where it reads differently
		wantHeader map[string]string // header parameters
	}{
		{name: "form, explode by default: array", param: query(nil), arg: colors,
			wantURI: "/x?color=blue&color=black&color=brown"},
		{name: "form, explode false: array", param: query(map[string]any{"explode": false}), arg: colors,
			wantURI: "/x?color=blue,black,brown"},
		{name: "form, explode: object", param: query(nil), arg: rgb,
			wantURI: "/x?B=150&G=200&R=100"},
		{name: "form, explode false: object", param: query(map[string]any{"style": "form", "explode": false}), arg: rgb,
			wantURI: "/x?color=B,150,G,200,R,100"},
		{name: "form: a delimiter inside a value is encoded", param: query(map[string]any{"explode": false}), arg: []any{"a,b", "c d"},
			wantURI: "/x?color=a%2Cb,c%20d", wantQuery: url.Values{"color": {"a,b,c d"}}},
		{name: "form: a scalar, reserved characters encoded", param: query(nil), arg: "a b&c=d/é",
			wantURI: "/x?color=a%20b%26c%3Dd%2F%C3%A9"},
		{name: "form: booleans and numbers as text, nulls left out", param: query(nil), arg: []any{true, 1.5, nil, 2},
			wantURI: "/x?color=true&color=1.5&color=2"},
		{name: "form: an empty array sends nothing", param: query(nil), arg: []any{},
			wantURI: "/x"},
		{name: "spaceDelimited: array", param: query(map[string]any{"style": "spaceDelimited"}), arg: colors,
			wantURI: "/x?color=blue%20black%20brown"},
		{name: "spaceDelimited: object", param: query(map[string]any{"style": "spaceDelimited"}), arg: rgb,
			wantURI: "/x?color=B%20150%20G%20200%20R%20100"},
		{name: "spaceDelimited, explode: as form", param: query(map[string]any{"style": "spaceDelimited", "explode": true}), arg: colors,
			wantURI: "/x?color=blue&color=black&color=brown"},
		{name: "pipeDelimited: array", param: query(map[string]any{"style": "pipeDelimited"}), arg: colors,
			wantURI: "/x?color=blue%7Cblack%7Cbrown", wantQuery: url.Values{"color": {"blue|black|brown"}}},
		{name: "pipeDelimited: object", param: query(map[string]any{"style": "pipeDelimited", "explode": false}), arg: rgb,
			wantURI: "/x?color=B%7C150%7CG%7C200%7CR%7C100"},
		{name: "deepObject: object", param: query(map[string]any{"style": "deepObject", "explode": true}), arg: rgb,
			wantURI:   "/x?color%5BB%5D=150&color%5BG%5D=200&color%5BR%5D=100",
			wantQuery: url.Values{"color[B]": {"150"}, "color[G]": {"200"}, "color[R]": {"100"}}},
		{name: "deepObject: nested objects and arrays as qs writes them", param: query(map[string]any{"style": "deepObject"}),
			arg:       map[string]any{"a": map[string]any{"b": 1}, "t": []any{"x", "y"}, "n": nil},
			wantURI:   "/x?color%5Ba%5D%5Bb%5D=1&color%5Bt%5D%5B%5D=x&color%5Bt%5D%5B%5D=y",
			wantQuery: url.Values{"color[a][b]": {"1"}, "color[t][]": {"x", "y"}}},
		{name: "a style a query parameter cannot have is the default", param: query(map[string]any{"style": "matrix", "explode": false}), arg: colors,
			wantURI: "/x?color=blue&color=black&color=brown"},
		{name: "form: nested values as JSON", param: query(nil), arg: []any{[]any{1, 2}, map[string]any{"k": "v"}},
			wantURI: "/x?color=%5B1%2C2%5D&color=%7B%22k%22%3A%22v%22%7D"},

		{name: "path simple: array", path: "/x/{color}", param: inPath(nil), arg: colors,
			wantURI: "/x/blue,black,brown"},
		{name: "path simple: object", path: "/x/{color}", param: inPath(nil), arg: rgb,
			wantURI: "/x/B,150,G,200,R,100"},
		{name: "path simple, explode: object", path: "/x/{color}", param: inPath(map[string]any{"explode": true}), arg: rgb,
			wantURI: "/x/B=150,G=200,R=100"},
		{name: "path simple: a scalar", path: "/x/{color}", param: inPath(nil), arg: "u 42/x",
			wantURI: "/x/u%2042%2Fx"},
		{name: "path label: array", path: "/x/{color}", param: inPath(map[string]any{"style": "label"}), arg: colors,
			wantURI: "/x/.blue,black,brown"},
		{name: "path label, explode: array", path: "/x/{color}", param: inPath(map[string]any{"style": "label", "explode": true}), arg: colors,
			wantURI: "/x/.blue.black.brown"},
		{name: "path label, explode: object", path: "/x/{color}", param: inPath(map[string]any{"style": "label", "explode": true}), arg: rgb,
			wantURI: "/x/.B=150.G=200.R=100"},
		{name: "path matrix: scalar", path: "/x/{color}", param: inPath(map[string]any{"style": "matrix"}), arg: "blue",
			wantURI: "/x/;color=blue"},
		{name: "path matrix: empty string", path: "/x/{color}", param: inPath(map[string]any{"style": "matrix"}), arg: "",
			wantURI: "/x/;color"},
		{name: "path matrix: array", path: "/x/{color}", param: inPath(map[string]any{"style": "matrix"}), arg: colors,
			wantURI: "/x/;color=blue,black,brown"},
		{name: "path matrix, explode: array", path: "/x/{color}", param: inPath(map[string]any{"style": "matrix", "explode": true}), arg: colors,
			wantURI: "/x/;color=blue;color=black;color=brown"},
		{name: "path matrix, explode: object", path: "/x/{color}", param: inPath(map[string]any{"style": "matrix", "explode": true}), arg: rgb,
			wantURI: "/x/;B=150;G=200;R=100"},

		{name: "header simple: array", param: map[string]any{"name": "X-Color", "in": "header", "schema": map[string]any{}}, arg: colors,
			wantURI: "/x", wantHeader: map[string]string{"X-Color": "blue,black,brown"}},
		{name: "header simple, explode: object", param: map[string]any{"name": "X-Color", "in": "header", "explode": true, "schema": map[string]any{}}, arg: rgb,
			wantURI: "/x", wantHeader: map[string]string{"X-Color": "B=150,G=200,R=100"}},
		{name: "header simple: object", param: map[string]any{"name": "X-Color", "in": "header", "schema": map[string]any{}}, arg: rgb,
			wantURI: "/x", wantHeader: map[string]string{"X-Color": "B,150,G,200,R,100"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := tc.path
			if path == "" {
				path = "/x"
			}
			p := utcptest.NewProvider(t, nil)
			r := utcptest.NewRegistry(t)
			registerConverted(t, r, p, openAPIDoc(path, tc.param))
			got := callOnce(t, r, p, "api.op", map[string]any{tc.param["name"].(string): tc.arg})
			if got.URI != tc.wantURI {
				t.Errorf("request URI: got %s, want %s", got.URI, tc.wantURI)
			}
			if tc.wantQuery != nil {
				if q, _ := url.ParseQuery(got.Query); !reflect.DeepEqual(q, tc.wantQuery) {
					t.Errorf("decoded query: got %v, want %v", q, tc.wantQuery)
				}
			}
			for k, v := range tc.wantHeader {
				if h := got.Header.Get(k); h != v {
					t.Errorf("header %s: got %q, want %q", k, h, v)
				}
			}
		})
	}
}

// TestSwagger2CollectionFormats: a Swagger 2 array parameter is sent as its
// collectionFormat says (csv when it says nothing), through a $ref too.
func TestSwagger2CollectionFormats(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		format  string // "" leaves collectionFormat out
		wantURI string
	}{
		{"", "/things?tags=a,b%2Cc"},
		{"csv", "/things?tags=a,b%2Cc"},
		{"ssv", "/things?tags=a%20b%2Cc"},
		{"tsv", "/things?tags=a%09b%2Cc"},
		{"pipes", "/things?tags=a%7Cb%2Cc"},
		{"multi", "/things?tags=a&tags=b%2Cc"},
	} {
		t.Run("collectionFormat "+tc.format, func(t *testing.T) {
			t.Parallel()
			tags := map[string]any{"name": "tags", "in": "query", "type": "array", "items": map[string]any{"type": "string"}}
			if tc.format != "" {
				tags["collectionFormat"] = tc.format
			}
			doc, _ := json.Marshal(map[string]any{
				"swagger": "2.0", "info": map[string]any{"title": "old", "version": "1"}, "host": "old.example",
				"parameters": map[string]any{"Tags": tags},
				"paths": map[string]any{"/things": map[string]any{"get": map[string]any{
					"operationId": "list",
					"parameters":  []any{map[string]any{"$ref": "#/parameters/Tags"}},
					"responses":   map[string]any{"200": map[string]any{"description": "ok"}},
				}}},
			})
			p := utcptest.NewProvider(t, nil)
			r := utcptest.NewRegistry(t)
			m, _, err := openapi.Convert(doc, openapi.Options{Manual: "old", BaseURL: p.URL})
			if err != nil {
				t.Fatalf("openapi.Convert: %v", err)
			}
			if _, err := r.Register(context.Background(), "old", utcp.FromManual(m)); err != nil {
				t.Fatalf("Register: %v", err)
			}
			got := callOnce(t, r, p, "old.list", map[string]any{"tags": []any{"a", "b,c"}})
			if got.URI != tc.wantURI {
				t.Errorf("request URI: got %s, want %s", got.URI, tc.wantURI)
			}
		})
	}

	t.Run("path and header arrays are csv", func(t *testing.T) {
		t.Parallel()
		doc := `{"swagger": "2.0", "info": {"title": "old", "version": "1"}, "host": "old.example",
		  "paths": {"/things/{ids}": {"get": {"operationId": "get",
		    "parameters": [{"name": "ids", "in": "path", "required": true, "type": "array", "items": {"type": "integer"}},
		                   {"name": "X-Ids", "in": "header", "type": "array", "items": {"type": "integer"}, "collectionFormat": "csv"}],
		    "responses": {"200": {"description": "ok"}}}}}}`
		p := utcptest.NewProvider(t, nil)
		r := utcptest.NewRegistry(t)
		m, _, err := openapi.Convert([]byte(doc), openapi.Options{Manual: "old", BaseURL: p.URL})
		if err != nil {
			t.Fatalf("openapi.Convert: %v", err)
		}
		if _, err := r.Register(context.Background(), "old", utcp.FromManual(m)); err != nil {
			t.Fatalf("Register: %v", err)
		}
		got := callOnce(t, r, p, "old.get", map[string]any{"ids": []any{1, 2}, "X-Ids": []any{3, 4}})
		if got.URI != "/things/1,2" || got.Header.Get("X-Ids") != "3,4" {
			t.Errorf("got %s X-Ids=%q, want /things/1,2 X-Ids=3,4", got.URI, got.Header.Get("X-Ids"))
		}
	})
}

// TestNativeManualQueryEncoding: a native UTCP manual's template, which
// has no parameter_styles, keeps the reference client's (axios's)
// encoding; parameter_styles, exprd's own field, opts in per argument.
func TestNativeManualQueryEncoding(t *testing.T) {
	t.Parallel()
	args := map[string]any{"tags": []any{"a b", "c"}, "filter": map[string]any{"k": "v"}, "q": "x:y"}
	for _, tc := range []struct {
		name    string
		styles  map[string]any
		wantURI string
	}{
		{"no parameter_styles", nil, "/find?filter[k]=v&q=x:y&tags[]=a+b&tags[]=c"},
		{"parameter_styles for one argument", map[string]any{"tags": map[string]any{"style": "form"}},
			"/find?filter[k]=v&q=x:y&tags=a%20b&tags=c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := utcptest.NewProvider(t, nil)
			r := utcptest.NewRegistry(t)
			tmpl := map[string]any{"call_template_type": "http", "url": p.URL + "/find"}
			if tc.styles != nil {
				tmpl["parameter_styles"] = tc.styles
			}
			utcptest.Register(t, r, "svc", utcptest.ManualOf("op", nil, tmpl))
			if got := callOnce(t, r, p, "svc.op", args); got.URI != tc.wantURI {
				t.Errorf("request URI: got %s, want %s", got.URI, tc.wantURI)
			}
		})
	}
}

// TestParameterStylesRefused: parameter_styles that cannot apply where the
// argument is sent refuse the template, naming the field.
func TestParameterStylesRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		tmpl   map[string]any
		styles any
		want   string
	}{
		{"a query style in the path", map[string]any{"url": "https://a.example/x/{id}"},
			map[string]any{"id": map[string]any{"style": "form"}}, `parameter_styles.id.style: "form" is not a style of a path parameter`},
		{"a path style in the query", map[string]any{"url": "https://a.example/x"},
			map[string]any{"id": map[string]any{"style": "label"}}, `parameter_styles.id.style: "label" is not a style of a query parameter`},
		{"anything but simple in a header", map[string]any{"url": "https://a.example/x", "header_fields": []any{"X-A"}},
			map[string]any{"X-A": map[string]any{"style": "matrix"}}, `parameter_styles["X-A"].style: "matrix" is not a style of a header parameter`},
		{"an unknown style", map[string]any{"url": "https://a.example/x"},
			map[string]any{"id": map[string]any{"style": "csv"}}, `parameter_styles.id.style: "csv" is not a style`},
		{"the body", map[string]any{"url": "https://a.example/x"},
			map[string]any{"body": map[string]any{"style": "form"}}, "parameter_styles.body: names the body_field argument"},
		{"explode not a boolean", map[string]any{"url": "https://a.example/x"},
			map[string]any{"id": map[string]any{"explode": "yes"}}, "parameter_styles.id.explode: must be a boolean, got string"},
		{"an entry not an object", map[string]any{"url": "https://a.example/x"},
			map[string]any{"id": "form"}, "parameter_styles.id: must be an object, got string"},
		{"not an object", map[string]any{"url": "https://a.example/x"},
			[]any{"id"}, "parameter_styles: must be an object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := utcptest.NewRegistry(t)
			tmpl := map[string]any{"call_template_type": "http", "parameter_styles": tc.styles}
			for k, v := range tc.tmpl {
				tmpl[k] = v
			}
			_, err := r.Register(context.Background(), "svc", utcp.FromText(utcptest.ManualOf("op", nil, tmpl)).AllowProtocols(utcp.TypeHTTP))
			if !errors.Is(err, manual.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want ErrInvalidManual containing %q", err, tc.want)
			}
		})
	}
}

// TestPublishedDocumentsArrayQueries: operations of the real catalogues
// with array and object query parameters send them as their documents say.
func TestPublishedDocumentsArrayQueries(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file, tool string
		args       map[string]any
		wantURI    string
	}{
		// OpenAI: an array with no style, so form and exploded.
		{"openai-openapi.json", "listConversationItems",
			map[string]any{"conversation_id": "conv_1", "include": []any{"file_search_call.results", "message.output_text.logprobs"}, "limit": 2},
			"/conversations/conv_1/items?include=file_search_call.results&include=message.output_text.logprobs&limit=2"},
		// OpenAI: style deepObject, explode true (its docs: `metadata[k]=v`).
		{"openai-openapi.json", "listPaginatedFineTuningJobs",
			map[string]any{"metadata": map[string]any{"project": "alpha", "team": "ml ops"}},
			"/fine_tuning/jobs?metadata%5Bproject%5D=alpha&metadata%5Bteam%5D=ml%20ops"},
		// Twilio Messaging: an array with no style.
		{"twilio-messaging-v1.json", "ListTollfreeVerification",
			map[string]any{"TrustProductSid": []any{"BU1", "BU2"}, "PageSize": 20},
			"/v1/Tollfree/Verifications?PageSize=20&TrustProductSid=BU1&TrustProductSid=BU2"},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			t.Parallel()
			doc, err := os.ReadFile("../testdata/catalogs/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			p := utcptest.NewProvider(t, nil)
			r := utcptest.NewRegistry(t, utcptest.EveryVariable)
			registerConverted(t, r, p, doc)
			if got := callOnce(t, r, p, "api."+tc.tool, tc.args); got.URI != tc.wantURI {
				t.Errorf("request URI: got %s, want %s", got.URI, tc.wantURI)
			}
		})
	}
}

// TestHTTPAccept: an http call sends the reference client's Accept (axios's
// default) unless the template's headers or a header field set one.
func TestHTTPAccept(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		tmpl map[string]any
		args map[string]any
		want string
	}{
		{"default", nil, nil, httptransport.DefaultAccept},
		{"the template's header", map[string]any{"headers": map[string]any{"accept": "application/xml"}}, nil, "application/xml"},
		{"a header field", map[string]any{"header_fields": []any{"Accept"}}, map[string]any{"Accept": "text/csv"}, "text/csv"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := utcptest.NewProvider(t, nil)
			r := utcptest.NewRegistry(t)
			tmpl := map[string]any{"call_template_type": "http", "url": p.URL + "/x"}
			for k, v := range tc.tmpl {
				tmpl[k] = v
			}
			utcptest.Register(t, r, "svc", utcptest.ManualOf("op", nil, tmpl))
			got := callOnce(t, r, p, "svc.op", tc.args)
			if h := got.Header.Values("Accept"); len(h) != 1 || h[0] != tc.want {
				t.Errorf("Accept: got %q, want [%q]", h, tc.want)
			}
		})
	}
}
