package model_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/model/openaicompat"
	"github.com/exprd/exprd/model/scripted"
)

// An instrumented provider makes a span per turn and records its latency
// and tokens.
func TestInstrument(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	otel.SetMeterProvider(mp)
	otel.SetTracerProvider(tp)
	defer func() { _ = mp.Shutdown(context.Background()); _ = tp.Shutdown(context.Background()) }()

	srv, err := scripted.Start(scripted.Script{Turns: []scripted.Turn{{Text: "hello", Usage: &scripted.Usage{PromptTokens: 7, CompletionTokens: 3, TotalTokens: 10}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	inner, err := openaicompat.New("local", openaicompat.ProviderConfig{BaseURL: srv.BaseURL(), Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	resp, err := model.Complete(context.Background(), model.Instrument("local", inner), model.Request{Messages: []model.Message{model.User("hi")}})
	if err != nil || resp.Message.Content != "hello" {
		t.Fatalf("got %q, %v", resp.Message.Content, err)
	}
	if ended := spans.Ended(); len(ended) != 1 || ended[0].Name() != "exprd.model.call" {
		t.Fatalf("got spans %v, want one exprd.model.call", ended)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var tokens int64
	var turns uint64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				if m.Name == "exprd.model.tokens" {
					for _, p := range d.DataPoints {
						tokens += p.Value
					}
				}
			case metricdata.Histogram[float64]:
				if m.Name == "exprd.model.duration" {
					for _, p := range d.DataPoints {
						turns += p.Count
					}
				}
			}
		}
	}
	if tokens != 10 || turns != 1 {
		t.Errorf("got %d tokens over %d turns, want 10 over 1", tokens, turns)
	}
}
