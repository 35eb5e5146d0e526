package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// telemetry holds the providers and the /metrics server.
type telemetry struct {
	meters   *sdkmetric.MeterProvider
	metrics  *http.Server
	mux      *http.ServeMux
	addr     net.Addr
	shutdown []func(context.Context) error
}

// otlpSet reports whether the standard OTLP variables ask for an export.
func otlpSet(signal string) bool {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_" + signal + "_ENDPOINT"} {
		if os.Getenv(k) != "" {
			return true
		}
	}
	return false
}

// startTelemetry sets OpenTelemetry's global providers: metrics to a
// Prometheus registry served on metricsListen (empty: not served) and, when
// the OTEL_EXPORTER_OTLP_* variables are set, over OTLP; traces over OTLP
// when set. The W3C trace context is propagated to what exprd calls.
func startTelemetry(ctx context.Context, metricsListen string, log *slog.Logger) (*telemetry, error) {
	t := &telemetry{}
	res := resource.NewSchemaless(semconv.ServiceName("exprd"))
	reg := prometheus.NewRegistry()
	// The process's RSS and the Go runtime's goroutines, for the load tests.
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, err
	}
	mopts := []sdkmetric.Option{sdkmetric.WithResource(res), sdkmetric.WithReader(exporter)}
	// No exemplars unless the operator asks for them (the standard
	// OTEL_METRICS_EXEMPLAR_FILTER): the SDK's default offers every
	// histogram measurement to a filter that looks up the span in its
	// context, which took 5% of exprd's CPU on an agent turn, for exemplars
	// the Prometheus endpoint does not show.
	if os.Getenv("OTEL_METRICS_EXEMPLAR_FILTER") == "" {
		mopts = append(mopts, sdkmetric.WithExemplarFilter(exemplar.AlwaysOffFilter))
	}
	if otlpSet("METRICS") {
		exp, err := otlpmetricgrpc.New(ctx)
		if err != nil {
			return nil, err
		}
		mopts = append(mopts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
	}
	t.meters = sdkmetric.NewMeterProvider(mopts...)
	t.shutdown = append(t.shutdown, t.meters.Shutdown)
	// Spans are recorded only for an exporter: without one, a tracer that
	// records nothing still carries the caller's trace context on to what
	// exprd calls (a span recorded a turn for nobody was 1.1 KiB of each
	// turn in flight, and CPU).
	var tracers trace.TracerProvider = noop.NewTracerProvider()
	if otlpSet("TRACES") {
		exp, err := otlptracegrpc.New(ctx)
		if err != nil {
			return nil, err
		}
		sdk := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithBatcher(exp))
		t.shutdown = append(t.shutdown, sdk.Shutdown)
		tracers = sdk
	}
	otel.SetMeterProvider(t.meters)
	otel.SetTracerProvider(tracers)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))

	if metricsListen != "" {
		lis, err := net.Listen("tcp", metricsListen)
		if err != nil {
			return nil, err
		}
		t.mux = http.NewServeMux()
		t.mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		t.metrics = &http.Server{Handler: t.mux, ReadHeaderTimeout: 10 * time.Second}
		t.addr = lis.Addr()
		go func() {
			if err := t.metrics.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("metrics server", "err", err)
			}
		}()
		t.shutdown = append(t.shutdown, t.metrics.Shutdown)
	}
	return t, nil
}

// handle serves h at path on the metrics port, when it is served.
func (t *telemetry) handle(path string, h http.Handler) {
	if t.mux != nil {
		t.mux.Handle(path, h)
	}
}

// stop flushes and stops the exporters and the metrics server.
func (t *telemetry) stop(ctx context.Context) {
	for i := len(t.shutdown) - 1; i >= 0; i-- {
		_ = t.shutdown[i](ctx)
	}
}
