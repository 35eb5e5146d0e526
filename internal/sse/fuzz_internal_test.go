package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"testing"
	"testing/iotest"
	"time"
)

// outcome is all a reader makes of a stream: its events, how it ended, and
// the reconnection time.
type outcome struct {
	Events []string // type, data, id of each, quoted
	End    string   // eof, too-large, or unterminated and the pending event
	Retry  time.Duration
	Set    bool
}

func quote(typ string, data []byte, id string) string { return fmt.Sprintf("%q %q %q", typ, data, id) }

// run reads src to its end, checking at each step that the reader holds no
// more memory than its limit allows.
func run(t *testing.T, src io.Reader, limit int) outcome {
	t.Helper()
	r := NewReader(src, limit)
	var o outcome
	for n := 0; ; n++ {
		e, err := r.Next()
		if c := cap(r.buf); c > r.bufLimit() {
			t.Fatalf("buffer of %d bytes, want at most %d", c, r.bufLimit())
		}
		if len(r.data) > limit || len(r.typ) > limit || len(r.id) > limit || cap(r.data) > 2*limit+64 {
			t.Fatalf("holding data %d (cap %d), type %d, id %d bytes; the limit is %d", len(r.data), cap(r.data), len(r.typ), len(r.id), limit)
		}
		var ue *UnterminatedError
		switch {
		case err == nil:
			if n > 1<<16 {
				t.Fatal("too many events")
			}
			o.Events = append(o.Events, quote(e.Type, e.Data, e.ID))
			continue
		case err == io.EOF:
			o.End = "eof"
		case errors.As(err, &ue) && errors.Is(err, ErrUnterminated):
			o.End = "unterminated " + quote(ue.Event.Type, ue.Event.Data, ue.Event.ID)
		case errors.Is(err, ErrTooLarge):
			o.End = "too-large"
		default:
			t.Fatalf("got error %v, want io.EOF, ErrUnterminated or ErrTooLarge", err)
		}
		o.Retry, o.Set = r.Retry()
		return o
	}
}

// reference reads a whole stream as the standard's steps say, written
// plainly and separately from Reader, with the same limits.
func reference(in []byte, limit int) outcome {
	var o outcome
	in = bytes.TrimPrefix(in, bom)
	var typ, id string
	var data []byte
	has := false
	for len(in) > 0 {
		end := bytes.IndexAny(in, "\r\n")
		line, rest := in, []byte(nil)
		if end >= 0 {
			line, rest = in[:end], in[end+1:]
			if in[end] == '\r' && len(rest) > 0 && rest[0] == '\n' {
				rest = rest[1:]
			}
		}
		in = rest
		if len(line) > limit {
			o.End = "too-large"
			return o
		}
		if len(line) == 0 {
			if has {
				t := typ
				if t == "" {
					t = "message"
				}
				o.Events = append(o.Events, quote(t, data, id))
			}
			typ, data, has = "", nil, false
			continue
		}
		if line[0] == ':' {
			continue
		}
		name, value, found := bytes.Cut(line, []byte(":"))
		if found && len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		switch string(name) {
		case "data":
			joined := append(append([]byte{}, data...), value...)
			if has {
				joined = append(append(append([]byte{}, data...), '\n'), value...)
			}
			if len(joined) > limit {
				o.End = "too-large"
				return o
			}
			data, has = joined, true
		case "event":
			typ = string(value)
		case "id":
			if !bytes.Contains(value, []byte{0}) {
				id = string(value)
			}
		case "retry":
			if ms, ok := parseRetry(value); ok {
				o.Retry, o.Set = ms, true
			}
		}
	}
	o.End = "eof"
	if has {
		t := typ
		if t == "" {
			t = "message"
		}
		o.End = "unterminated " + quote(t, data, id)
	}
	return o
}

// chunker returns its source in pieces of random sizes, some empty.
type chunker struct {
	src   []byte
	rng   *rand.Rand
	empty int
}

func (c *chunker) Read(p []byte) (int, error) {
	if len(c.src) == 0 {
		return 0, io.EOF
	}
	n := c.rng.IntN(min(len(p), 9) + 1)
	if n == 0 && c.empty < 3 {
		c.empty++
		return 0, nil
	}
	n, c.empty = max(n, 1), 0
	n = copy(p[:n], c.src)
	c.src = c.src[n:]
	return n, nil
}

// FuzzReader: no panic, memory within the limit, and the same events and
// end whatever the reads' sizes, and as the standard's steps read them.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"data: a\n\n", "data: a\r\n\r\n", "data: a\r\rdata: b\r\r", "\xef\xbb\xbfdata: a\n\n",
		"event: e\nid: 1\nretry: 10\ndata: x\ndata: y\n\n", ": c\ndata\n\n", "data: a", "data: a\r",
		"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n",
		"id: a\x00b\n\n", "data: 1234567890123456789\n\n", "\r\n\r\n\n\r",
	} {
		f.Add([]byte(s), uint16(16), uint64(1))
	}
	f.Fuzz(func(t *testing.T, in []byte, limit uint16, seed uint64) {
		n := 1 + int(limit%512)
		want := reference(in, n)
		for _, src := range []struct {
			name string
			r    io.Reader
		}{
			{"whole", bytes.NewReader(in)},
			{"one byte at a time", iotest.OneByteReader(bytes.NewReader(in))},
			{"random pieces", &chunker{src: in, rng: rand.New(rand.NewPCG(seed, seed>>1))}},
		} {
			if got := run(t, src.r, n); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: got\n%+v\nwant\n%+v", src.name, got, want)
			}
		}
	})
}
