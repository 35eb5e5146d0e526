package recvgate

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/exprd/exprd/membudget"
)

// conn is a server connection whose large received messages the gate
// admits. Its reads pass through unchanged, though not always in the
// chunks they came in: a read ends at the end of a header block (so
// that the tap tags its stream), and before the last byte of a message that waits for its
// room (a compressed one). The gate adds to them only the RST_STREAM of a
// stream it reset, between frames. Its writes pass through too, except
// the WINDOW_UPDATE frames of a stream whose message waits for
// admission, which are held back and sent, summed, once it is admitted.
type conn struct {
	net.Conn
	g      *Gate
	addr   net.Addr // its local address, its own (connAddr); nil when the wrapped one is
	ctx    context.Context
	cancel context.CancelFunc
	once   sync.Once
	peer   *peer // nil without a peer limit
	peerID string

	// Only the goroutine that reads uses these.
	in      reader
	pending []byte // read from the network, not given to grpc-go yet
	rerr    error  // the network's error, once pending is given
	// undecided is the stream whose header block grpc-go was given last,
	// until it reads again (or Admit admits it).
	undecided atomic.Uint32
	// toInject is set while inbound has frames: the reader stops at the
	// next frame boundary to give them.
	toInject atomic.Bool

	mu        sync.Mutex
	streams   map[uint32]*stream
	closed    bool
	inbound   []byte // RST_STREAM frames to give grpc-go at the next frame boundary
	injecting bool   // inbound is being given, a frame at a time
	reading   bool   // the reader waits on the network
	boundary  bool   // ... between two frames
	woken     bool   // the gate set a read deadline to end that wait

	wmu    sync.Mutex // held by a write to Conn
	out    writer
	queued []byte // admitted streams' WINDOW_UPDATE frames, for the next frame boundary
}

// stream is what the gate knows of one HTTP/2 stream.
type stream struct {
	id       uint32
	ctx      context.Context // ends with the stream; made at its first large message
	cancel   context.CancelFunc
	admitted bool   // reserved for (Admit, or no admission)
	limit    uint32 // its messages' longest; 0: the gate's
	peer     *peer  // the caller Admit named, else nil: its connection's peer
	peerID   string
	caller   string // the budget's caller (membudget.WithCaller) Admit's context named; "": none

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
	need     int64                  // what it reserves
	res      *membudget.Reservation // what it holds of the budget
	over     int64                  // or of the overdraft
	peer     int64                  // and of its peer's limit
	complete bool                   // all its bytes passed through
	done     bool                   // decoded, or its stream ended: what it held is released
	// ready, when not nil, is closed once its room is reserved or it is
	// done: grpc-go is not given its last byte before.
	ready chan struct{}
	timer *time.Timer // its arrival deadline, once reserved
}

// hold is what a message holds, to release.
type hold struct {
	res  *membudget.Reservation
	over int64
	peer int64
	p    *peer
}

// take moves what m holds to held and stops its deadline.
func (m *message) take(held []hold, p *peer) []hold {
	if m.res != nil || m.over > 0 || m.peer > 0 {
		held = append(held, hold{m.res, m.over, m.peer, p})
		m.res, m.over, m.peer = nil, 0, 0
	}
	if m.timer != nil {
		m.timer.Stop()
	}
	m.unblock()
	return held
}

// unblock lets grpc-go have the message's last byte.
func (m *message) unblock() {
	if m.ready != nil {
		select {
		case <-m.ready:
		default:
			close(m.ready)
		}
	}
}

func (g *Gate) wrap(nc net.Conn) net.Conn {
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{Conn: nc, g: g, ctx: ctx, cancel: cancel, streams: map[uint32]*stream{}, boundary: true}
	c.in.skip = prefaceLen
	if la := nc.LocalAddr(); la != nil {
		c.addr = &connAddr{Addr: la, c: c}
	}
	g.conns.Store(c, c)
	if g.peerLimit > 0 && g.peerKey != nil {
		if id := g.peerKey(nc.RemoteAddr()); id != "" {
			c.peerID, c.peer = id, g.attach(id)
		}
	}
	return c
}

// LocalAddr is the wrapped connection's local address, as a value of
// this connection's own: grpc-go gives it to the stats handler, which
// finds the connection by it (TagConn), however many connections share
// the same addresses.
func (c *conn) LocalAddr() net.Addr { return c.addr }

// Read gives grpc-go what the client sent, and the RST_STREAM of the
// streams the gate reset.
func (c *conn) Read(p []byte) (int, error) {
	if id := c.undecided.Swap(0); id != 0 && c.g.admission {
		c.ended(id) // grpc-go did not admit it
	}
	for {
		if n, ok := c.injected(p); ok {
			return n, nil
		}
		var n int
		var err error
		fromPending := len(c.pending) > 0
		switch {
		case fromPending:
			n = copy(p, c.pending)
		case c.rerr != nil:
			return 0, c.rerr
		default:
			n, err = c.readNetwork(p)
		}
		if n == 0 {
			if err != nil {
				return 0, err
			}
			continue
		}
		k, wait := c.in.feed(c, p[:n])
		if fromPending {
			c.pending = c.pending[k:]
		} else if k < n {
			c.pending = append(c.pending[:0], p[k:n]...)
			c.rerr, err = err, nil
		}
		c.noteBoundary()
		if k > 0 {
			return k, err
		}
		if wait != nil {
			c.g.holding.Add(1)
			select {
			case <-wait:
			case <-c.ctx.Done():
				c.g.holding.Add(-1)
				return 0, net.ErrClosed
			}
			c.g.holding.Add(-1)
		}
	}
}

// injected gives grpc-go the next frames of c.inbound, at a frame
// boundary; ok is false when there are none to give.
func (c *conn) injected(p []byte) (int, bool) {
	c.mu.Lock()
	if len(c.inbound) == 0 || !c.injecting && !c.in.atBoundary() {
		c.mu.Unlock()
		return 0, false
	}
	n := copy(p, c.inbound)
	c.inbound = c.inbound[n:]
	c.injecting = len(c.inbound) > 0
	c.toInject.Store(c.injecting)
	c.mu.Unlock()
	c.in.feed(c, p[:n]) // the reader follows them too; a reset stream is forgotten already
	c.noteBoundary()
	return n, true
}

// readNetwork reads from the connection. A read the gate woke (to give
// grpc-go a reset) ends without an error.
func (c *conn) readNetwork(p []byte) (int, error) {
	c.mu.Lock()
	c.reading = true
	c.mu.Unlock()
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.reading = false
	if c.woken {
		c.woken = false
		_ = c.Conn.SetReadDeadline(time.Time{})
		if errors.Is(err, os.ErrDeadlineExceeded) {
			err = nil
		}
	}
	c.mu.Unlock()
	return n, err
}

func (c *conn) noteBoundary() {
	at := c.in.atBoundary()
	c.mu.Lock()
	c.boundary = at
	c.mu.Unlock()
}

func (c *conn) Close() error {
	c.once.Do(func() {
		c.g.conns.Delete(c)
		c.cancel()
		c.mu.Lock()
		c.closed = true
		var held []hold
		for id, s := range c.streams {
			held = c.end(s, held)
			delete(c.streams, id)
		}
		c.mu.Unlock()
		c.g.release(held)
		if c.peer != nil {
			c.g.detach(c.peerID, c.peer)
		}
	})
	return c.Conn.Close()
}

func (g *Gate) release(held []hold) {
	for _, h := range held {
		h.res.Release()
		if h.over > 0 {
			g.overdraft.Release(h.over)
		}
		if h.peer > 0 {
			h.p.sem.Release(h.peer)
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
		c.streams[id] = &stream{id: id, admitted: !c.g.admission}
	}
}

// admitted admits the stream grpc-go is deciding on, with limit, for
// the caller who ("": its connection's peer) and the budget's caller
// ("": none), and returns its id (0: no stream is being decided on).
func (c *conn) admitted(limit uint32, who, caller string) uint32 {
	id := c.undecided.Swap(0)
	if id == 0 {
		c.g.unmatched.Add(1)
		return 0
	}
	c.mu.Lock()
	if s := c.streams[id]; s != nil && !s.admitted {
		s.admitted, s.limit, s.caller = true, limit, caller
		if who != "" && c.g.peerLimit > 0 {
			s.peerID = callerPeer + who
			s.peer = c.g.attach(s.peerID)
		}
	}
	c.mu.Unlock()
	return id
}

// callerPeer prefixes the peer key of a caller Admit named, so that no
// address's key is one.
const callerPeer = "caller "

// peerOf is the peer whose limit s's messages hold: its caller's, else
// its connection's (nil: none).
func (c *conn) peerOf(s *stream) *peer {
	if s.peer != nil {
		return s.peer
	}
	return c.peer
}

// ended forgets a stream that either side ended, releasing what its
// messages held.
func (c *conn) ended(id uint32) {
	c.mu.Lock()
	s := c.streams[id]
	delete(c.streams, id)
	var held []hold
	if s != nil {
		held = c.end(s, nil)
	}
	c.mu.Unlock()
	c.g.release(held)
}

// end marks s's messages done, stops its waits and appends their
// reservations to held. c.mu is held.
func (c *conn) end(s *stream, held []hold) []hold {
	for _, m := range s.msgs {
		m.done = true
		held = m.take(held, c.peerOf(s))
	}
	s.msgs, s.cur, s.waiting = nil, nil, nil
	if s.cancel != nil {
		s.cancel()
	}
	if s.peer != nil {
		c.g.detach(s.peerID, s.peer)
		s.peer = nil
	}
	return held
}

// reset ends s on both sides: a RST_STREAM to the client, and one given
// to grpc-go at its next frame boundary as if the client had sent it. A
// client in the middle of a frame, which the gate cannot cut, has
// ResetGrace to end it; then its connection is closed. c.mu is held.
func (c *conn) reset(s *stream) []hold {
	held := c.end(s, nil)
	delete(c.streams, s.id)
	c.g.resets.Add(1)
	c.inbound = append(c.inbound, rstStream(s.id, codeCancel)...)
	c.toInject.Store(true)
	if c.reading && c.boundary {
		c.woken = true
		_ = c.Conn.SetReadDeadline(time.Now())
	}
	go func() {
		c.inject(rstStream(s.id, codeCalm))
		select {
		case <-time.After(ResetGrace):
		case <-c.ctx.Done():
			return
		}
		c.mu.Lock()
		stuck := len(c.inbound) > 0
		c.mu.Unlock()
		if stuck {
			_ = c.Close()
		}
	}()
	return held
}

// expire resets m's stream if m has not arrived.
func (c *conn) expire(s *stream, m *message) {
	c.mu.Lock()
	if c.closed || m.complete || m.done || c.streams[s.id] != s {
		c.mu.Unlock()
		return
	}
	held := c.reset(s)
	c.mu.Unlock()
	c.g.release(held)
}

// received follows the gRPC messages in b, a stream's DATA, and returns
// how many of its bytes grpc-go may have now: all, or all but a
// message's last one, while its room is not reserved (wait is then that
// message's readiness).
func (c *conn) received(id uint32, b []byte) (n int, wait <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.streams[id]
	if s == nil || !s.admitted {
		return len(b), nil
	}
	for len(b) > 0 {
		if !s.inBody {
			k := copy(s.prefix[s.have:], b)
			s.have += k
			b, n = b[k:], n+k
			if s.have < prefixLen {
				return n, nil
			}
			s.have, s.inBody = 0, true
			s.left = binary.BigEndian.Uint32(s.prefix[1:])
			compressed := s.prefix[0]&1 != 0 && c.g.inflated > 0
			switch {
			case s.limit > 0 && s.left > s.limit:
				c.g.release(c.reset(s))
				return n + len(b), nil
			case compressed && s.left > 0:
				c.admit(s, 2*c.g.inflated, true)
			case s.left > c.g.window:
				c.admit(s, 2*int64(s.left), false)
			}
		}
		k := min(s.left, uint32(len(b)))
		if m := s.cur; m != nil && k == s.left && m.ready != nil && !isClosed(m.ready) {
			k-- // its last byte waits for its room
			s.left -= k
			return n + int(k), m.ready
		}
		s.left -= k
		b, n = b[k:], n+int(k)
		if s.left == 0 {
			s.inBody = false
			if m := s.cur; m != nil {
				m.complete = true
				if m.timer != nil {
					m.timer.Stop()
				}
				s.cur = nil
			}
		}
	}
	return n, nil
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// admit starts the admission of s's message of s.left bytes, which
// reserves need; a gated one's last byte waits for it. c.mu is held.
func (c *conn) admit(s *stream, need int64, gated bool) {
	c.g.reserves.Add(1)
	m := &message{size: s.left, need: need}
	if gated {
		m.ready = make(chan struct{})
	}
	s.msgs = append(s.msgs, m)
	s.cur, s.waiting = m, m
	if s.ctx == nil {
		s.ctx, s.cancel = context.WithCancel(c.ctx)
	}
	go c.reserve(s, m, c.peerOf(s))
}

// reserve reserves m's memory: within its peer's limit (p, nil for
// none) first, then from
// the budget if it has room within its wait, else from the overdraft
// however long that takes; then it gives the stream the window held back
// meanwhile, and starts m's arrival deadline.
func (c *conn) reserve(s *stream, m *message, p *peer) {
	n := m.need
	var h hold
	if p != nil {
		if p.sem.Acquire(s.ctx, n) != nil {
			return
		}
		h.peer, h.p = n, p
	}
	var err error
	if h.res, err = c.g.budget.Reserve(membudget.Incoming(membudget.WithCaller(s.ctx, s.caller)), what, n); err != nil {
		if s.ctx.Err() != nil {
			c.g.release([]hold{h})
			return
		}
		// A message longer than grpc-go takes is refused by it unread:
		// it needs no room.
		if n <= c.g.overdraftLimit {
			if c.g.overdraft.Acquire(s.ctx, n) != nil {
				c.g.release([]hold{h})
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
	m.res, m.over, m.peer = h.res, h.over, h.peer
	if c.g.arrival > 0 && !m.complete {
		m.timer = time.AfterFunc(c.g.arrival, func() { c.expire(s, m) })
	}
	m.unblock()
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

// decoded forgets a decoded message of n bytes of the stream id and
// returns what it holds. grpc-go decodes a stream's messages in their
// order, so it is the stream's first complete one of n bytes; another
// stream's, of whatever length, is never taken for it.
func (c *conn) decoded(id uint32, n int) []hold {
	if n <= int(c.g.window) && c.g.inflated == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.streams[id]
	if s == nil {
		return nil
	}
	for i, m := range s.msgs {
		if m.complete && int(m.size) == n {
			m.done = true
			s.msgs = slices.Delete(s.msgs, i, i+1)
			return m.take(nil, c.peerOf(s))
		}
	}
	return nil
}

// reader follows the frames a client sends.
type reader struct {
	skip   int // preface bytes still to skip
	hdr    [headerLen]byte
	have   int // bytes of hdr read
	fh     frameHeader
	block  uint32 // the stream whose header block is being read
	left   uint32 // payload bytes of the frame still to come
	padded bool   // a padded DATA frame whose pad length is next
	data   uint32 // DATA bytes still to come before the padding
	lost   bool   // the framing made no sense: follow no more
}

// atBoundary reports whether the reader is between two frames.
func (r *reader) atBoundary() bool {
	return r.lost || r.skip == 0 && r.have == 0
}

// feed follows p, the next bytes for grpc-go, and returns how many of them
// it may have now: all, or fewer when a header block ends (so that
// grpc-go decides on its stream, and tags it, before it reads on)
// or when a message waits for its room before its last byte (wait is then
// its readiness).
func (r *reader) feed(c *conn, p []byte) (n int, wait <-chan struct{}) {
	for n < len(p) && !r.lost {
		q := p[n:]
		switch {
		case r.skip > 0:
			k := min(r.skip, len(q))
			r.skip -= k
			n += k
		case r.have < headerLen:
			k := copy(r.hdr[r.have:], q)
			r.have += k
			n += k
			if r.have == headerLen && r.begin(c) {
				return n, nil
			}
		default:
			k := int(min(r.left, uint32(len(q))))
			if r.fh.typ == typeData {
				took, w := r.dataChunk(c, q[:k])
				if w != nil {
					r.left -= uint32(took)
					return n + took, w
				}
			}
			r.left -= uint32(k)
			n += k
			if r.left == 0 && r.end(c) {
				return n, nil
			}
		}
	}
	if r.lost {
		n = len(p)
	}
	return n, nil
}

// begin starts a frame whose header is read; it reports whether the
// frame, empty, ended a header block grpc-go must decide on.
func (r *reader) begin(c *conn) bool {
	r.fh = parseHeader(r.hdr[:])
	r.left = r.fh.length
	switch r.fh.typ {
	case typeHeaders:
		r.block = r.fh.stream
		c.opened(r.fh.stream)
	case typeData:
		r.padded = r.fh.flags&flagPadded != 0
		r.data = r.fh.length
	}
	if r.left == 0 {
		return r.end(c)
	}
	return false
}

// dataChunk follows b, DATA payload, and returns how many of its bytes
// grpc-go may have now, and what it waits for when not all.
func (r *reader) dataChunk(c *conn, b []byte) (int, <-chan struct{}) {
	took := 0
	if r.padded {
		pad := uint32(b[0])
		b = b[1:]
		took = 1
		r.padded = false
		if pad+1 > r.fh.length {
			r.lost = true // grpc-go ends the connection for it
			return took + len(b), nil
		}
		r.data = r.fh.length - 1 - pad
	}
	k := min(r.data, uint32(len(b)))
	if k > 0 {
		got, w := c.received(r.fh.stream, b[:k])
		r.data -= uint32(got)
		if w != nil {
			return took + got, w
		}
	}
	return took + len(b), nil
}

// end ends the frame; it reports whether the reader must stop there: the
// frame ended a header block grpc-go must decide on, or the gate has
// frames to give grpc-go before the next one.
func (r *reader) end(c *conn) bool {
	r.have = 0
	switch r.fh.typ {
	case typeRSTStream:
		c.ended(r.fh.stream)
	case typeHeaders, typeContinue:
		// grpc-go decides on the stream (its tap tags it, with Admit)
		// before it reads on.
		if r.fh.flags&flagEndHeaders != 0 && r.block != 0 {
			c.undecided.Store(r.block)
			r.block = 0
			return true
		}
	}
	return c.toInject.Load()
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
