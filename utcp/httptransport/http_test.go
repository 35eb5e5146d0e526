package httptransport_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/internal/utcptest"
	"github.com/exprd/exprd/utcp/manual"
)

// TestHTTPRequestMapping checks, for each case of docs/utcp-compat.md's
// http template, what the provider utcptest.Received.
func TestHTTPRequestMapping(t *testing.T) {
	t.Parallel()
	type want struct {
		method  string
		uri     string
		body    string
		headers map[string]string // exact values
		absent  []string          // headers that must not be sent
	}
	cases := []struct {
		name string
		tmpl map[string]any // url is prefixed with the provider's
		args map[string]any
		want want
	}{
		{
			name: "body argument is the JSON body",
			tmpl: map[string]any{"http_method": "POST", "url": "/math/add"},
			args: map[string]any{"body": map[string]any{"a": 2, "b": 3}},
			want: want{method: "POST", uri: "/math/add", body: `{"a":2,"b":3}`, headers: map[string]string{"Content-Type": "application/json"}},
		},
		{
			name: "other arguments go to the query even for POST",
			tmpl: map[string]any{"http_method": "POST", "url": "/math/add"},
			args: map[string]any{"a": 2, "b": 3},
			want: want{method: "POST", uri: "/math/add?a=2&b=3", body: "", absent: []string{"Content-Type"}},
		},
		{
			name: "GET is the default method",
			tmpl: map[string]any{"url": "/items"},
			args: map[string]any{"q": "red shoes"},
			want: want{method: "GET", uri: "/items?q=red+shoes"},
		},
		{
			name: "path parameter is URL-encoded and not repeated in the query",
			tmpl: map[string]any{"url": "/users/{id}/posts"},
			args: map[string]any{"id": "u 42/x", "limit": 5},
			want: want{method: "GET", uri: "/users/u%2042%2Fx/posts?limit=5"},
		},
		{
			name: "arrays as key[], booleans as true, nulls dropped",
			tmpl: map[string]any{"http_method": "PUT", "url": "/tag"},
			args: map[string]any{"tags": []any{"x", "y"}, "urgent": true, "note": nil, "draft": false},
			want: want{method: "PUT", uri: "/tag?draft=false&tags[]=x&tags[]=y&urgent=true"},
		},
		{
			name: "header_fields become headers, value as a string",
			tmpl: map[string]any{"http_method": "DELETE", "url": "/orders/{id}", "header_fields": []any{"X-Request-Id", "X-Retry"}},
			args: map[string]any{"id": 7, "X-Request-Id": "abc", "X-Retry": 3, "reason": "dup"},
			want: want{method: "DELETE", uri: "/orders/7?reason=dup", headers: map[string]string{"X-Request-Id": "abc", "X-Retry": "3"}},
		},
		{
			name: "static headers are always sent",
			tmpl: map[string]any{"url": "/ping", "headers": map[string]any{"X-Client": "exprd", "Accept-Language": "fr"}},
			args: map[string]any{},
			want: want{method: "GET", uri: "/ping", headers: map[string]string{"X-Client": "exprd", "Accept-Language": "fr"}},
		},
		{
			name: "a custom body_field",
			tmpl: map[string]any{"http_method": "PATCH", "url": "/notes/{id}", "body_field": "patch"},
			args: map[string]any{"id": "n1", "patch": map[string]any{"title": "t"}, "body": "stays in the query"},
			want: want{method: "PATCH", uri: "/notes/n1?body=stays+in+the+query", body: `{"title":"t"}`},
		},
		{
			name: "content_type is the body's type",
			tmpl: map[string]any{"http_method": "POST", "url": "/form", "content_type": "application/x-www-form-urlencoded"},
			args: map[string]any{"body": map[string]any{"name": "Ann Lee", "age": 30}},
			want: want{method: "POST", uri: "/form", body: "age=30&name=Ann+Lee", headers: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}},
		},
		{
			name: "a text body for a text type is sent as is",
			tmpl: map[string]any{"http_method": "POST", "url": "/echo", "content_type": "text/plain"},
			args: map[string]any{"body": "hello there"},
			want: want{method: "POST", uri: "/echo", body: "hello there", headers: map[string]string{"Content-Type": "text/plain"}},
		},
		{
			name: "nested objects in the query as key[sub]",
			tmpl: map[string]any{"url": "/search"},
			args: map[string]any{"filter": map[string]any{"color": "red", "size": 42.5}},
			want: want{method: "GET", uri: "/search?filter[color]=red&filter[size]=42.5"},
		},
		{
			name: "the URL's own query is kept",
			tmpl: map[string]any{"url": "/v1/find?api=2"},
			args: map[string]any{"q": "a&b"},
			want: want{method: "GET", uri: "/v1/find?api=2&q=a%26b"},
		},
		{
			name: "api_key in a header, default X-Api-Key",
			tmpl: map[string]any{"url": "/secure", "auth": map[string]any{"auth_type": "api_key", "api_key": "k-123"}},
			args: map[string]any{},
			want: want{method: "GET", uri: "/secure", headers: map[string]string{"X-Api-Key": "k-123"}},
		},
		{
			name: "api_key as a bearer token",
			tmpl: map[string]any{"url": "/secure", "auth": map[string]any{"auth_type": "api_key", "api_key": "Bearer t0k", "var_name": "Authorization"}},
			args: map[string]any{},
			want: want{method: "GET", uri: "/secure", headers: map[string]string{"Authorization": "Bearer t0k"}},
		},
		{
			name: "api_key in the query, after the arguments",
			tmpl: map[string]any{"url": "/secure", "auth": map[string]any{"auth_type": "api_key", "api_key": "k 1", "var_name": "key", "location": "query"}},
			args: map[string]any{"q": "x"},
			want: want{method: "GET", uri: "/secure?q=x&key=k+1"},
		},
		{
			name: "api_key in a cookie",
			tmpl: map[string]any{"url": "/secure", "auth": map[string]any{"auth_type": "api_key", "api_key": "c00kie", "var_name": "session", "location": "cookie"}},
			args: map[string]any{},
			want: want{method: "GET", uri: "/secure", headers: map[string]string{"Cookie": "session=c00kie"}},
		},
		{
			name: "basic auth",
			tmpl: map[string]any{"url": "/secure", "auth": map[string]any{"auth_type": "basic", "username": "ann", "password": "pw"}},
			args: map[string]any{},
			want: want{method: "GET", uri: "/secure", headers: map[string]string{"Authorization": "Basic YW5uOnB3"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := utcptest.NewProvider(t, nil)
			r := utcptest.NewRegistry(t)
			tmpl := map[string]any{"call_template_type": "http"}
			for k, v := range tc.tmpl {
				tmpl[k] = v
			}
			tmpl["url"] = p.URL + tc.tmpl["url"].(string)
			utcptest.Register(t, r, "svc", utcptest.ManualOf("op", nil, tmpl))
			got, err := r.Call(context.Background(), "svc.op", tc.args)
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if !reflect.DeepEqual(got, map[string]any{"ok": true}) {
				t.Errorf("result: got %v, want map[ok:true]", got)
			}
			reqs := p.Requests()
			if len(reqs) != 1 {
				t.Fatalf("provider saw %d requests, want 1", len(reqs))
			}
			rq := reqs[0]
			if rq.Method != tc.want.method {
				t.Errorf("method: got %s, want %s", rq.Method, tc.want.method)
			}
			if rq.URI != tc.want.uri {
				t.Errorf("request URI: got %s, want %s", rq.URI, tc.want.uri)
			}
			if rq.Body != tc.want.body {
				t.Errorf("body: got %q, want %q", rq.Body, tc.want.body)
			}
			for k, v := range tc.want.headers {
				if got := rq.Header.Get(k); got != v {
					t.Errorf("header %s: got %q, want %q", k, got, v)
				}
			}
			for _, k := range tc.want.absent {
				if got, ok := rq.Header[http.CanonicalHeaderKey(k)]; ok {
					t.Errorf("header %s: got %q, want none", k, got)
				}
			}
		})
	}
}

// Arguments that cannot make a request are refused before anything is
// sent: a missing path parameter, a dot segment, a header value with a
// control character (net/http would refuse it only when sending, and it
// came back as an unreachable provider).
func TestHTTPRefusedArgumentsSendNothing(t *testing.T) {
	t.Parallel()
	p := utcptest.NewProvider(t, nil)
	r := utcptest.NewRegistry(t)
	utcptest.Register(t, r, "svc", utcptest.ManualOf("op", nil, map[string]any{"call_template_type": "http", "url": p.URL + "/users/{id}/{part}", "header_fields": []any{"X-Note"}}))
	for _, tc := range []struct {
		name string
		args map[string]any
		want string
	}{
		{"a missing path parameter", map[string]any{"id": 1}, `missing path parameter "part"`},
		{"a path parameter ..", map[string]any{"id": 1, "part": ".."}, `at /part: a path parameter cannot be "." or ".."`},
		{"a path parameter .", map[string]any{"id": ".", "part": "x"}, `at /id: a path parameter cannot be "." or ".."`},
		{"a header value with a backspace", map[string]any{"id": 1, "part": "x", "X-Note": "a\bb"}, "at /X-Note: a header value must not contain a control character"},
		{"a header value with LF", map[string]any{"id": 1, "part": "x", "X-Note": "a\nb"}, "at /X-Note: a header value must not contain a control character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.Call(context.Background(), "svc.op", tc.args)
			var ia *manual.InvalidArgumentsError
			if !errors.As(err, &ia) || !errors.Is(err, manual.ErrInvalidArguments) {
				t.Fatalf("got %v, want *InvalidArgumentsError", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %q, want it to say %q", err, tc.want)
			}
		})
	}
	// What is neither: "..." and a tab in a header are sent.
	if _, err := r.Call(context.Background(), "svc.op", map[string]any{"id": "...", "part": "x", "X-Note": "a\tb"}); err != nil {
		t.Errorf("got %v, want the call sent", err)
	}
	if got := len(p.Requests()); got != 1 {
		t.Errorf("provider saw %d requests, want 1 (the last call's)", got)
	}
}

func TestHTTPStatusErrorCarriesStatusAndBody(t *testing.T) {
	t.Parallel()
	p := utcptest.NewProvider(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = w.Write([]byte(`{"error":{"message":"amount must be positive","type":"invalid_request_error","code":"amount_invalid"}}`))
	})
	r := utcptest.NewRegistry(t, utcp.WithProviderMessages())
	utcptest.Register(t, r, "pay", utcptest.ManualOf("charge", nil, map[string]any{"call_template_type": "http", "http_method": "POST", "url": p.URL + "/charge"}))
	_, err := r.Call(context.Background(), "pay.charge", map[string]any{"body": map[string]any{"amount": -1}})
	var te *utcp.TransportError
	if !errors.As(err, &te) {
		t.Fatalf("got %v, want *TransportError", err)
	}
	if te.Status != 422 || te.Reason != utcp.ReasonStatus {
		t.Errorf("status, reason: got %d %s, want 422 status", te.Status, te.Reason)
	}
	if !reflect.DeepEqual(te.Body, map[string]any{"type": "invalid_request_error", "code": "amount_invalid"}) {
		t.Errorf("body: got %#v, want the error's type and code", te.Body)
	}
	if got, want := err.Error(), `tool "pay.charge": provider answered 422 Unprocessable Entity: {"code":"amount_invalid","type":"invalid_request_error"}`; got != want {
		t.Errorf("message: got %q, want %q", got, want)
	}
}

func TestHTTPResponseDecoding(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, ctype, body string
		want              any
	}{
		{"json", "application/json", `{"n":1.5,"a":[1,"x"]}`, map[string]any{"n": 1.5, "a": []any{1.0, "x"}}},
		{"problem json", "application/problem+json; charset=utf-8", `{"title":"t"}`, map[string]any{"title": "t"}},
		{"text", "text/plain; charset=utf-8", "42", "42"},
		{"html is text", "text/html", "<p>hi</p>", "<p>hi</p>"},
		{"empty body", "application/json", "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := utcptest.NewProvider(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.ctype)
				_, _ = w.Write([]byte(tc.body))
			})
			r := utcptest.NewRegistry(t)
			utcptest.Register(t, r, "svc", utcptest.ManualOf("op", nil, map[string]any{"call_template_type": "http", "url": p.URL}))
			got, err := r.Call(context.Background(), "svc.op", nil)
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

// A caller's response limit caps what a call reads, below the registry's:
// a body at it is read, one byte past it is ReasonTooLarge, whether the
// provider says its length or not.
func TestResponseLimitPerCall(t *testing.T) {
	t.Parallel()
	const limit = 1000
	for _, chunked := range []bool{false, true} {
		p := utcptest.NewProvider(t, func(w http.ResponseWriter, r *http.Request) {
			n, _ := strconv.Atoi(r.URL.Query().Get("n"))
			body := `"` + strings.Repeat("x", n-2) + `"`
			w.Header().Set("Content-Type", "application/json")
			if !chunked {
				w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			}
			_, _ = io.WriteString(w, body)
		})
		r := utcptest.NewRegistry(t)
		utcptest.Register(t, r, "big", utcptest.ManualOf("get", map[string]any{"type": "object"}, map[string]any{"call_template_type": "http", "url": p.URL}))
		ctx := utcp.WithResponseLimit(context.Background(), limit)
		if _, err := r.Call(ctx, "big.get", map[string]any{"n": limit}); err != nil {
			t.Errorf("chunked %v: a body at the limit: %v", chunked, err)
		}
		_, err := r.Call(ctx, "big.get", map[string]any{"n": limit + 1})
		var te *utcp.TransportError
		if !errors.As(err, &te) || te.Reason != utcp.ReasonTooLarge {
			t.Errorf("chunked %v: a body one past the limit: got %v, want ReasonTooLarge", chunked, err)
		}
		if _, err := r.Call(context.Background(), "big.get", map[string]any{"n": limit + 1}); err != nil {
			t.Errorf("chunked %v: without the caller's limit the registry's applies: %v", chunked, err)
		}
	}
}
