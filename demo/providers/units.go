package providers

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Units is an MCP server (the official Go SDK's, streamable HTTP,
// stateless) with one tool, convert: a temperature or a length from one
// unit to another, answering structured content {"value", "unit"}.
type Units struct {
	srv *http.Server
	url string
}

// UnitsInput and UnitsOutput are convert's arguments and result; the SDK
// derives the tool's input and output schemas from them.
type (
	UnitsInput struct {
		Value float64 `json:"value" jsonschema:"the quantity to convert"`
		From  string  `json:"from" jsonschema:"its unit: celsius, fahrenheit, kelvin, m, km, ft or mi"`
		To    string  `json:"to" jsonschema:"the unit wanted, of the same kind"`
	}
	UnitsOutput struct {
		Value float64 `json:"value"`
		Unit  string  `json:"unit"`
	}
)

// StartUnits serves Units on a loopback port, at /mcp.
func StartUnits() (*Units, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "units", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "convert", Title: "Convert units",
		Description: "Converts a temperature (celsius, fahrenheit, kelvin) or a length (m, km, ft, mi) to another unit of the same kind.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in UnitsInput) (*mcp.CallToolResult, UnitsOutput, error) {
			v, err := convert(in.Value, in.From, in.To)
			if err != nil {
				return nil, UnitsOutput{}, err
			}
			return nil, UnitsOutput{Value: v, Unit: in.To}, nil
		})
	u := &Units{url: "http://" + lis.Addr().String() + "/mcp"}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	u.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = u.srv.Serve(lis) }()
	return u, nil
}

// URL is the server's MCP endpoint.
func (u *Units) URL() string { return u.url }

// Close stops the server.
func (u *Units) Close() error { return u.srv.Close() }

// linear units: to and from a base unit (kelvin, metre).
var units = map[string]struct {
	kind         string
	scale, shift float64 // base = value*scale + shift
}{
	"celsius":    {"temperature", 1, 273.15},
	"fahrenheit": {"temperature", 5.0 / 9, 273.15 - 32*5.0/9},
	"kelvin":     {"temperature", 1, 0},
	"m":          {"length", 1, 0},
	"km":         {"length", 1000, 0},
	"ft":         {"length", 0.3048, 0},
	"mi":         {"length", 1609.344, 0},
}

func convert(v float64, from, to string) (float64, error) {
	f, okF := units[from]
	t, okT := units[to]
	switch {
	case !okF:
		return 0, fmt.Errorf("unknown unit %q", from)
	case !okT:
		return 0, fmt.Errorf("unknown unit %q", to)
	case f.kind != t.kind:
		return 0, fmt.Errorf("%s is a %s and %s a %s", from, f.kind, to, t.kind)
	}
	out := ((v*f.scale + f.shift) - t.shift) / t.scale
	// Rounded to 1e-9, so that 100 °C is 212 °F, not 212.00000000000003.
	return math.Round(out*1e9) / 1e9, nil
}
