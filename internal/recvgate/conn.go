package recvgate

import (
	"context"
	"encoding/binary"
	"net"
	"slices"
	"sync"

	"github.com/exprd/exprd/membudget"
)

// conn is a server connection whose large received messages the gate
// admits. Its reads pass through unchanged; its writes too, except the
// WINDOW_UPDATE frames of a stream whose message waits for admission,
// which are held back and sent, summed, once it is admitted.
type conn struct {
	net.Conn
	g      *Gate
	key    string // in g.conns, or "" when another connection has its addresses
	ctx    context.Context
	cancel context.CancelFunc
	once   sync.Once

	in reader // only the goroutine that reads uses it

	mu      sync.Mutex
	streams map[uint32]*stream
	closed  bool

	wmu    sync.Mutex // held by a write to Conn
	out    writer
	queued []byte // admitted streams' WINDOW_UPDATE frames, for the next frame boundary
}

// stream is what the gate knows of one HTTP/2 stream.
type stream struct {
	id     uint32
	ctx    context.Context // ends with the stream; made at its first large message
	cancel context.CancelFunc

	inBody bool // reading a message's body, not its prefix
	prefix [prefixLen]byte
	have   int    // bytes of prefix read
	left   uint32 // bytes of the body still to come

	cur      *message   // the large message being received
	msgs     []*message // large messages received or being received, not yet decoded
	waiting  *message   // the message waiting for admission, while its window is held back
	withheld uint32     // the window held back meanwhile
}

// message is a large received message and what it holds of the budget.
type message struct {
	size     uint32
	res      *membudget.Reservation // what it holds of the budget
	over     int64                  // or of the overdraft
	complete bool                   // all its bytes passed through
	done     bool                   // decoded, or its stream ended: what it held is released
}

// hold is what a message holds, to release.
type hold struct {
	res  *membudget.Reservation
	over int64
}

// take moves what m holds to held.
func (m *message) take(held []hold) []hold {
	if m.res != nil || m.over > 0 {
		held = append(held, hold{m.res, m.over})
		m.res, m.over = nil, 0
	}
	return held
}

func (g *Gate) wrap(nc net.Conn) net.Conn {
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{Conn: nc, g: g, ctx: ctx, cancel: cancel, streams: map[uint32]*stream{}}
	c.in.skip = prefaceLen
	if key := addrKey(nc.LocalAddr(), nc.RemoteAddr()); key != "" {
		if _, taken := g.conns.LoadOrStore(key, c); !taken {
			c.key = key
		}
	}
	return c
}

func (c *conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.in.feed(c, p[:n])
	}
	return n, err
}

func (c *conn) Close() error {
	c.once.Do(func() {
		if c.key != "" {
			c.g.conns.CompareAndDelete(c.key, c)
		}
		c.cancel()
		c.mu.Lock()
		c.closed = true
		var held []hold
		for id, s := range c.streams {
			held = s.end(held)
			delete(c.streams, id)
		}
		c.mu.Unlock()
		c.g.release(held)
	})
	return c.Conn.Close()
}

func (g *Gate) release(held []hold) {
	for _, h := range held {
		h.res.Release()
		if h.over > 0 {
			g.overdraft.Release(h.over)
		}
	}
}

// opened notes a stream the client opened (its HEADERS).
func (c *conn) opened(id uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || id == 0 || len(c.streams) >= maxTrackedSIDs {
		return
	}
	if c.streams[id] == nil {
		c.streams[id] = &stream{id: id}
	}
}

// ended forgets a stream that either side ended, releasing what its
// messages held.
func (c *conn) ended(id uint32) {
	c.mu.Lock()
	s := c.streams[id]
	delete(c.streams, id)
	var held []hold
	if s != nil {
		held = s.end(nil)
	}
	c.mu.Unlock()
	c.g.release(held)
}

// end marks the stream's messages done, stops its waits and appends
// their reservations to held. c.mu is held.
func (s *stream) end(held []hold) []hold {
	for _, m := range s.msgs {
		m.done = true
		held = m.take(held)
	}
	s.msgs, s.cur, s.waiting = nil, nil, nil
	if s.cancel != nil {
		s.cancel()
	}
	return held
}

// received follows the gRPC messages in b, a stream's DATA.
func (c *conn) received(id uint32, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.streams[id]
	if s == nil {
		return
	}
	for len(b) > 0 {
		if !s.inBody {
			n := copy(s.prefix[s.have:], b)
			s.have += n
			b = b[n:]
			if s.have < prefixLen {
				return
			}
			s.have, s.inBody = 0, true
			s.left = binary.BigEndian.Uint32(s.prefix[1:])
			if s.left > c.g.window {
				c.admit(s)
			}
		}
		n := min(s.left, uint32(len(b)))
		s.left -= n
		b = b[n:]
		if s.left == 0 {
			s.inBody = false
			if s.cur != nil {
				s.cur.complete = true
				s.cur = nil
			}
		}
	}
}

// admit starts the admission of s's message of s.left bytes. c.mu is held.
func (c *conn) admit(s *stream) {
	m := &message{size: s.left}
	s.msgs = append(s.msgs, m)
	s.cur, s.waiting = m, m
	if s.ctx == nil {
		s.ctx, s.cancel = context.WithCancel(c.ctx)
	}
	go c.reserve(s, m)
}

// reserve reserves m's memory, from the budget if it has room within its
// wait, else from the overdraft however long that takes; then it gives
// the stream the window held back meanwhile.
func (c *conn) reserve(s *stream, m *message) {
	n := 2 * int64(m.size)
	var h hold
	var err error
	if h.res, err = c.g.budget.Reserve(s.ctx, what, n); err != nil {
		if s.ctx.Err() != nil {
			return
		}
		// A message longer than grpc-go takes is refused by it unread:
		// it needs no room.
		if n <= c.g.overdraftLimit {
			if c.g.overdraft.Acquire(s.ctx, n) != nil {
				return
			}
			h.over = n
		}
	}
	c.mu.Lock()
	if m.done {
		c.mu.Unlock()
		c.g.release([]hold{h})
		return
	}
	m.res, m.over = h.res, h.over
	var frame []byte
	if s.waiting == m {
		s.waiting = nil
		if s.withheld > 0 {
			frame = windowUpdate(s.id, s.withheld)
			s.withheld = 0
		}
	}
	c.mu.Unlock()
	if frame != nil {
		c.inject(frame)
	}
}

// withhold holds back a window increment of a stream whose message waits
// for admission, and reports whether it did.
func (c *conn) withhold(id, inc uint32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.streams[id]
	if s == nil || s.waiting == nil {
		return false
	}
	s.withheld = uint32(min(uint64(s.withheld)+uint64(inc), streamIDMask))
	return true
}

// decoded forgets a decoded message of n bytes and returns what it holds.
func (c *conn) decoded(n int) []hold {
	if n <= int(c.g.window) {
		return nil
	}
	c.mu.Lock()
	var held []hold
find:
	for _, s := range c.streams {
		for i, m := range s.msgs {
			if m.complete && int(m.size) == n {
				m.done = true
				held = m.take(held)
				s.msgs = slices.Delete(s.msgs, i, i+1)
				break find
			}
		}
	}
	c.mu.Unlock()
	return held
}

// reader follows the frames a client sends.
type reader struct {
	skip   int // preface bytes still to skip
	hdr    [headerLen]byte
	have   int // bytes of hdr read
	fh     frameHeader
	left   uint32 // payload bytes of the frame still to come
	padded bool   // a padded DATA frame whose pad length is next
	data   uint32 // DATA bytes still to come before the padding
	lost   bool   // the framing made no sense: follow no more
}

func (r *reader) feed(c *conn, p []byte) {
	for len(p) > 0 && !r.lost {
		switch {
		case r.skip > 0:
			n := min(r.skip, len(p))
			r.skip -= n
			p = p[n:]
		case r.have < headerLen:
			n := copy(r.hdr[r.have:], p)
			r.have += n
			p = p[n:]
			if r.have == headerLen {
				r.begin(c)
			}
		default:
			n := min(r.left, uint32(len(p)))
			if r.fh.typ == typeData {
				r.dataChunk(c, p[:n])
			}
			p = p[n:]
			r.left -= n
			if r.left == 0 {
				r.end(c)
			}
		}
	}
}

func (r *reader) begin(c *conn) {
	r.fh = parseHeader(r.hdr[:])
	r.left = r.fh.length
	switch r.fh.typ {
	case typeHeaders:
		c.opened(r.fh.stream)
	case typeData:
		r.padded = r.fh.flags&flagPadded != 0
		r.data = r.fh.length
	}
	if r.left == 0 {
		r.end(c)
	}
}

func (r *reader) dataChunk(c *conn, b []byte) {
	if r.padded {
		pad := uint32(b[0])
		b = b[1:]
		r.padded = false
		if pad+1 > r.fh.length {
			r.lost = true // grpc-go ends the connection for it
			return
		}
		r.data = r.fh.length - 1 - pad
	}
	n := min(r.data, uint32(len(b)))
	r.data -= n
	if n > 0 {
		c.received(r.fh.stream, b[:n])
	}
}

func (r *reader) end(c *conn) {
	if r.fh.typ == typeRSTStream {
		c.ended(r.fh.stream)
	}
	r.have = 0
}

// writer follows the frames grpc-go sends.
type writer struct {
	held []byte // the start of a frame split across writes, not written yet
	left uint32 // payload bytes of a frame being written still to come
}

// Write writes p, less the WINDOW_UPDATE frames it holds back. A frame's
// header split across writes is held until it is whole.
func (c *conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	w := &c.out
	if err := c.flushQueued(); err != nil {
		return 0, err
	}
	from, i := 0, 0
	for i < len(p) {
		if w.left > 0 {
			n := min(w.left, uint32(len(p)-i))
			i += int(n)
			w.left -= n
			continue
		}
		if len(w.held) == 0 && len(p)-i >= headerLen+windowLen {
			pass, size := c.frameStart(p[i:])
			if !pass {
				if err := c.write(p[from:i]); err != nil {
					return 0, err
				}
				from = i + size
			}
			i += size
			continue
		}
		// Too little of the frame in p to decide: gather it in held.
		if err := c.write(p[from:i]); err != nil {
			return 0, err
		}
		for i < len(p) && len(w.held) < frameNeed(w.held) {
			n := min(frameNeed(w.held)-len(w.held), len(p)-i)
			w.held = append(w.held, p[i:i+n]...)
			i += n
		}
		from = i
		if len(w.held) < frameNeed(w.held) {
			break
		}
		if pass, _ := c.frameStart(w.held); pass {
			if err := c.write(w.held); err != nil {
				return 0, err
			}
		}
		w.held = w.held[:0]
	}
	if err := c.write(p[from:]); err != nil {
		return 0, err
	}
	if err := c.flushQueued(); err != nil {
		return 0, err
	}
	return len(p), nil
}

// frameNeed is the bytes of a frame that start with b that the writer
// needs to decide on it: a header, or a whole WINDOW_UPDATE.
func frameNeed(b []byte) int {
	if len(b) > 3 && b[3] == typeWindowUpd && b[0] == 0 && b[1] == 0 && b[2] == windowLen {
		return headerLen + windowLen
	}
	return headerLen
}

// frameStart decides on the frame b starts with (a whole header, and a
// WINDOW_UPDATE's payload when it is one): whether it passes, and how
// many of its bytes it took (the rest is payload, counted in out.left).
func (c *conn) frameStart(b []byte) (pass bool, size int) {
	h := parseHeader(b)
	switch {
	case h.typ == typeWindowUpd && h.length == windowLen:
		if h.stream != 0 && c.withhold(h.stream, binary.BigEndian.Uint32(b[headerLen:])&streamIDMask) {
			return false, headerLen + windowLen
		}
		return true, headerLen + windowLen
	case h.typ == typeRSTStream, h.typ == typeHeaders && h.flags&flagEndStream != 0:
		c.ended(h.stream)
	}
	c.out.left = h.length
	return true, headerLen
}

// write writes b to the connection.
func (c *conn) write(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	_, err := c.Conn.Write(b)
	return err
}

// flushQueued writes the queued frames if no frame is half written.
// c.wmu is held.
func (c *conn) flushQueued() error {
	if len(c.queued) == 0 || c.out.left > 0 {
		return nil
	}
	err := c.write(c.queued)
	c.queued = c.queued[:0]
	return err
}

// inject writes frame between grpc-go's frames.
func (c *conn) inject(frame []byte) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.queued = append(c.queued, frame...)
	_ = c.flushQueued() // an error ends the connection on grpc-go's next write
}
