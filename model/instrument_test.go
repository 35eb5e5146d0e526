package model_test

import (
	"context"
	"errors"
	"io"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/model/openaicompat"
	"github.com/exprd/exprd/model/scripted"
)

// telemetry installs fresh global OpenTelemetry providers (Instrument uses
// the globals) until the test ends.
func telemetry(t *testing.T) (*sdkmetric.ManualReader, *tracetest.SpanRecorder) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	otel.SetMeterProvider(mp)
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()); _ = tp.Shutdown(context.Background()) })
	return reader, spans
}

// scriptedProvider is an OpenAI-compatible provider of a scripted server on
// loopback, both closed when the test ends.
func scriptedProvider(t *testing.T, turns ...scripted.Turn) model.Provider {
	t.Helper()
	srv, err := scripted.Start(scripted.Script{Turns: turns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	p, err := openaicompat.New("local", openaicompat.ProviderConfig{BaseURL: srv.BaseURL(), Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// modelMetrics reads the turns recorded by outcome, and the tokens.
func modelMetrics(t *testing.T, reader *sdkmetric.ManualReader) (turns map[string]uint64, tokens int64) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	turns = map[string]uint64{}
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
						outcome, _ := p.Attributes.Value("outcome")
						turns[outcome.AsString()] += p.Count
					}
				}
			}
		}
	}
	return turns, tokens
}

// TestInstrumentOutcome is the regression test for every successful turn
// being recorded as outcome="error" with an error span: a turn's stream is
// closed once its Response is in, before io.EOF, and that is a success.
// Only a turn that failed, or was closed before its Response, is an error;
// one whose context ended first is cancelled.
func TestInstrumentOutcome(t *testing.T) {
	// Not parallel: Instrument reads OpenTelemetry's global providers.
	usage := &scripted.Usage{PromptTokens: 7, CompletionTokens: 3, TotalTokens: 10}
	one := 1
	for _, tt := range []struct {
		name    string
		turn    scripted.Turn
		drive   func(ctx context.Context, cancel context.CancelFunc, p model.Provider) error
		outcome string
		tokens  int64
	}{
		{
			name: "Complete: the Response, then Close before io.EOF",
			turn: scripted.Turn{Text: "hello", Usage: usage},
			drive: func(ctx context.Context, _ context.CancelFunc, p model.Provider) error {
				r, err := model.Complete(ctx, p, model.Request{Messages: []model.Message{model.User("hi")}})
				if err == nil && r.Message.Content != "hello" {
					err = errors.New("got " + r.Message.Content + ", want hello")
				}
				return err
			},
			outcome: "ok", tokens: 10,
		},
		{
			name: "drained to io.EOF, then Close",
			turn: scripted.Turn{Text: "hello", Usage: usage},
			drive: func(ctx context.Context, _ context.CancelFunc, p model.Provider) error {
				s, err := p.Stream(ctx, model.Request{Messages: []model.Message{model.User("hi")}})
				if err != nil {
					return err
				}
				defer s.Close()
				for {
					if _, err := s.Recv(); err != nil {
						if errors.Is(err, io.EOF) {
							return nil
						}
						return err
					}
				}
			},
			outcome: "ok", tokens: 10,
		},
		{
			name: "closed before its Response",
			turn: scripted.Turn{Text: "hello there", ChunkDelayMS: 20},
			drive: func(ctx context.Context, _ context.CancelFunc, p model.Provider) error {
				s, err := p.Stream(ctx, model.Request{Messages: []model.Message{model.User("hi")}})
				if err != nil {
					return err
				}
				if _, err := s.Recv(); err != nil {
					return err
				}
				return s.Close()
			},
			outcome: "error",
		},
		{
			name: "the stream cut mid-reply",
			turn: scripted.Turn{Text: "hello there you", CutAfter: &one},
			drive: func(ctx context.Context, _ context.CancelFunc, p model.Provider) error {
				_, err := model.Complete(ctx, p, model.Request{Messages: []model.Message{model.User("hi")}})
				if err == nil {
					return errors.New("got a Response, want the stream cut")
				}
				return nil
			},
			outcome: "error",
		},
		{
			name: "the server refuses the request",
			turn: scripted.Turn{Error: &scripted.ErrorReply{Status: 400}},
			drive: func(ctx context.Context, _ context.CancelFunc, p model.Provider) error {
				if _, err := p.Stream(ctx, model.Request{Messages: []model.Message{model.User("hi")}}); err == nil {
					return errors.New("got a stream, want the server's 400")
				}
				return nil
			},
			outcome: "error",
		},
		{
			name: "the context ends mid-reply",
			turn: scripted.Turn{Text: "hello there", ChunkDelayMS: 20},
			drive: func(ctx context.Context, cancel context.CancelFunc, p model.Provider) error {
				s, err := p.Stream(ctx, model.Request{Messages: []model.Message{model.User("hi")}})
				if err != nil {
					return err
				}
				defer s.Close()
				if _, err := s.Recv(); err != nil {
					return err
				}
				cancel()
				for {
					if _, err := s.Recv(); err != nil {
						return nil
					}
				}
			},
			outcome: "cancelled",
		},
		{
			name: "the context ends, then Close before the Response",
			turn: scripted.Turn{Text: "hello there", ChunkDelayMS: 20},
			drive: func(ctx context.Context, cancel context.CancelFunc, p model.Provider) error {
				s, err := p.Stream(ctx, model.Request{Messages: []model.Message{model.User("hi")}})
				if err != nil {
					return err
				}
				cancel()
				return s.Close()
			},
			outcome: "cancelled",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			reader, spans := telemetry(t)
			p := model.Instrument("local", scriptedProvider(t, tt.turn))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if err := tt.drive(ctx, cancel, p); err != nil {
				t.Fatalf("driving the turn: %v", err)
			}
			turns, tokens := modelMetrics(t, reader)
			if len(turns) != 1 || turns[tt.outcome] != 1 {
				t.Errorf("exprd.model.duration: got turns by outcome %v, want one %q", turns, tt.outcome)
			}
			if tokens != tt.tokens {
				t.Errorf("exprd.model.tokens: got %d, want %d", tokens, tt.tokens)
			}
			ended := spans.Ended()
			if len(ended) != 1 || ended[0].Name() != "exprd.model.call" {
				t.Fatalf("got spans %v, want one exprd.model.call", ended)
			}
			wantStatus := codes.Unset
			if tt.outcome == "error" {
				wantStatus = codes.Error
			}
			if got := ended[0].Status(); got.Code != wantStatus {
				t.Errorf("span status: got %v %q, want %v", got.Code, got.Description, wantStatus)
			}
			var outcome string
			for _, a := range ended[0].Attributes() {
				if a.Key == "exprd.outcome" {
					outcome = a.Value.AsString()
				}
			}
			if outcome != tt.outcome {
				t.Errorf("span attribute exprd.outcome: got %q, want %q", outcome, tt.outcome)
			}
		})
	}
}
