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
// from the request to the stream's end: io.EOF, an error, or Close.
//
// The outcome is "ok" for a turn that delivered its Response, however its
// stream then ended (callers such as [Complete] Close it without reading
// io.EOF); "cancelled" when the turn's context ended first; else "error"
// (the request failed, the stream broke, or it was closed before its
// Response), and only then is the span's status an error.
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
			s.end(err)
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
		s.end(err)
	}
	return ev, err
}

func (s *instrumented) Close() error {
	err := s.Stream.Close()
	s.end(errClosedEarly)
	return err
}

// errClosedEarly ends a turn closed before its stream ended; it is an error
// only when no Response came.
var errClosedEarly = errors.New("closed before its Response")

// outcome classes a turn that ended with err (io.EOF, errClosedEarly or
// another error), given the Response it delivered, if any.
func (s *instrumented) outcome(err error) string {
	switch {
	case s.resp != nil && (errors.Is(err, io.EOF) || errors.Is(err, errClosedEarly)):
		return "ok"
	case s.ctx.Err() != nil:
		return "cancelled"
	default:
		return "error"
	}
}

// end records the turn once: at io.EOF, an error, or Close.
func (s *instrumented) end(err error) {
	s.once.Do(func() {
		r := s.resp
		outcome := s.outcome(err)
		s.span.SetAttributes(attribute.String("exprd.outcome", outcome))
		if outcome == "error" { // a cancelled turn is the caller's doing, not a failure
			if errors.Is(err, io.EOF) {
				err = ErrStreamCut
			}
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
