package recvgate

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"

	"golang.org/x/sync/semaphore"
)

// sink is a connection whose writes are kept and whose reads are empty.
type sink struct {
	net.Conn
	out bytes.Buffer
}

func (s *sink) Write(p []byte) (int, error) { return s.out.Write(p) }
func (s *sink) LocalAddr() net.Addr         { return nil }
func (s *sink) RemoteAddr() net.Addr        { return nil }
func (s *sink) Close() error                { return nil }

func frame(typ, flags byte, stream uint32, payload []byte) []byte {
	b := make([]byte, headerLen, headerLen+len(payload))
	b[0], b[1], b[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	b[3], b[4] = typ, flags
	binary.BigEndian.PutUint32(b[5:], stream)
	return append(b, payload...)
}

// chunks cuts b in pieces of the sizes cuts gives, in turn.
func chunks(b, cuts []byte) [][]byte {
	var out [][]byte
	for i := 0; len(b) > 0; i++ {
		n := len(b)
		if len(cuts) > 0 {
			n = min(int(cuts[i%len(cuts)])%64+1, len(b))
		}
		out = append(out, b[:n])
		b = b[n:]
	}
	return out
}

func testConn(window uint32) (*conn, *sink) {
	s := &sink{}
	g := &Gate{window: window, overdraft: semaphore.NewWeighted(1 << 30), overdraftLimit: 1 << 30}
	return g.wrap(s).(*conn), s
}

// feedAll gives the reader all of p, as grpc-go reads on: a header block
// ended is admitted, as a tap would, before the rest.
func feedAll(t *testing.T, c *conn, p []byte) {
	for len(p) > 0 {
		n, wait := c.in.feed(c, p)
		if wait != nil {
			t.Fatal("the reader waits for room it has no budget to reserve from")
		}
		if n < len(p) && c.undecided.Load() == 0 {
			t.Fatalf("the reader stopped after %d of %d bytes with no header block ended", n, len(p))
		}
		if c.undecided.Load() != 0 {
			c.admitted(0, "", "")
		}
		p = p[n:]
	}
}

// What grpc-go writes reaches the client unchanged, in any cuts, except
// the WINDOW_UPDATE frames of a stream waiting for admission, which are
// summed; a stream ends with its trailers or a reset, and its window
// passes again.
func FuzzWriter(f *testing.F) {
	f.Add([]byte{8, 0, 1, 0, 0, 0, 0, 9, 1, 1, 1, 3, 'a', 'b', 'c', 8, 0, 1, 0}, []byte{3, 1, 20})
	f.Add([]byte{8, 0, 1, 1, 8, 0, 2, 1, 1, 1, 1, 2, 8, 0, 1, 1}, []byte{0})
	f.Fuzz(func(t *testing.T, spec, cuts []byte) {
		c, s := testConn(window)
		waiting := &stream{id: 1, waiting: &message{}}
		c.streams[1] = waiting
		var in, want bytes.Buffer
		var withheld uint64
		open := true
		for len(spec) >= 4 {
			typ, flags, id, n := spec[0]%10, spec[1], uint32(spec[2]%4), int(spec[3]%40)
			spec = spec[4:]
			payload := make([]byte, n)
			if typ == typeWindowUpd {
				payload = binary.BigEndian.AppendUint32(nil, uint32(n)<<8|uint32(flags))
			}
			fr := frame(typ, flags, id, payload)
			in.Write(fr)
			if open && id == 1 && typ == typeWindowUpd {
				withheld += uint64(binary.BigEndian.Uint32(payload) & streamIDMask)
				continue
			}
			want.Write(fr)
			if id == 1 && (typ == typeRSTStream || typ == typeHeaders && flags&flagEndStream != 0) {
				open = false
			}
		}
		for _, p := range chunks(in.Bytes(), cuts) {
			if n, err := c.Write(p); n != len(p) || err != nil {
				t.Fatalf("Write = %d, %v", n, err)
			}
		}
		if !bytes.Equal(s.out.Bytes(), want.Bytes()) {
			t.Fatalf("wrote\n%x\nwant\n%x", s.out.Bytes(), want.Bytes())
		}
		if open && uint64(waiting.withheld) != min(withheld, streamIDMask) {
			t.Fatalf("withheld %d, want %d", waiting.withheld, withheld)
		}
		if _, ok := c.streams[1]; ok != open {
			t.Fatalf("stream 1 followed: %v, want %v", ok, open)
		}
	})
}

// A client's gRPC message, in DATA frames of any sizes and paddings, cut
// anywhere, is seen whole: one message of its length, complete at its
// last byte; the reader stops at the end of the header
// block (HEADERS, or its last CONTINUATION) and the stream admitted then
// is the one followed; and no bytes at all make the reader fail.
func FuzzReader(f *testing.F) {
	f.Add(uint32(100), []byte{10, 0, 50, 3}, []byte{7}, false, false)
	f.Add(uint32(5), []byte{1}, []byte{1}, false, false)
	f.Add(uint32(0), []byte{}, []byte{}, false, false)
	f.Add(uint32(16), []byte{7}, []byte{3}, false, false) // the window: not gated
	f.Add(uint32(17), []byte{7}, []byte{3}, false, false) // one past it: gated
	f.Add(uint32(17), []byte{7}, []byte{3}, true, false)  // admitted at its header block's end
	f.Add(uint32(100), []byte{9, 2}, []byte{5}, true, true)
	f.Fuzz(func(t *testing.T, size uint32, frames, cuts []byte, admission, continued bool) {
		size %= 4096
		c, _ := testConn(16)
		c.g.admission = admission
		var in bytes.Buffer
		in.WriteString("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
		if continued {
			in.Write(frame(typeHeaders, 0, 1, []byte{0x88}))
			in.Write(frame(typeContinue, 0, 1, []byte{0x88}))
			in.Write(frame(typeContinue, 0x4, 1, []byte{0x88}))
		} else {
			in.Write(frame(typeHeaders, 0x4, 1, []byte{0x88}))
		}
		msg := binary.BigEndian.AppendUint32([]byte{0}, size)
		msg = append(msg, make([]byte, size)...)
		for i := 0; len(msg) > 0; i++ {
			n, pad := len(msg), -1
			if len(frames) > 0 {
				n = min(int(frames[i%len(frames)])%300+1, len(msg))
				if p := frames[(i+1)%len(frames)]; p%3 == 0 {
					pad = int(p % 20)
				}
			}
			if pad >= 0 {
				payload := append([]byte{byte(pad)}, msg[:n]...)
				in.Write(frame(typeData, flagPadded, 1, append(payload, make([]byte, pad)...)))
			} else {
				in.Write(frame(typeData, 0, 1, msg[:n]))
			}
			msg = msg[n:]
		}
		for _, p := range chunks(in.Bytes(), cuts) {
			feedAll(t, c, p)
		}
		if n := c.g.unmatched.Load(); n != 0 {
			t.Fatalf("%d admissions found no stream", n)
		}
		c.mu.Lock()
		s := c.streams[1]
		c.mu.Unlock()
		if s == nil {
			t.Fatal("stream 1 not followed")
		}
		switch {
		case size <= 16 && len(s.msgs) != 0:
			t.Fatalf("a %d-byte message is not larger than the window, but the gate holds %d", size, len(s.msgs))
		case size > 16 && (len(s.msgs) != 1 || s.msgs[0].size != size || !s.msgs[0].complete):
			t.Fatalf("a %d-byte message: the gate holds %d messages (%+v)", size, len(s.msgs), s.msgs)
		}
		// Then anything at all.
		for _, p := range chunks(frames, cuts) {
			for len(p) > 0 && !c.in.lost {
				n, _ := c.in.feed(c, p)
				c.undecided.Store(0)
				p = p[n:]
			}
		}
		_ = c.Close()
	})
}
