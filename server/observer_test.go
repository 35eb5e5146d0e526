package server_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/exprd/exprd/demo/providers"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/server"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/utcpall"
)

// A CodeMode program's tool call is measured at the registry
// (server.ToolCallObserver): exprd.tool.duration by tool and outcome, as
// ExprTool's server functions were before (issue: only those were).
func TestToolCallObserverMeasuresCodeMode(t *testing.T) {
	t.Parallel()
	reader := metric.NewManualReader()
	obs, err := server.ToolCallObserver(metric.NewMeterProvider(metric.WithReader(reader)), noop.NewTracerProvider())
	if err != nil {
		t.Fatal(err)
	}
	m, err := providers.StartMath()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	reg, err := utcpall.New(loopbackEgress, utcp.WithCallObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	if _, err := reg.Register(context.Background(), "math", utcp.FromURL(m.URL()+"/utcp")); err != nil {
		t.Fatal(err)
	}
	c := exprdv1.NewCodeModeClient(serve(t, newServer(t, server.WithRegistry(reg))))
	resp, err := c.Execute(context.Background(), &exprdv1.ExecuteRequest{
		Code: `codemode.CallTool("math.add", {"a": 2, "b": 3})`, Tools: []string{"math.add"}})
	if err != nil || resp.GetError() != nil {
		t.Fatalf("Execute: %v %v", err, resp.GetError())
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	want := attribute.NewSet(attribute.String("tool", "math.add"), attribute.String("outcome", "ok"))
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if h, ok := mt.Data.(metricdata.Histogram[float64]); ok && mt.Name == "exprd.tool.duration" {
				for _, dp := range h.DataPoints {
					if dp.Attributes.Equals(&want) && dp.Count == 1 {
						return
					}
				}
			}
		}
	}
	t.Errorf("no exprd.tool.duration point for math.add ok: %+v", rm.ScopeMetrics)
}
