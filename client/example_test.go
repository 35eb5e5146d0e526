package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"net"
	"sort"

	"github.com/exprd/exprd/client"
	"github.com/exprd/exprd/demo"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/server"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/utcpall"
)

// startServer serves exprd on a loopback port until stop is called.
func startServer(opts ...server.Option) (addr string, stop func(), err error) {
	srv, err := server.New(opts...)
	if err != nil {
		return "", nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	return lis.Addr().String(), func() { srv.Stop(); <-served }, nil
}

// downloadCsv is a client-run function: the server asks the client to run it.
var downloadCsv = &exprdv1.Function{
	Name:            "downloadCsv",
	Description:     "Downloads rows as a CSV file for the user.",
	InputSchemaJson: `{"type":"object","required":["rows"],"properties":{"rows":{"type":"array","items":{"type":"object"}}}}`,
	Runner:          exprdv1.Function_RUNNER_CLIENT,
}

// A session holds the UI's state; the call selects the five lowest priced
// products and hands them to a function the client runs.
func ExampleClient_OpenSession() {
	addr, stop, err := startServer()
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	c, err := client.Dial(addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	settings := &exprdv1.Settings{Functions: []*exprdv1.Function{downloadCsv}}
	s, err := c.OpenSession(ctx, settings, nil, client.Handlers{
		Functions: map[string]client.Function{
			"downloadCsv": func(_ context.Context, args json.RawMessage) (json.RawMessage, error) {
				var in struct {
					Rows []struct {
						ID    string  `json:"id"`
						Price float64 `json:"price"`
					} `json:"rows"`
				}
				if err := json.Unmarshal(args, &in); err != nil {
					return nil, err
				}
				for _, r := range in.Rows {
					fmt.Printf("csv %s,%v\n", r.ID, r.Price)
				}
				return json.Marshal(map[string]int{"rows": len(in.Rows)})
			},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	if err := s.SetState(ctx, demo.Products); err != nil {
		log.Fatal(err)
	}
	res, err := s.Call(ctx, []byte(`{"steps": [
		{"set": "scopes.root.selected",
		 "expr": "fromPairs(map(sortBy(scopes.root.products.items, .price)[:5], [.id, true]))"},
		{"expr": "downloadCsv({rows: filter(scopes.root.products.items, .id in scopes.root.selected)})"}]}`))
	if err != nil {
		log.Fatal(err)
	}
	for _, w := range res.Writes {
		fmt.Printf("write step=%d path=%s value=%s\n", w.GetStep(), w.GetPath(), w.GetValueJson())
	}
	fmt.Printf("answer %s\n", res.Answer.GetAnswerJson())
	// Output:
	// csv p02,10.55
	// csv p03,8.84
	// csv p08,17.71
	// csv p15,11.66
	// csv p17,10.64
	// write step=0 path=scopes.root.selected value={"p02":true,"p03":true,"p08":true,"p15":true,"p17":true}
	// answer {}
}

// A unary Call carries its state; the server keeps nothing.
func ExampleClient_Call() {
	addr, stop, err := startServer()
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	c, err := client.Dial(addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	resp, err := c.Call(context.Background(), &exprdv1.CallRequest{
		Settings:  &exprdv1.Settings{Read: true},
		StateJson: `{"cart": [{"sku": "a", "price": 3, "qty": 2}, {"sku": "b", "price": 5, "qty": 1}]}`,
		InputJson: `{"steps": [{"set": "scopes.root.total", "expr": "sum(map(scopes.root.cart, .price * .qty))"}],
			"read": "scopes.root.total"}`,
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, w := range resp.GetWrites() {
		fmt.Printf("write step=%d path=%s value=%s\n", w.GetStep(), w.GetPath(), w.GetValueJson())
	}
	fmt.Printf("answer %s\n", resp.GetAnswerJson())
	// Output:
	// write step=0 path=scopes.root.total value=11
	// answer {"value":11}
}

// Describe renders the tool for given settings: with read on, its input
// schema offers "read".
func ExampleClient_Describe() {
	addr, stop, err := startServer()
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	c, err := client.Dial(addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	for _, read := range []bool{false, true} {
		d, err := c.Describe(context.Background(), &exprdv1.Settings{Read: read})
		if err != nil {
			log.Fatal(err)
		}
		var schema struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal([]byte(d.GetInputSchemaJson()), &schema); err != nil {
			log.Fatal(err)
		}
		props := make([]string, 0, len(schema.Properties))
		for k := range schema.Properties {
			props = append(props, k)
		}
		sort.Strings(props)
		fmt.Printf("%s read=%v input properties %v\n", d.GetName(), read, props)
	}
	// Output:
	// expr read=false input properties [steps]
	// expr read=true input properties [read steps]
}

// shopManual is a UTCP manual of three tools, registered inline.
const shopManual = `{"utcp_version": "1.0.1", "tools": [
	{"name": "find", "description": "Finds products by name.",
	 "inputs": {"type": "object", "properties": {"query": {"type": "string"}}},
	 "tool_call_template": {"call_template_type": "http", "http_method": "GET", "url": "https://shop.example/find"}},
	{"name": "get", "description": "One product by id.",
	 "inputs": {"type": "object", "properties": {"id": {"type": "string"}}},
	 "tool_call_template": {"call_template_type": "http", "http_method": "GET", "url": "https://shop.example/get"}},
	{"name": "restock", "description": "Restocks a product.",
	 "inputs": {"type": "object", "properties": {"id": {"type": "string"}, "n": {"type": "integer"}}},
	 "tool_call_template": {"call_template_type": "http", "http_method": "POST", "url": "https://shop.example/restock"}}]}`

// Tools lists the registry's tools across pages, here two a page; the full
// view carries each tool's input schema.
func ExampleClient_Tools() {
	reg, err := utcpall.New(utcp.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Close()
	addr, stop, err := startServer(server.WithRegistry(reg), server.WithRegistryWritesWithoutAuth())
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	c, err := client.Dial(addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	if _, err := c.ToolRegistry().RegisterManual(ctx, &exprdv1.RegisterManualRequest{
		Name: "shop", Source: &exprdv1.RegisterManualRequest_ManualJson{ManualJson: shopManual},
	}); err != nil {
		log.Fatal(err)
	}
	req := &exprdv1.ListToolsRequest{Manual: "shop", PageSize: 2, View: exprdv1.ToolView_TOOL_VIEW_FULL}
	for t, err := range c.Tools(ctx, req) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s %s\n", t.GetName(), t.GetInputSchemaJson())
	}
	// Output:
	// shop.find {"properties":{"query":{"type":"string"}},"type":"object"}
	// shop.get {"properties":{"id":{"type":"string"}},"type":"object"}
	// shop.restock {"properties":{"id":{"type":"string"},"n":{"type":"integer"}},"type":"object"}
}
