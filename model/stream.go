package model

import (
	"context"
	"errors"
	"io"
)

// Provider runs one model turn.
type Provider interface {
	// Stream sends the request and returns the reply's stream once the
	// server has accepted it. Errors the server answers with before any
	// content (after the provider's retries) come back here; ctx bounds the
	// whole turn, reading included.
	Stream(ctx context.Context, req Request) (Stream, error)
}

// ProviderFunc adapts a function to [Provider].
type ProviderFunc func(ctx context.Context, req Request) (Stream, error)

// Stream implements [Provider].
func (f ProviderFunc) Stream(ctx context.Context, req Request) (Stream, error) { return f(ctx, req) }

var _ Provider = ProviderFunc(nil)

// Stream is a reply as it arrives.
type Stream interface {
	// Recv returns the next event: [TextDelta] and [ToolCallDelta] events
	// in the order the model produced them, then one [Response], then
	// io.EOF. Any other error ends the stream and no Response follows: a
	// stream that breaks never ends cleanly.
	Recv() (Event, error)
	// Close releases the reply (and aborts it, when it is not over). It is
	// safe to call more than once and after Recv's io.EOF. Recv after Close
	// returns ErrStreamClosed, or io.EOF when the Response was received.
	Close() error
}

// Event is a [TextDelta], a [ToolCallDelta] or a [Response].
type Event interface{ event() }

// TextDelta is the next piece of the assistant's text.
type TextDelta struct {
	Text string
}

// ToolCallDelta is the next piece of a tool call.
type ToolCallDelta struct {
	// Index is the call's position in the Response's Message.ToolCalls.
	Index int
	// ID and Name are the call's id and name as known so far. A call's
	// deltas start once it has a name (a call that never gets one is left
	// out); its id is usually there from the first delta on, and one a
	// server never sends is generated, which only the Response carries.
	ID, Name string
	// Arguments is this piece of the arguments' JSON text.
	Arguments string
}

func (TextDelta) event()     {}
func (ToolCallDelta) event() {}

// Complete runs a turn and drains its stream into the Response.
func Complete(ctx context.Context, p Provider, req Request) (Response, error) {
	s, err := p.Stream(ctx, req)
	if err != nil {
		return Response{}, err
	}
	defer s.Close()
	for {
		ev, err := s.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = ErrStreamCut
			}
			return Response{}, err
		}
		if r, ok := ev.(Response); ok {
			return r, nil
		}
	}
}

// NewResponseStream returns a Stream that replays a complete Response: its
// text as one TextDelta, each tool call as one ToolCallDelta, then the
// Response. Providers whose server does not stream use it, and so can tests.
func NewResponseStream(r Response) Stream {
	s := &responseStream{}
	if r.Message.Content != "" {
		s.events = append(s.events, TextDelta{Text: r.Message.Content})
	}
	for i, c := range r.Message.ToolCalls {
		s.events = append(s.events, ToolCallDelta{Index: i, ID: c.ID, Name: c.Name, Arguments: c.Arguments})
	}
	s.events = append(s.events, r)
	return s
}

type responseStream struct {
	events []Event
	closed bool
}

func (s *responseStream) Recv() (Event, error) {
	if s.closed && len(s.events) > 0 {
		return nil, ErrStreamClosed
	}
	if len(s.events) == 0 {
		return nil, io.EOF
	}
	ev := s.events[0]
	s.events = s.events[1:]
	return ev, nil
}

func (s *responseStream) Close() error {
	s.closed = true
	return nil
}

var _ Stream = (*responseStream)(nil)
