package evaluator_test

import (
	"context"
	"slices"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/exprd/exprd/evaluator"
	"github.com/exprd/exprd/evaluator/evaltest"
)

// A call inside a recorded trace records its run and its compile as
// children; a call outside any trace records nothing.
func TestSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev) })

	e := newEvaluator(t)
	tool := newTool(t, evaluator.Settings{})
	tests := []struct {
		name   string
		traced bool
		src    string
		want   []string
	}{
		{"outside a trace", false, "1 + 1", nil},
		{"inside a trace", true, "2 + 2", []string{"exprd.evaluator.Run", "exprd.evaluator.compile", "parent"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(rec.Ended())
			ctx := context.Background()
			var end func()
			if tc.traced {
				c, s := tp.Tracer("test").Start(ctx, "parent")
				ctx, end = c, func() { s.End() }
			}
			if a := e.Run(ctx, tool, evaluator.NewState(), setInput("scopes.root.x", tc.src), evaltest.NewHost(nil)); a.Err != nil {
				t.Fatal(a.Err)
			}
			if end != nil {
				end()
			}
			var got []string
			for _, s := range rec.Ended()[before:] {
				got = append(got, s.Name())
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("spans %v, want %v", got, tc.want)
			}
		})
	}
}
