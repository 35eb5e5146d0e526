package evaltest

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/exprd/exprd/evaluator"
)

// Functions returns the catalogue of host functions the cases name, fresh
// on every call:
//
//   - echo (server) returns its argument;
//   - fail (server) fails with "boom";
//   - sleep (server) sleeps args.ms milliseconds, or until its context ends;
//   - total (server) takes {"rows": [{"price": N}, ...]} and returns
//     {"total": the sum of the prices};
//   - badOutput (server) declares a string result and returns a number;
//   - downloadCsv (client) takes {"rows": [...]};
//   - clientFail and clientSlow (client) fail and never answer, as
//     [ClientReply] says.
func Functions() map[string]evaluator.Function {
	fns := []evaluator.Function{
		{
			Name:        "echo",
			Description: "Returns its argument.",
			Runner:      evaluator.RunServer,
			Impl:        func(_ context.Context, args map[string]any) (any, error) { return args, nil },
		},
		{
			Name:        "fail",
			Description: "Always fails.",
			Runner:      evaluator.RunServer,
			Impl:        func(context.Context, map[string]any) (any, error) { return nil, errors.New("boom") },
		},
		{
			Name:        "sleep",
			Description: "Sleeps for ms milliseconds.",
			InputSchema: json.RawMessage(`{"type":"object","required":["ms"],"properties":{"ms":{"type":"number","minimum":0}}}`),
			Runner:      evaluator.RunServer,
			Impl:        sleep,
		},
		{
			Name:         "total",
			Description:  "Sums the prices of rows.\nThe rows are products or anything with a price.",
			InputSchema:  json.RawMessage(`{"type":"object","required":["rows"],"properties":{"rows":{"type":"array","items":{"$ref":"#/$defs/Row"}}},"$defs":{"Row":{"type":"object","required":["price"],"properties":{"price":{"type":"number"}}}}}`),
			OutputSchema: json.RawMessage(`{"type":"object","required":["total"],"properties":{"total":{"type":"number"}}}`),
			Runner:       evaluator.RunServer,
			Impl:         total,
		},
		{
			Name:         "badOutput",
			Description:  "Returns a number where its schema says a string.",
			OutputSchema: json.RawMessage(`{"type":"string"}`),
			Runner:       evaluator.RunServer,
			Impl:         func(context.Context, map[string]any) (any, error) { return 42, nil },
		},
		{
			Name:        "downloadCsv",
			Description: "Downloads rows as a CSV file in the user's browser.",
			InputSchema: json.RawMessage(`{"type":"object","required":["rows"],"properties":{"rows":{"type":"array"}}}`),
			Runner:      evaluator.RunClient,
		},
		{Name: "clientFail", Description: "Fails on the client.", Runner: evaluator.RunClient},
		{Name: "clientSlow", Description: "Never answers.", Runner: evaluator.RunClient},
	}
	out := make(map[string]evaluator.Function, len(fns))
	for _, f := range fns {
		out[f.Name] = f
	}
	return out
}

func sleep(ctx context.Context, args map[string]any) (any, error) {
	ms, _ := number(args["ms"])
	t := time.NewTimer(time.Duration(ms * float64(time.Millisecond)))
	defer t.Stop()
	select {
	case <-t.C:
		return map[string]any{"slept": args["ms"]}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func total(_ context.Context, args map[string]any) (any, error) {
	rows, _ := args["rows"].([]any)
	sum := 0.0
	for _, r := range rows {
		row, _ := r.(map[string]any)
		p, _ := number(row["price"])
		sum += p
	}
	return map[string]any{"total": sum}, nil
}

// number reads a JSON number as the evaluator hands it over: expr's ints
// stay int, JSON's numbers are float64.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// ClientReply is how a test client answers a client-run function:
// downloadCsv returns {"rows": len(args.rows), "file": "products.csv"},
// clientFail fails with "disk full", clientSlow never answers (hang), and
// any other name fails.
func ClientReply(name string, args map[string]any) (result any, err error, hang bool) {
	switch name {
	case "downloadCsv":
		rows, _ := args["rows"].([]any)
		return map[string]any{"rows": len(rows), "file": "products.csv"}, nil, false
	case "clientFail":
		return nil, errors.New("disk full"), false
	case "clientSlow":
		return nil, nil, true
	}
	return nil, errors.New("no such client function: " + name), false
}
