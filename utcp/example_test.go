package utcp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/exprd/exprd/internal/egress"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/httptransport"
	"github.com/exprd/exprd/utcp/manual"
	"github.com/exprd/exprd/utcp/search"
)

func Example() {
	// A provider: POST /math/add?a=2&b=3 answers {"result": 5}.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"result": 5}`)
	}))
	defer srv.Close()

	// The registry's parts are given to it: here the HTTP-family
	// transports and exprd's search (utcpall.New gives every part).
	transports, err := httptransport.Transports()
	if err != nil {
		panic(err)
	}
	r, err := utcp.New(utcp.WithTransports(transports), utcp.WithIndex(search.New()),
		utcp.WithVariables(map[string]string{"math_TOKEN": "t0k"}), utcp.WithEgress(egress.MustParse("loopback")))
	if err != nil {
		panic(err)
	}
	defer r.Close()

	doc := `{"utcp_version": "1.1.0", "manual_version": "1.0.0", "tools": [{
	  "name": "add", "description": "Add two numbers", "tags": ["math"],
	  "inputs": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]},
	  "tool_call_template": {"call_template_type": "http", "http_method": "POST", "url": "` + srv.URL + `/math/add",
	    "auth": {"auth_type": "api_key", "api_key": "Bearer ${TOKEN}", "var_name": "Authorization"}}}]}`
	reg, err := r.Register(context.Background(), "math", utcp.FromText(doc).AllowProtocols(utcp.TypeHTTP))
	if err != nil {
		panic(err)
	}
	fmt.Println(reg.Tools)

	fmt.Println(r.Search("sum two numbers", 1)[0].Tool.Name)

	v, err := r.Call(context.Background(), "math.add", map[string]any{"a": 2, "b": 3})
	fmt.Println(v, err)

	_, err = r.Call(context.Background(), "math.add", map[string]any{"a": 2})
	fmt.Println(errors.Is(err, manual.ErrInvalidArguments), err)

	_, err = r.Call(context.Background(), "add", nil)
	fmt.Println(err)
	// Output:
	// [math.add]
	// math.add
	// map[result:5] <nil>
	// true tool "math.add": invalid arguments: at /: missing property 'b'
	// tool "add" not found; did you mean "math.add"?
}
