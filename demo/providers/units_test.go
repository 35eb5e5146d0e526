package providers

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestUnitsConvert(t *testing.T) {
	t.Parallel()
	u, err := StartUnits()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = u.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: u.URL()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	cases := []struct {
		value    float64
		from, to string
		want     float64
		wantErr  bool
	}{
		{100, "celsius", "fahrenheit", 212, false},
		{32, "fahrenheit", "celsius", 0, false},
		{0, "kelvin", "celsius", -273.15, false},
		{1, "mi", "km", 1.609344, false},
		{1, "m", "celsius", 0, true},
		{1, "furlong", "m", 0, true},
	}
	for _, tc := range cases {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "convert", Arguments: map[string]any{"value": tc.value, "from": tc.from, "to": tc.to}})
		if err != nil {
			t.Fatal(err)
		}
		if tc.wantErr {
			if !res.IsError {
				t.Errorf("%v %s → %s: got %v, want an error result", tc.value, tc.from, tc.to, res.StructuredContent)
			}
			continue
		}
		out, _ := res.StructuredContent.(map[string]any)
		if res.IsError || out["value"] != tc.want || out["unit"] != tc.to {
			t.Errorf("%v %s → %s: got %v, want %v %s", tc.value, tc.from, tc.to, res.StructuredContent, tc.want, tc.to)
		}
	}
}
