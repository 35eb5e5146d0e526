package providers

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/exprd/exprd/demo"
	"github.com/exprd/exprd/gen/grpcpb"
)

// Catalog is a gRPC UTCP provider (go-utcp's UTCPService) over the demo
// products: search {query}, get {id}, and the stream restock {id, times}.
type Catalog struct {
	grpcpb.UnimplementedUTCPServiceServer
	srv      *grpc.Server
	addr     string
	products []map[string]any
}

// StartCatalog serves Catalog on a loopback port.
func StartCatalog() (*Catalog, error) {
	var state struct {
		Products struct {
			Items []map[string]any `json:"items"`
		} `json:"products"`
	}
	if err := json.Unmarshal(demo.Products, &state); err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	c := &Catalog{srv: grpc.NewServer(), addr: lis.Addr().String(), products: state.Products.Items}
	grpcpb.RegisterUTCPServiceServer(c.srv, c)
	go func() { _ = c.srv.Serve(lis) }()
	return c, nil
}

// Addr is the provider's host:port.
func (c *Catalog) Addr() string { return c.addr }

// Close stops the provider.
func (c *Catalog) Close() { c.srv.Stop() }

// GetManual lists the tools, as go-utcp does: names and descriptions.
func (c *Catalog) GetManual(context.Context, *grpcpb.Empty) (*grpcpb.Manual, error) {
	return &grpcpb.Manual{Version: "1.0", Tools: []*grpcpb.Tool{
		{Name: "search", Description: "Finds products whose name contains the query: {query}."},
		{Name: "get", Description: "One product by id: {id}."},
		{Name: "restock", Description: "Streams restock events for a product: {id, times}."},
	}}, nil
}

// CallTool runs search and get.
func (c *Catalog) CallTool(_ context.Context, req *grpcpb.ToolCallRequest) (*grpcpb.ToolCallResponse, error) {
	var args map[string]any
	if err := json.Unmarshal([]byte(req.GetArgsJson()), &args); err != nil {
		return nil, fmt.Errorf("arguments are not JSON")
	}
	var out any
	switch tool := req.GetTool(); tool {
	case "search", "catalog.search":
		q, _ := args["query"].(string)
		found := []map[string]any{}
		for _, p := range c.products {
			if name, _ := p["name"].(string); strings.Contains(strings.ToLower(name), strings.ToLower(q)) {
				found = append(found, p)
			}
		}
		out = found
	case "get", "catalog.get":
		id, _ := args["id"].(string)
		for _, p := range c.products {
			if p["id"] == id {
				out = p
			}
		}
		if out == nil {
			return nil, fmt.Errorf("no product %q", id)
		}
	default:
		return nil, fmt.Errorf("no tool %q", tool)
	}
	b, _ := json.Marshal(out)
	return &grpcpb.ToolCallResponse{ResultJson: string(b)}, nil
}

// CallToolStream runs restock: times events, 10 ms apart.
func (c *Catalog) CallToolStream(req *grpcpb.ToolCallRequest, stream grpc.ServerStreamingServer[grpcpb.ToolCallResponse]) error {
	var args struct {
		ID    string  `json:"id"`
		Times float64 `json:"times"`
	}
	if err := json.Unmarshal([]byte(req.GetArgsJson()), &args); err != nil {
		return fmt.Errorf("arguments are not JSON")
	}
	for i := range int(args.Times) {
		b, _ := json.Marshal(map[string]any{"id": args.ID, "event": i + 1, "added": 5})
		if err := stream.Send(&grpcpb.ToolCallResponse{ResultJson: string(b)}); err != nil {
			return err
		}
		select {
		case <-stream.Context().Done():
			return stream.Context().Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}
