package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// rawConn is an HTTP/2 client connection driven frame by frame, for the
// pre-authentication cases: it sends what a gRPC client library never
// would (header blocks of indexed repeats, messages it never finishes,
// resets as fast as it can write them, more streams than the server
// allows) and reads back what exprd answers each stream. It obeys
// flow control when it sends DATA (exprd would otherwise end the
// connection, which is not what the cases measure) and nothing else.
//
// Its reader never blocks on a write: acknowledgements and window
// updates go through a goroutine of their own, so that a connection
// whose writes are held back (exprd's gate does that on purpose) still
// reads.
type rawConn struct {
	nc        net.Conn
	fr        *http2.Framer
	bw        *bufio.Writer
	authority string

	wmu sync.Mutex // fr's writes, bw, enc and hb
	enc *hpack.Encoder
	hb  bytes.Buffer

	mu      sync.Mutex
	cond    *sync.Cond
	next    uint32
	streams map[uint32]*rawStream
	connWin int64 // what we may still send on the connection
	initWin int64 // a new stream's send window (the server's SETTINGS)
	goaway  *http2.GoAwayFrame
	readErr error

	ctlMu      sync.Mutex
	ctlPings   [][8]byte
	ctlAcks    int
	ctlWindow  uint32
	ctlWake    chan struct{}
	closing    atomic.Bool
	readerDone chan struct{}
}

// rawStream is one stream of a rawConn and what came back on it.
type rawStream struct {
	id   uint32
	win  int64 // guarded by the conn's mu
	done chan struct{}
	out  outcome // set once, before done is closed
	// untilData: the first DATA frame answers the stream (a server
	// stream such as health's Watch, which never ends by itself).
	untilData bool
}

// outcome is how a raw stream ended, as a gRPC client would name it.
type outcome struct {
	kind  string
	msg   string
	typed bool // a gRPC status other than UNKNOWN, a reset, a GOAWAY, a closed connection
	ours  bool // of the client's own making: it let go first
}

// Our receive windows: large enough that exprd never waits on us.
const (
	rawRecvWindow = 1 << 30
	rawFrameMax   = 16 << 10 // what we send in one frame (the HTTP/2 default max)
)

// dialRaw connects from src to addr and sends the preface and settings.
func dialRaw(addr string, src netip.Addr) (*rawConn, error) {
	d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0)), Timeout: 10 * time.Second}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &rawConn{
		nc: nc, bw: bufio.NewWriterSize(nc, 64<<10), authority: addr,
		next: 1, streams: map[uint32]*rawStream{}, connWin: 65535, initWin: 65535,
		ctlWake: make(chan struct{}, 1), readerDone: make(chan struct{}),
	}
	c.cond = sync.NewCond(&c.mu)
	c.fr = http2.NewFramer(c.bw, bufio.NewReaderSize(nc, 64<<10))
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.fr.MaxHeaderListSize = 1 << 20
	c.fr.SetMaxReadFrameSize(1 << 20)
	c.enc = hpack.NewEncoder(&c.hb)
	err = c.write(func() error {
		if _, err := c.bw.WriteString(http2.ClientPreface); err != nil {
			return err
		}
		if err := c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: rawRecvWindow}, http2.Setting{ID: http2.SettingEnablePush, Val: 0}); err != nil {
			return err
		}
		return c.fr.WriteWindowUpdate(0, rawRecvWindow-65535)
	})
	if err != nil {
		nc.Close()
		return nil, err
	}
	go c.readLoop()
	go c.controlLoop()
	return c, nil
}

// write runs f with the writer held and flushes.
func (c *rawConn) write(f func() error) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := f(); err != nil {
		return err
	}
	return c.bw.Flush()
}

func (c *rawConn) wakeControl() {
	select {
	case c.ctlWake <- struct{}{}:
	default:
	}
}

// controlLoop writes what the reader owes the server: settings
// acknowledgements, ping answers, the connection's window updates.
func (c *rawConn) controlLoop() {
	for {
		select {
		case <-c.readerDone:
			return
		case <-c.ctlWake:
		}
		c.ctlMu.Lock()
		pings, acks, win := c.ctlPings, c.ctlAcks, c.ctlWindow
		c.ctlPings, c.ctlAcks, c.ctlWindow = nil, 0, 0
		c.ctlMu.Unlock()
		_ = c.write(func() error {
			for range acks {
				if err := c.fr.WriteSettingsAck(); err != nil {
					return err
				}
			}
			for _, p := range pings {
				if err := c.fr.WritePing(true, p); err != nil {
					return err
				}
			}
			if win > 0 {
				return c.fr.WriteWindowUpdate(0, win)
			}
			return nil
		})
	}
}

func (c *rawConn) readLoop() {
	defer close(c.readerDone)
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			c.fail(err)
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if f.IsAck() {
				continue
			}
			c.mu.Lock()
			_ = f.ForeachSetting(func(s http2.Setting) error {
				if s.ID == http2.SettingInitialWindowSize {
					delta := int64(s.Val) - c.initWin
					c.initWin = int64(s.Val)
					for _, st := range c.streams {
						st.win += delta
					}
				}
				return nil
			})
			c.cond.Broadcast()
			c.mu.Unlock()
			c.ctlMu.Lock()
			c.ctlAcks++
			c.ctlMu.Unlock()
			c.wakeControl()
		case *http2.PingFrame:
			if !f.IsAck() {
				c.ctlMu.Lock()
				c.ctlPings = append(c.ctlPings, f.Data)
				c.ctlMu.Unlock()
				c.wakeControl()
			}
		case *http2.WindowUpdateFrame:
			c.mu.Lock()
			if f.StreamID == 0 {
				c.connWin += int64(f.Increment)
			} else if st := c.streams[f.StreamID]; st != nil {
				st.win += int64(f.Increment)
			}
			c.cond.Broadcast()
			c.mu.Unlock()
		case *http2.MetaHeadersFrame:
			c.onHeaders(f)
		case *http2.DataFrame:
			if n := f.Header().Length; n > 0 {
				c.ctlMu.Lock()
				c.ctlWindow += n
				c.ctlMu.Unlock()
				c.wakeControl()
			}
			c.mu.Lock()
			st := c.streams[f.StreamID]
			c.mu.Unlock()
			switch {
			case st == nil:
			case st.untilData && len(f.Data()) > 0:
				c.finish(st, outcome{kind: "a response message", typed: true})
			case f.StreamEnded():
				c.finish(st, outcome{kind: "the stream ended without a grpc-status"})
			}
		case *http2.RSTStreamFrame:
			c.mu.Lock()
			st := c.streams[f.StreamID]
			c.mu.Unlock()
			if st != nil {
				c.finish(st, outcome{kind: "RST_STREAM " + f.ErrCode.String(), typed: true})
			}
		case *http2.GoAwayFrame:
			c.mu.Lock()
			c.goaway = f
			var gone []*rawStream
			for id, st := range c.streams {
				if id > f.LastStreamID {
					gone = append(gone, st)
				}
			}
			c.cond.Broadcast()
			c.mu.Unlock()
			for _, st := range gone {
				c.finish(st, c.goawayOutcome(f))
			}
		}
	}
}

func (c *rawConn) goawayOutcome(f *http2.GoAwayFrame) outcome {
	return outcome{kind: "GOAWAY " + f.ErrCode.String(), msg: string(f.DebugData()), typed: true}
}

// onHeaders reads a response's headers or trailers: a grpc-status ends
// the stream.
func (c *rawConn) onHeaders(f *http2.MetaHeadersFrame) {
	c.mu.Lock()
	st := c.streams[f.StreamID]
	c.mu.Unlock()
	if st == nil {
		return
	}
	if s := f.PseudoValue("status"); s != "" && s != "200" {
		// A gRPC client maps an HTTP status to a code of its own
		// (UNIMPLEMENTED, UNAVAILABLE, INTERNAL, ...): typed.
		c.finish(st, outcome{kind: "HTTP " + s, typed: true})
		return
	}
	var code, msg, details string
	for _, h := range f.RegularFields() {
		switch h.Name {
		case "grpc-status":
			code = h.Value
		case "grpc-message":
			msg, _ = url.PathUnescape(h.Value)
		case "grpc-status-details-bin":
			details = h.Value
		}
	}
	if code != "" {
		n, err := strconv.Atoi(code)
		if err != nil {
			c.finish(st, outcome{kind: "grpc-status " + code, msg: msg})
			return
		}
		kind := "grpc " + codes.Code(n).String()
		if subj := detailSubjects(details); len(subj) > 0 {
			kind += " (" + strings.Join(subj, ", ") + ")"
		}
		c.finish(st, outcome{kind: kind, msg: msg, typed: codes.Code(n) != codes.Unknown})
		return
	}
	if f.StreamEnded() {
		c.finish(st, outcome{kind: "the stream ended without a grpc-status"})
	}
}

// detailSubjects are the QuotaFailure subjects of a grpc-status-details-bin.
func detailSubjects(v string) []string {
	if v == "" {
		return nil
	}
	b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(v, "="))
	if err != nil {
		return nil
	}
	var p spb.Status
	if proto.Unmarshal(b, &p) != nil {
		return nil
	}
	return statusSubjects(status.FromProto(&p))
}

// fail ends every stream still waiting when the connection ends.
func (c *rawConn) fail(err error) {
	c.mu.Lock()
	c.readErr = err
	var left []*rawStream
	for _, st := range c.streams {
		left = append(left, st)
	}
	c.cond.Broadcast()
	c.mu.Unlock()
	out := c.closedOutcome()
	for _, st := range left {
		c.finish(st, out)
	}
}

// closedOutcome is what a stream the connection's end cut off got.
func (c *rawConn) closedOutcome() outcome {
	if c.closing.Load() {
		return outcome{kind: "held until the client let go", typed: true, ours: true}
	}
	c.mu.Lock()
	g := c.goaway
	c.mu.Unlock()
	if g != nil {
		o := c.goawayOutcome(g)
		o.kind += ", then the connection closed"
		return o
	}
	// A gRPC client sees UNAVAILABLE.
	return outcome{kind: "the connection closed", typed: true}
}

// finish sets st's outcome, once.
func (c *rawConn) finish(st *rawStream, o outcome) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.streams[st.id]; !ok {
		return
	}
	delete(c.streams, st.id)
	st.out = o
	close(st.done)
	c.cond.Broadcast()
}

// errGone is a write refused because the connection or stream is over.
var errGone = errors.New("the stream or connection is over")

// open starts a stream with the headers hdrs (endStream: and no body);
// untilData: its first DATA frame answers it.
func (c *rawConn) open(hdrs []hpack.HeaderField, endStream, untilData bool) (*rawStream, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	if c.readErr != nil || c.goaway != nil {
		c.mu.Unlock()
		return nil, errGone
	}
	st := &rawStream{id: c.next, win: c.initWin, done: make(chan struct{}), untilData: untilData}
	c.next += 2
	c.streams[st.id] = st
	c.mu.Unlock()
	if err := c.writeHeaders(st.id, hdrs, endStream); err != nil {
		return st, err
	}
	return st, c.bw.Flush()
}

// rapidReset opens n streams with hdrs and resets each at once (HEADERS
// then RST_STREAM CANCEL), flushing every batch; it stops early when the
// connection ends or ctx does, and returns how many it sent.
func (c *rawConn) rapidReset(ctx context.Context, hdrs []hpack.HeaderField, n int) (int, error) {
	const batch = 100
	sent := 0
	for sent < n && ctx.Err() == nil {
		err := c.write(func() error {
			for range min(batch, n-sent) {
				c.mu.Lock()
				if c.readErr != nil || c.goaway != nil {
					c.mu.Unlock()
					return errGone
				}
				id := c.next
				c.next += 2
				c.mu.Unlock()
				if err := c.writeHeaders(id, hdrs, false); err != nil {
					return err
				}
				if err := c.fr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
					return err
				}
				sent++
			}
			return nil
		})
		if err != nil {
			return sent, err
		}
	}
	return sent, nil
}

// writeHeaders encodes hdrs and writes them as HEADERS and CONTINUATION
// frames; the writer must be held (the encoder's table follows the
// order of the blocks on the wire).
func (c *rawConn) writeHeaders(id uint32, hdrs []hpack.HeaderField, endStream bool) error {
	c.hb.Reset()
	for _, h := range hdrs {
		if err := c.enc.WriteField(h); err != nil {
			return err
		}
	}
	block := c.hb.Bytes()
	first := block[:min(len(block), rawFrameMax)]
	block = block[len(first):]
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndStream: endStream, EndHeaders: len(block) == 0}); err != nil {
		return err
	}
	for len(block) > 0 {
		n := min(len(block), rawFrameMax)
		if err := c.fr.WriteContinuation(id, n == len(block), block[:n]); err != nil {
			return err
		}
		block = block[n:]
	}
	return nil
}

// send writes data on st within the flow-control windows, waiting for
// them while ctx lasts; endStream ends the stream with the last frame.
func (c *rawConn) send(ctx context.Context, st *rawStream, data []byte, endStream bool) error {
	stop := context.AfterFunc(ctx, func() {
		c.mu.Lock()
		c.cond.Broadcast()
		c.mu.Unlock()
	})
	defer stop()
	for {
		c.mu.Lock()
		for len(data) > 0 && (c.connWin <= 0 || st.win <= 0) && c.live(st) && ctx.Err() == nil {
			c.cond.Wait()
		}
		if !c.live(st) || ctx.Err() != nil {
			c.mu.Unlock()
			return errGone
		}
		n := int(min(int64(len(data)), c.connWin, st.win, rawFrameMax))
		c.connWin -= int64(n)
		st.win -= int64(n)
		c.mu.Unlock()
		last := endStream && n == len(data)
		if err := c.write(func() error { return c.fr.WriteData(st.id, last, data[:n]) }); err != nil {
			return err
		}
		data = data[n:]
		if len(data) == 0 {
			return nil
		}
	}
}

// live reports whether st still waits for its outcome on a live
// connection; c.mu must be held.
func (c *rawConn) live(st *rawStream) bool {
	_, ok := c.streams[st.id]
	return ok && c.readErr == nil
}

// wait returns st's outcome, or ok false when ctx ends first.
func (st *rawStream) wait(ctx context.Context) (outcome, bool) {
	select {
	case <-st.done:
		return st.out, true
	case <-ctx.Done():
		return outcome{}, false
	}
}

// answered reports whether st has its outcome already.
func (st *rawStream) answered() bool {
	select {
	case <-st.done:
		return true
	default:
		return false
	}
}

// close ends the connection; streams still waiting are "held until the
// client let go".
func (c *rawConn) close() {
	c.closing.Store(true)
	c.nc.Close()
	<-c.readerDone
}

// goneOutcome is the outcome of a stream that could not be opened or
// written: the connection's end, or the GOAWAY before it.
func (c *rawConn) goneOutcome() outcome {
	c.mu.Lock()
	g, err := c.goaway, c.readErr
	c.mu.Unlock()
	switch {
	case g != nil:
		return c.goawayOutcome(g)
	case err != nil || !c.closing.Load():
		return outcome{kind: "the connection closed", typed: true}
	}
	return outcome{kind: "held until the client let go", typed: true, ours: true}
}

// grpcHeaders is a gRPC request's header block for method, with extra
// fields after the usual ones. None is indexed, so that the encoder's
// dynamic table holds only what a case puts there on purpose.
func grpcHeaders(authority, method string, extra ...hpack.HeaderField) []hpack.HeaderField {
	h := []hpack.HeaderField{
		{Name: ":method", Value: "POST", Sensitive: true},
		{Name: ":scheme", Value: "http", Sensitive: true},
		{Name: ":path", Value: method, Sensitive: true},
		{Name: ":authority", Value: authority, Sensitive: true},
		{Name: "content-type", Value: "application/grpc", Sensitive: true},
		{Name: "te", Value: "trailers", Sensitive: true},
	}
	return append(h, extra...)
}

func authHeader(tok string) hpack.HeaderField {
	return hpack.HeaderField{Name: "authorization", Value: "bearer " + tok, Sensitive: true}
}

// grpcFrame is a gRPC length-prefixed message.
func grpcFrame(msg []byte, compressed bool) []byte {
	b := make([]byte, 5+len(msg))
	if compressed {
		b[0] = 1
	}
	binary.BigEndian.PutUint32(b[1:5], uint32(len(msg)))
	copy(b[5:], msg)
	return b
}

// grpcPrefix is a length prefix claiming n bytes, and nothing after it.
func grpcPrefix(n int) []byte {
	b := make([]byte, 5)
	binary.BigEndian.PutUint32(b[1:5], uint32(n))
	return b
}

// record counts a raw stream's outcome in t: a typed one as an answer
// (wanted when want says so), an untyped one as untyped, ok false (no
// outcome by the deadline) as no answer.
func recordRaw(t *tally, what string, o outcome, ok bool, d time.Duration, want func(outcome) bool) {
	switch {
	case !ok:
		t.noAnswer(what)
	case !o.typed:
		t.untypedError(fmt.Errorf("%s: %s %s", what, o.kind, o.msg))
	default:
		t.answer(what+": "+o.kind, o.msg, want == nil || want(o), d)
	}
}
