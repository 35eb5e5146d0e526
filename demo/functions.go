package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"

	"github.com/exprd/exprd/evaluator"
)

// Functions are the server-run functions of `exprd --demo`. A session
// declares them by name with RUNNER_SERVER.
func Functions(log *slog.Logger) []evaluator.Function {
	return []evaluator.Function{
		{
			Name:         "convertPrice",
			Description:  "Converts an amount in EUR to another currency (USD, GBP, JPY) at the demo's fixed rates.",
			InputSchema:  json.RawMessage(`{"type":"object","required":["amount","to"],"additionalProperties":false,"properties":{"amount":{"type":"number"},"to":{"enum":["EUR","USD","GBP","JPY"]}}}`),
			OutputSchema: json.RawMessage(`{"type":"number"}`),
			Impl: func(_ context.Context, args map[string]any) (any, error) {
				rates := map[string]float64{"EUR": 1, "USD": 1.08, "GBP": 0.85, "JPY": 162}
				v := args["amount"].(float64) * rates[args["to"].(string)]
				return math.Round(v*100) / 100, nil
			},
		},
		{
			Name:         "notify",
			Description:  "Shows a short message to the user in the app's notification area.",
			InputSchema:  json.RawMessage(`{"type":"object","required":["message"],"additionalProperties":false,"properties":{"message":{"type":"string","maxLength":200}}}`),
			OutputSchema: json.RawMessage(`{"type":"object","properties":{"shown":{"type":"boolean"}}}`),
			Impl: func(ctx context.Context, args map[string]any) (any, error) {
				log.InfoContext(ctx, "demo notify", "message", args["message"])
				return map[string]any{"shown": true}, nil
			},
		},
		{
			Name:         "stockValue",
			Description:  "Sums price × stock over the given products.",
			InputSchema:  json.RawMessage(`{"type":"object","required":["items"],"properties":{"items":{"type":"array","items":{"$ref":"#/$defs/Product"}}},"$defs":{"Product":{"type":"object","required":["price","stock"],"properties":{"id":{"type":"string"},"price":{"type":"number"},"stock":{"type":"integer"}}}}}`),
			OutputSchema: json.RawMessage(`{"type":"number"}`),
			Impl: func(_ context.Context, args map[string]any) (any, error) {
				var sum float64
				for _, it := range args["items"].([]any) {
					p := it.(map[string]any)
					sum += p["price"].(float64) * p["stock"].(float64)
				}
				if math.IsInf(sum, 0) {
					return nil, fmt.Errorf("the sum is too large")
				}
				return math.Round(sum*100) / 100, nil
			},
		},
	}
}
