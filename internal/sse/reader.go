package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
)

var (
	// ErrTooLarge: a line, or an event's data, is longer than the reader's
	// maxBytes.
	ErrTooLarge = errors.New("sse: a line or an event's data is larger than the limit")
	// ErrUnterminated: the stream ended with an event's data pending; the
	// error is an [*UnterminatedError].
	ErrUnterminated = errors.New("sse: the stream ended inside an event")
)

// UnterminatedError is the end of a stream inside an event: data had come
// since the last blank line. The event was not dispatched.
type UnterminatedError struct {
	// Event is the event as it stood when the stream ended.
	Event Event
}

func (e *UnterminatedError) Error() string {
	return fmt.Sprintf("%v: %d bytes of data with no blank line after them", ErrUnterminated, len(e.Event.Data))
}

func (e *UnterminatedError) Unwrap() error { return ErrUnterminated }

// Event is one dispatched event.
type Event struct {
	// Type is the last "event" field's value, "message" when there was none.
	Type string
	// Data is the "data" fields' values joined with "\n". It belongs to the
	// [Reader] and holds until the next call to [Reader.Next]: copy it to
	// keep it longer.
	Data []byte
	// ID is the last event ID: the latest "id" field's value so far, this
	// event's or an earlier one's.
	ID string
}

// initialBuffer fits a few lines of a model's stream; the buffer grows up
// to maxBytes+1 for longer ones.
const initialBuffer = 1 << 10

// maxEmptyReads is how many reads in a row may return nothing before the
// source counts as stuck (io.ErrNoProgress), as in bufio.
const maxEmptyReads = 100

var bom = []byte("\xef\xbb\xbf")

// defaultType is the type of an event without an "event" field.
const defaultType = "message"

// Reader reads events from a stream. It is not safe for concurrent use.
type Reader struct {
	src  io.Reader
	max  int
	buf  []byte
	r, w int // buf[r:w] is read and not yet used
	// scan is how far past r the buffer is known to hold no line end.
	scan    int
	eof     bool  // src has ended
	readErr error // why, when not at io.EOF
	started bool  // the byte-order mark is dealt with
	skipLF  bool  // the last line ended with CR: an LF next is part of its end

	typ, id  string
	data     []byte
	hasData  bool
	retry    time.Duration
	hasRetry bool
	err      error // the error every later call returns
}

// NewReader reads events from src, each line and each event's data at most
// maxBytes long. maxBytes below 1 is a programming error: NewReader panics.
func NewReader(src io.Reader, maxBytes int) *Reader {
	if maxBytes < 1 {
		panic("sse: NewReader: maxBytes must be at least 1")
	}
	return &Reader{src: src, max: maxBytes}
}

// Next returns the next event. At the stream's end it returns io.EOF, or an
// [*UnterminatedError] when the stream ended inside an event; past the
// limit, an error wrapping [ErrTooLarge]; or the source's read error. See
// the package doc.
func (r *Reader) Next() (Event, error) {
	if r.err != nil {
		return Event{}, r.err
	}
	ev, err := r.next()
	if err != nil {
		r.err = err
	}
	return ev, err
}

// Retry is the reconnection time the stream asked for with its last valid
// "retry" field, and whether it asked at all.
func (r *Reader) Retry() (time.Duration, bool) { return r.retry, r.hasRetry }

func (r *Reader) next() (Event, error) {
	r.data, r.typ, r.hasData = r.data[:0], "", false
	for {
		line, ok, err := r.line()
		switch {
		case err != nil:
			return Event{}, err
		case !ok && r.hasData:
			return Event{}, &UnterminatedError{Event: r.event()}
		case !ok:
			return Event{}, io.EOF
		case len(line) == 0 && r.hasData:
			return r.event(), nil
		case len(line) == 0:
			r.typ = ""
		case line[0] != ':':
			if err := r.field(line); err != nil {
				return Event{}, err
			}
		}
	}
}

func (r *Reader) event() Event {
	typ := r.typ
	if typ == "" {
		typ = defaultType
	}
	return Event{Type: typ, Data: r.data, ID: r.id}
}

// field takes in one field line.
func (r *Reader) field(line []byte) error {
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "data":
		n := len(value)
		if r.hasData {
			n += len(r.data) + 1
		}
		if n > r.max {
			return fmt.Errorf("%w: an event's data over %d bytes", ErrTooLarge, r.max)
		}
		if r.hasData {
			r.data = append(r.data, '\n')
		}
		r.data = append(r.data, value...)
		r.hasData = true
	case "event":
		r.typ = string(value)
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			r.id = string(value)
		}
	case "retry":
		if ms, ok := parseRetry(value); ok {
			r.retry, r.hasRetry = ms, true
		}
	}
	return nil
}

// parseRetry reads a retry field: ASCII digits only, milliseconds. A value
// too large for a time.Duration is ignored, as one that is not digits.
func parseRetry(v []byte) (time.Duration, bool) {
	if len(v) == 0 {
		return 0, false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	ms, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || ms > math.MaxInt64/int64(time.Millisecond) {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}

// line returns the next line without its end; ok is false at the stream's
// end. A last line with no end is a line. The line is valid until the next
// call.
func (r *Reader) line() (line []byte, ok bool, err error) {
	for {
		b := r.buf[r.r:r.w]
		if r.skipLF && len(b) > 0 {
			r.skipLF = false
			if b[0] == '\n' {
				r.r++
				b = b[1:]
			}
		}
		if !r.started && (len(b) >= len(bom) || r.eof) {
			r.started = true
			if bytes.HasPrefix(b, bom) {
				r.r += len(bom)
				b = b[len(bom):]
			}
		}
		if r.started {
			if i := r.lineEnd(b); i >= 0 {
				if i > r.max {
					return nil, false, r.tooLong()
				}
				r.r += i + 1
				r.scan = 0
				r.skipLF = b[i] == '\r'
				return b[:i], true, nil
			}
			if len(b) > r.max {
				return nil, false, r.tooLong()
			}
			if r.eof {
				switch {
				case r.readErr != nil:
					return nil, false, r.readErr
				case len(b) == 0:
					return nil, false, nil
				}
				r.r, r.scan = r.w, 0
				return b, true, nil
			}
		}
		if err := r.fill(); err != nil {
			return nil, false, err
		}
	}
}

func (r *Reader) tooLong() error {
	return fmt.Errorf("%w: a line over %d bytes", ErrTooLarge, r.max)
}

// lineEnd is the index in b of the first CR or LF, or -1. It does not look
// again at the part of b an earlier call found without one.
func (r *Reader) lineEnd(b []byte) int {
	rest := b[r.scan:]
	i := bytes.IndexByte(rest, '\n')
	if i < 0 {
		i = len(rest)
	}
	if j := bytes.IndexByte(rest[:i], '\r'); j >= 0 {
		i = j
	}
	if i == len(rest) {
		r.scan = len(b)
		return -1
	}
	return r.scan + i
}

// fill reads more of the stream into the buffer, moving what is unread to
// its front and growing it as the line needs, never past maxBytes+1 bytes
// (or the byte-order mark's length, if larger).
func (r *Reader) fill() error {
	if r.buf == nil {
		r.buf = make([]byte, min(initialBuffer, r.bufLimit()))
	}
	if r.r > 0 {
		r.w = copy(r.buf, r.buf[r.r:r.w])
		r.r = 0
	}
	if r.w == len(r.buf) {
		// line has refused anything longer than maxBytes: there is room.
		nb := make([]byte, min(2*len(r.buf), r.bufLimit()))
		copy(nb, r.buf[:r.w])
		r.buf = nb
	}
	for range maxEmptyReads {
		n, err := r.src.Read(r.buf[r.w:])
		r.w += n
		if err != nil {
			r.eof = true
			if err != io.EOF {
				r.readErr = err
			}
			return nil
		}
		if n > 0 {
			return nil
		}
	}
	return io.ErrNoProgress
}

func (r *Reader) bufLimit() int {
	if r.max == math.MaxInt {
		return r.max
	}
	return max(r.max+1, len(bom))
}
