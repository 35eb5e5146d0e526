package recvgate

import (
	"bytes"
	"encoding/binary"
	"io"
	"slices"
	"testing"

	"golang.org/x/net/http2"
)

// seenFrame is a frame as a reader of a client's bytes saw it.
type seenFrame struct {
	typ    http2.FrameType
	stream uint32
	length uint32
	data   []byte // a DATA frame's payload less its padding
}

// reservation is a message the gate reserved room for.
type reservation struct {
	frame  int // the index of the frame its length prefix ended in
	stream uint32
	size   uint32
	need   int64
}

// gateFrames follows in, a client's bytes from its preface on, with the
// gate's reader a byte at a time, as grpc-go reads on (a header block
// ended is admitted, as a tap would), and returns the frames it saw (the
// last one maybe cut short), the reservations it made, and the index of
// the frame at which it lost the framing (-1: never).
func gateFrames(t *testing.T, c *conn, in []byte) (frames []seenFrame, res []reservation, lostAt int) {
	r := &c.in
	lostAt = -1
	for i := range in {
		if r.lost {
			break
		}
		header := r.skip == 0 && r.have == headerLen-1
		payload := r.skip == 0 && r.have == headerLen
		padLen, data, reserves := r.padded, r.data, c.g.reserves.Load()
		if n, wait := r.feed(c, in[i:i+1]); n != 1 || wait != nil {
			t.Fatalf("the reader took %d of a byte (wait %v)", n, wait)
		}
		if c.undecided.Load() != 0 {
			c.admitted(0, "", "")
		}
		if header {
			frames = append(frames, seenFrame{typ: http2.FrameType(r.fh.typ), stream: r.fh.stream, length: r.fh.length})
		}
		last := len(frames) - 1
		if payload && r.fh.typ == typeData && !padLen && r.data == data-1 {
			frames[last].data = append(frames[last].data, in[i])
		}
		if r.lost {
			lostAt = last
		}
		if c.g.reserves.Load() != reserves {
			c.mu.Lock()
			m := c.streams[r.fh.stream].cur
			c.mu.Unlock()
			res = append(res, reservation{frame: last, stream: r.fh.stream, size: m.size, need: m.need})
		}
	}
	return frames, res, lostAt
}

// framerFrames reads in's frames after its preface with an http2.Framer,
// up to the first error (grpc-go ends the connection there), and returns
// them; none when in does not start with the client's preface.
func framerFrames(in []byte) []seenFrame {
	if !bytes.HasPrefix(in, []byte(http2.ClientPreface)) {
		return nil
	}
	fr := http2.NewFramer(io.Discard, bytes.NewReader(in[prefaceLen:]))
	var frames []seenFrame
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return frames
		}
		h := f.Header()
		s := seenFrame{typ: h.Type, stream: h.StreamID, length: h.Length}
		if d, ok := f.(*http2.DataFrame); ok {
			s.data = slices.Clone(d.Data())
		}
		frames = append(frames, s)
	}
}

// wantReservations is the messages longer than window in frames' DATA,
// of the streams a HEADERS opened and no RST_STREAM ended since, with
// the frame their length prefix ends in: what the gate must reserve for,
// twice their length, and nothing more.
func wantReservations(frames []seenFrame, window uint32) []reservation {
	type msgState struct {
		prefix []byte
		left   uint32
	}
	open := map[uint32]*msgState{}
	var want []reservation
	for i, f := range frames {
		switch f.typ {
		case http2.FrameHeaders:
			if open[f.stream] == nil && f.stream != 0 {
				open[f.stream] = &msgState{}
			}
		case http2.FrameRSTStream:
			delete(open, f.stream)
		case http2.FrameData:
			s := open[f.stream]
			if s == nil {
				continue
			}
			for b := f.data; len(b) > 0; {
				if s.left > 0 {
					k := min(s.left, uint32(len(b)))
					s.left -= k
					b = b[k:]
					continue
				}
				k := min(prefixLen-len(s.prefix), len(b))
				s.prefix = append(s.prefix, b[:k]...)
				b = b[k:]
				if len(s.prefix) < prefixLen {
					continue
				}
				s.left = binary.BigEndian.Uint32(s.prefix[1:])
				s.prefix = s.prefix[:0]
				if s.left > window {
					want = append(want, reservation{frame: i, stream: f.stream, size: s.left, need: 2 * int64(s.left)})
				}
			}
		}
	}
	return want
}

// The gate's reader and golang.org/x/net/http2's Framer, given the same
// bytes from a client, agree on every frame the Framer reads before its
// first error (after which grpc-go reads no more): its type, stream,
// length and DATA payload less padding; the gate loses the framing only
// where the Framer fails; and the gate reserves for exactly the messages
// longer than its window that the followed streams' DATA claims, twice
// their claimed length, no more. Its seeds (testdata/fuzz) are what a
// grpc-go client sent a server (a unary call; a stream of two messages,
// then one cancelled: SETTINGS, HEADERS, DATA, WINDOW_UPDATE, PING,
// RST_STREAM, GOAWAY) and a stream of every frame type the gate reads,
// CONTINUATION and padded DATA among them, written with a Framer.
func FuzzFramesAgree(f *testing.F) {
	f.Add([]byte(http2.ClientPreface))
	f.Fuzz(func(t *testing.T, in []byte) {
		const window = 16
		c, _ := testConn(window)
		defer c.Close()
		got, res, lostAt := gateFrames(t, c, in)
		want := framerFrames(in)
		if len(got) < len(want) {
			t.Fatalf("the gate saw %d frames, the Framer %d", len(got), len(want))
		}
		for i, w := range want {
			g := got[i]
			if g.typ != w.typ || g.stream != w.stream || g.length != w.length || !bytes.Equal(g.data, w.data) {
				t.Fatalf("frame %d: the gate saw %v on stream %d, %d bytes, data %x; the Framer %v on stream %d, %d bytes, data %x",
					i, g.typ, g.stream, g.length, g.data, w.typ, w.stream, w.length, w.data)
			}
		}
		if lostAt >= 0 && lostAt < len(want) {
			t.Fatalf("the gate lost the framing at frame %d, which the Framer read (%v)", lostAt, want[lostAt].typ)
		}
		var within []reservation
		for _, r := range res {
			if r.frame < len(want) {
				within = append(within, r)
			}
		}
		if exp := wantReservations(want, window); !slices.Equal(within, exp) {
			t.Fatalf("the gate reserved %+v; the DATA claims %+v", within, exp)
		}
	})
}
