package openaicompat

import (
	"bufio"
	"bytes"
	"fmt"
	"io"

	"github.com/exprd/exprd/model"
)

// MaxEventBytes bounds one line of a streamed reply (one chunk, as servers
// send them); a longer one is [model.ErrReplyTooLarge].
const MaxEventBytes = 8 << 20

// sseInitialBuffer fits a typical chunk's line; the buffer grows for longer
// ones.
const sseInitialBuffer = 1024

// sseReader splits a text/event-stream body into events (the WHATWG
// format: "data:" lines joined by newlines, "event:" names the event, a
// blank line ends it, ":" starts a comment). It keeps one buffer for the
// event's data and reuses it, where the SDK's decoder allocates a copy of
// every event.
type sseReader struct {
	body  io.ReadCloser
	sc    *bufio.Scanner
	typ   []byte // the event's type, from an "event:" line
	data  []byte // the event's data, reused
	has   bool   // a data line arrived for the event being read
	err   error
	ended bool
}

func newSSEReader(body io.ReadCloser) *sseReader {
	sc := bufio.NewScanner(body)
	// Room for the line's end too; the limit itself is checked per line.
	sc.Buffer(make([]byte, 0, sseInitialBuffer), MaxEventBytes+2)
	return &sseReader{body: body, sc: sc}
}

var (
	dataField  = []byte("data")
	eventField = []byte("event")
)

// next reads the next event: its data (valid until the next call) and
// type. At the body's end it returns io.EOF, or ErrStreamCut when the body
// broke off or ended inside an event, or ErrReplyTooLarge for a line over
// MaxEventBytes.
func (r *sseReader) next() (data, typ []byte, err error) {
	if r.ended {
		return nil, nil, r.err
	}
	r.data, r.typ, r.has = r.data[:0], r.typ[:0], false
	for r.sc.Scan() {
		line := r.sc.Bytes()
		if len(line) > MaxEventBytes {
			break
		}
		if len(line) == 0 {
			if r.has {
				return r.event()
			}
			r.typ = r.typ[:0]
			continue
		}
		name, value, _ := bytes.Cut(line, []byte{':'})
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		switch {
		case bytes.Equal(name, dataField):
			if r.has {
				r.data = append(r.data, '\n')
			}
			r.data = append(r.data, value...)
			r.has = true
		case bytes.Equal(name, eventField):
			r.typ = append(r.typ[:0], value...)
		}
	}
	r.ended = true
	switch err := r.sc.Err(); {
	case err == bufio.ErrTooLong || len(r.sc.Bytes()) > MaxEventBytes:
		r.err = fmt.Errorf("%w: a line longer than %d bytes", model.ErrReplyTooLarge, MaxEventBytes)
	case err != nil:
		r.err = fmt.Errorf("%w: %w", model.ErrStreamCut, err)
	case r.has && bytes.HasPrefix(r.data, doneData):
		// "data: [DONE]" as the body's last line, without the blank line.
		r.err = io.EOF
		return r.data, r.typ, nil
	case r.has:
		r.err = fmt.Errorf("%w: the body ended inside an event", model.ErrStreamCut)
	default:
		r.err = io.EOF
	}
	return nil, nil, r.err
}

func (r *sseReader) event() ([]byte, []byte, error) { return r.data, r.typ, nil }

func (r *sseReader) Close() error { return r.body.Close() }

// maxDrain bounds what drain reads: a server still sending after [DONE]
// is not worth its connection.
const maxDrain = 4 << 10

// drain reads what is left of the body, up to maxDrain bytes, so that the
// HTTP client can reuse the connection.
func (r *sseReader) drain() {
	_, _ = io.CopyN(io.Discard, r.body, maxDrain)
}
