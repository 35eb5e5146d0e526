package model

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Instrument wraps a provider so that each turn is a span
// ("exprd.model.call") and its latency (exprd.model.duration, by provider
// and outcome) and tokens (exprd.model.tokens, by provider and kind) are
// recorded, with OpenTelemetry's global providers. The turn's time runs
// from the request to the stream's end.
func Instrument(name string, p Provider) Provider {
	m := otel.Meter("github.com/exprd/exprd/model")
	dur, _ := m.Float64Histogram("exprd.model.duration", metric.WithUnit("s"),
		metric.WithDescription("Model turn latency, from the request to the end of the reply."))
	tokens, _ := m.Int64Counter("exprd.model.tokens", metric.WithDescription("Tokens of model turns, by kind (prompt, completion)."))
	tracer := otel.Tracer("github.com/exprd/exprd/model")
	return ProviderFunc(func(ctx context.Context, req Request) (Stream, error) {
		ctx, span := tracer.Start(ctx, "exprd.model.call", trace.WithAttributes(attribute.String("exprd.provider", name)))
		s := &instrumented{ctx: ctx, name: name, span: span, start: time.Now(), dur: dur, tokens: tokens}
		inner, err := p.Stream(ctx, req)
		if err != nil {
			s.end(err, nil)
			return nil, err
		}
		s.Stream = inner
		return s, nil
	})
}

type instrumented struct {
	Stream
	ctx    context.Context
	name   string
	span   trace.Span
	start  time.Time
	dur    metric.Float64Histogram
	tokens metric.Int64Counter
	once   sync.Once
	resp   *Response
}

func (s *instrumented) Recv() (Event, error) {
	ev, err := s.Stream.Recv()
	if r, ok := ev.(Response); ok {
		s.resp = &r
	}
	if err != nil {
		s.end(err, s.resp)
	}
	return ev, err
}

func (s *instrumented) Close() error {
	err := s.Stream.Close()
	s.end(errors.New("closed before its end"), s.resp)
	return err
}

// end records the turn once: at io.EOF, an error, or Close.
func (s *instrumented) end(err error, r *Response) {
	s.once.Do(func() {
		outcome := "ok"
		if !errors.Is(err, io.EOF) || r == nil {
			outcome = "error"
			s.span.SetStatus(codes.Error, err.Error())
		}
		ctx := context.WithoutCancel(s.ctx)
		attrs := metric.WithAttributes(attribute.String("provider", s.name), attribute.String("outcome", outcome))
		s.dur.Record(ctx, time.Since(s.start).Seconds(), attrs)
		if r != nil {
			s.span.SetAttributes(attribute.String("exprd.finish_reason", string(r.FinishReason)),
				attribute.Int64("exprd.tokens.prompt", r.Usage.PromptTokens), attribute.Int64("exprd.tokens.completion", r.Usage.CompletionTokens))
			s.tokens.Add(ctx, r.Usage.PromptTokens, metric.WithAttributes(attribute.String("provider", s.name), attribute.String("kind", "prompt")))
			s.tokens.Add(ctx, r.Usage.CompletionTokens, metric.WithAttributes(attribute.String("provider", s.name), attribute.String("kind", "completion")))
		}
		s.span.End()
	})
}
