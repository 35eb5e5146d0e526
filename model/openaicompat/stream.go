package openaicompat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/exprd/exprd/internal/sse"
	"github.com/exprd/exprd/model"
)

// MaxEventBytes bounds one line of a streamed reply, and one event's data
// (one chunk, as servers send them); a longer one is [model.ErrReplyTooLarge].
const MaxEventBytes = 8 << 20

const (
	// drainWait bounds the wait for the body's end after [DONE].
	drainWait = 100 * time.Millisecond
	// maxDrain bounds what is read after [DONE]: a server still sending
	// then is not worth its connection.
	maxDrain = 4 << 10
)

var (
	doneData  = []byte("[DONE]")
	nullValue = []byte("null")
)

// errorEvent is the type of an event some servers send an error in.
const errorEvent = "error"

// chatStream reads a streamed reply event by event: internal/sse splits
// the body into events, and each chunk is decoded into the few fields a
// turn needs (wire.go). It starts no goroutine: Recv reads in the caller's.
type chatStream struct {
	p      *Provider
	ctx    context.Context
	cancel context.CancelFunc
	body   io.ReadCloser
	sse    *sse.Reader
	asm    assembler
	chunk  wireChunk
	queue  []model.Event
	next   int
	head   bool  // the first chunk's id and model are read
	err    error // returned once the queue is drained; io.EOF after a Response
	closed bool
}

var _ model.Stream = (*chatStream)(nil)

func newChatStream(ctx context.Context, cancel context.CancelFunc, p *Provider, body io.ReadCloser) *chatStream {
	return &chatStream{p: p, ctx: ctx, cancel: cancel, body: body, sse: sse.NewReader(body, MaxEventBytes), queue: make([]model.Event, 0, 4)}
}

func (s *chatStream) Recv() (model.Event, error) {
	for s.next == len(s.queue) {
		if s.err != nil {
			return nil, s.err
		}
		s.queue, s.next = s.queue[:0], 0
		if err := s.read(); err != nil {
			s.end(err)
		}
	}
	ev := s.queue[s.next]
	s.queue[s.next] = nil
	s.next++
	return ev, nil
}

// read takes in the next event; io.EOF when the reply is over.
func (s *chatStream) read() error {
	ev, err := s.sse.Next()
	if err != nil {
		return s.readErr(err)
	}
	data := ev.Data
	if bytes.HasPrefix(data, doneData) {
		return io.EOF
	}
	// Reuse the choices' array, zeroed: encoding/json decodes into the
	// elements it reuses without clearing them first.
	choices := s.chunk.Choices[:cap(s.chunk.Choices)]
	clear(choices)
	s.chunk = wireChunk{Choices: choices[:0]}
	if err := json.Unmarshal(data, &s.chunk); err != nil {
		return fmt.Errorf("%w: %w", model.ErrMalformedChunk, err)
	}
	if !s.head {
		s.head = true
		var h wireHead
		_ = json.Unmarshal(data, &h) // valid JSON, as just decoded; a mistyped id is no loss
		s.asm.id, s.asm.model = h.ID, h.Model
	}
	if e := s.chunk.Error; (len(e) > 0 && !bytes.Equal(e, nullValue)) || ev.Type == errorEvent {
		return fmt.Errorf("%w: %s", model.ErrModelReported, reportedMessage(e, data))
	}
	s.asm.add(&s.chunk, &s.queue)
	if s.asm.size > MaxReplyBytes {
		return fmt.Errorf("%w: more than %d bytes of text, tool calls and arguments", model.ErrReplyTooLarge, MaxReplyBytes)
	}
	return nil
}

// readErr maps how the body ended onto the stream's errors; io.EOF when
// the reply is over.
func (s *chatStream) readErr(err error) error {
	var cut *sse.UnterminatedError
	switch {
	case s.ctx.Err() != nil:
		return s.ctx.Err()
	case errors.As(err, &cut) && bytes.HasPrefix(cut.Event.Data, doneData):
		// "data: [DONE]" as the body's last line, without the blank line.
		return io.EOF
	case errors.As(err, &cut):
		return fmt.Errorf("%w: the body ended inside an event", model.ErrStreamCut)
	case errors.Is(err, sse.ErrTooLarge):
		return fmt.Errorf("%w: %w", model.ErrReplyTooLarge, err)
	case err == io.EOF && !s.asm.sawFinish:
		return fmt.Errorf("%w: the body ended with neither a finish reason nor [DONE]", model.ErrStreamCut)
	case err == io.EOF:
		return io.EOF // a server that sends no [DONE] after its finish reason
	}
	return fmt.Errorf("%w: %w", model.ErrStreamCut, err)
}

// end settles how the stream ended: a Response then io.EOF, or an error.
func (s *chatStream) end(err error) {
	defer s.release()
	if err == io.EOF {
		resp, rerr := s.asm.response()
		if rerr == nil {
			s.queue = append(s.queue, resp)
		}
		err = rerr
	}
	if err != nil {
		s.err = s.p.wrap(err)
		return
	}
	s.err = io.EOF
}

// Close aborts the reply if it is not over and releases the connection.
// Events not yet received are dropped.
func (s *chatStream) Close() error {
	if s.err == nil || s.next < len(s.queue) {
		s.err = s.p.wrap(model.ErrStreamClosed)
	}
	s.queue, s.next = nil, 0
	return s.release()
}

// release ends the request. After a reply that is over, it first reads
// the body's end (what follows [DONE]: the chunked encoding's last chunk)
// so that the connection goes back to the pool; cancelling first would
// close it and cost the next request a new one.
func (s *chatStream) release() error {
	if s.closed {
		return nil
	}
	s.closed = true
	if s.err == io.EOF {
		// A server that neither ends the body nor sends more gets cut.
		t := time.AfterFunc(drainWait, s.cancel)
		_, _ = io.CopyN(io.Discard, s.body, maxDrain)
		t.Stop()
	}
	err := s.body.Close()
	s.cancel()
	return err
}

// reportedMessage is the message of an error event: error.message, else
// the error value, else the whole event.
func reportedMessage(e json.RawMessage, data []byte) string {
	var obj struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(e, &obj) == nil && obj.Message != "" {
		return obj.Message
	}
	var text string
	if json.Unmarshal(e, &text) == nil && text != "" {
		return text
	}
	return string(bytes.TrimSpace(data))
}
