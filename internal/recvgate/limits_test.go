package recvgate

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	_ "google.golang.org/grpc/encoding/gzip" // grpc-go decompresses what the client compresses
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/proto"

	"github.com/exprd/exprd/membudget"
)

// admitTap admits the streams whose headers carry "admit" (its value, when
// a number, their limit; "who", their caller, for the peer limit and the
// budget) and refuses the others Unauthenticated, as exprd's tap does the
// streams without a token.
func admitTap(g *Gate) grpc.ServerOption {
	return grpc.InTapHandle(func(ctx context.Context, info *tap.Info) (context.Context, error) {
		v := info.Header.Get("admit")
		if len(v) == 0 {
			return nil, status.Error(codes.Unauthenticated, "no admit header")
		}
		limit, _ := strconv.Atoi(v[0])
		who := ""
		if w := info.Header.Get("who"); len(w) > 0 {
			who = w[0]
			ctx = membudget.WithCaller(ctx, who) // as exprd's tap names the token's caller
		}
		return g.Admit(ctx, limit, who), nil
	})
}

func admitCtx(t *testing.T, limit string) context.Context {
	return metadata.AppendToOutgoingContext(t.Context(), "admit", limit)
}

// h2 is a client that speaks HTTP/2 frame by frame.
type h2 struct {
	t    *testing.T
	c    net.Conn
	fr   *http2.Framer
	mu   sync.Mutex
	enc  *hpack.Encoder
	buf  bytes.Buffer
	next uint32

	frames chan got      // what the server sends that ends a stream
	closed chan struct{} // closed when the server closes the connection
}

// got is a frame that ends a stream: a RST_STREAM or the trailers.
type got struct {
	stream uint32
	rst    bool
	code   http2.ErrCode
}

func dialH2(t *testing.T, addr string) *h2 {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	h := &h2{t: t, c: c, next: 1, frames: make(chan got, 1024), closed: make(chan struct{})}
	h.fr = http2.NewFramer(c, c)
	h.enc = hpack.NewEncoder(&h.buf)
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	if err := h.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	go h.read()
	return h
}

func (h *h2) read() {
	defer close(h.closed)
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				h.mu.Lock()
				_ = h.fr.WriteSettingsAck()
				h.mu.Unlock()
			}
		case *http2.RSTStreamFrame:
			h.frames <- got{stream: f.StreamID, rst: true, code: f.ErrCode}
		case *http2.HeadersFrame:
			if f.StreamEnded() {
				h.frames <- got{stream: f.StreamID}
			}
		}
	}
}

// open opens a stream to path with the header fields kv (name, value, ...).
func (h *h2) open(path string, kv ...string) uint32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	id := h.next
	h.next += 2
	h.buf.Reset()
	fields := []string{":method", "POST", ":scheme", "http", ":path", path, ":authority", "x", "content-type", "application/grpc", "te", "trailers"}
	fields = append(fields, kv...)
	for i := 0; i < len(fields); i += 2 {
		_ = h.enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.buf.Bytes(), EndHeaders: true}); err != nil {
		h.t.Fatal(err)
	}
	return id
}

// send sends b on stream id, in frames of at most 16 KiB.
func (h *h2) send(id uint32, b []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for len(b) > 0 {
		n := min(len(b), 16<<10)
		if err := h.fr.WriteData(id, false, b[:n]); err != nil {
			h.t.Fatal(err)
		}
		b = b[n:]
	}
}

// raw writes b as it is.
func (h *h2) raw(b []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, err := h.c.Write(b); err != nil {
		h.t.Fatal(err)
	}
}

// ended waits for the frame that ends stream id: a RST_STREAM (its code) or
// trailers (their grpc-status, as a code past 1000).
func (h *h2) ended(id uint32) (rst http2.ErrCode, ok bool) {
	h.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case f := <-h.frames:
			if f.stream == id {
				return f.code, f.rst
			}
		case <-h.closed:
			h.t.Fatalf("the server closed the connection before stream %d ended", id)
		case <-timeout:
			h.t.Fatalf("stream %d not ended within 10s", id)
		}
	}
}

func msgPrefix(compressed bool, n uint32) []byte {
	b := binary.BigEndian.AppendUint32([]byte{0}, n)
	if compressed {
		b[0] = 1
	}
	return b
}

// The gate reserves for no stream its tap did not admit, however long
// its message claims to be; an admitted one is reserved for as before.
func TestOnlyAdmittedStreamsReserved(t *testing.T) {
	for _, tt := range []struct {
		name  string
		admit bool
		tls   bool
	}{
		{"refused by the tap", false, false},
		{"admitted", true, false},
		{"refused by the tap, over TLS", false, true},
		{"admitted, over TLS", true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			budget := membudget.New(8*maxMsg, 20*time.Millisecond)
			g := New(budget, window, 2*maxMsg, WithAdmission())
			s := serve(t, g, tt.tls, admitTap(g))
			ctx := t.Context()
			if tt.admit {
				ctx = admitCtx(t, "")
			}
			_, err := s.client.UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: payload(maxMsg)})
			if tt.admit != (err == nil) {
				t.Fatalf("got %v", err)
			}
			if got, want := g.reserves.Load(), map[bool]int64{false: 0, true: 1}[tt.admit]; got != want {
				t.Errorf("%d messages reserved for, want %d", got, want)
			}
			if n := g.unmatched.Load(); n != 0 {
				t.Errorf("%d admissions found no stream to decide on", n)
			}
			eventually(t, "no stream followed", func() bool { return tracked(g) == 0 })
		})
	}
}

// Many streams on a connection, admitted and refused in turn, while
// messages flow: the gate attributes each admission to its stream.
func TestAdmissionInterleaved(t *testing.T) {
	budget := membudget.New(64*maxMsg, 20*time.Millisecond)
	g := New(budget, window, 2*maxMsg, WithAdmission())
	kept := budget.InUse()
	s := serve(t, g, false, admitTap(g))
	var wg sync.WaitGroup
	const each = 16
	for i := range 2 * each {
		wg.Go(func() {
			ctx := t.Context()
			if i%2 == 0 {
				ctx = admitCtx(t, "")
			}
			_, err := s.client.UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: payload(2 * window)})
			if (i%2 == 0) != (err == nil) {
				t.Errorf("call %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if got := g.reserves.Load(); got != each {
		t.Errorf("%d messages reserved for, want %d (the admitted ones)", got, each)
	}
	if n := g.unmatched.Load(); n != 0 {
		t.Errorf("%d admissions found no stream to decide on", n)
	}
	eventually(t, "the budget back to what the overdraft keeps", func() bool { return budget.InUse() == kept })
}

// A stream admitted with a limit takes messages up to it; one byte past
// it resets the stream before the frame after the one with its prefix:
// the client's RPC ends RESOURCE_EXHAUSTED (ENHANCE_YOUR_CALM) and the
// handler never gets the message (longer than a frame).
func TestStreamLimit(t *testing.T) {
	const limit = 20_000
	for _, tt := range []struct {
		name string
		size int
		ok   bool
	}{
		{"at the limit", limit, true},
		{"one past it", limit + 1, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			budget := membudget.New(8*maxMsg, 20*time.Millisecond)
			g := New(budget, window, 2*maxMsg, WithAdmission())
			s := serve(t, g, false, admitTap(g))
			req := &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: make([]byte, tt.size-8)}}
			if n := proto.Size(req); n != tt.size {
				t.Fatalf("the request is %d bytes, want %d", n, tt.size)
			}
			_, err := s.client.UnaryCall(admitCtx(t, strconv.Itoa(limit)), req)
			if tt.ok {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("got %v, want ResourceExhausted (a reset ENHANCE_YOUR_CALM)", err)
			}
			if got := s.srv.messages.Load(); got != 0 {
				t.Errorf("the handler got %d messages", got)
			}
			if got := g.Resets(); got != 1 {
				t.Errorf("%d resets, want 1", got)
			}
		})
	}
}

// Two peers: one that holds its limit (two largest messages, the handler
// working on them) makes its own next message wait, and not the other
// peer's. A peer is its address, or the caller the tap names: a caller's
// second message waits even when it comes from another address, and
// another caller's from the same address does not.
func TestPeerLimit(t *testing.T) {
	type from struct{ addr, who string }
	for _, tt := range []struct {
		name                 string
		first, second, other from
		admission            bool
	}{
		{"by address", from{"127.0.0.1", ""}, from{"127.0.0.1", ""}, from{"127.0.0.2", ""}, false},
		{"by caller, over addresses", from{"127.0.0.1", "squatter"}, from{"127.0.0.2", "squatter"}, from{"127.0.0.1", "other"}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			budget := membudget.New(64*maxMsg, 20*time.Millisecond)
			key := func(a net.Addr) string { h, _, _ := net.SplitHostPort(a.String()); return h }
			opts := []Option{WithPeerLimit(2*maxMsg, key)} // one message of maxMsg
			var srvOpts []grpc.ServerOption
			if tt.admission {
				opts = append(opts, WithAdmission())
			}
			g := New(budget, window, maxMsg, opts...)
			if tt.admission {
				srvOpts = append(srvOpts, admitTap(g))
			}
			kept := budget.InUse()
			s := serve(t, g, false, srvOpts...)
			s.srv.working = make(chan struct{})
			addr := s.lis.Addr().String()
			clients := map[string]testgrpc.TestServiceClient{}
			client := func(local string) testgrpc.TestServiceClient {
				if c, ok := clients[local]; ok {
					return c
				}
				d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
				cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
					grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { cc.Close() })
				clients[local] = testgrpc.NewTestServiceClient(cc)
				return clients[local]
			}
			req := &testgrpc.StreamingOutputCallRequest{Payload: payload(maxMsg - 8)}
			size := int64(proto.Size(req))
			stream := func(f from) {
				ctx := metadata.AppendToOutgoingContext(t.Context(), "admit", "0", "who", f.who)
				st, err := client(f.addr).FullDuplexCall(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := st.Send(req); err != nil {
					t.Fatal(err)
				}
			}
			stream(tt.first) // at its limit: the handler holds it
			eventually(t, "the first message decoded", func() bool { return s.srv.messages.Load() == 1 })
			stream(tt.second) // one past: waits for the first
			eventually(t, "the second message waiting", func() bool { return g.reserves.Load() == 2 })
			time.Sleep(100 * time.Millisecond)
			if n := s.srv.messages.Load(); n != 1 {
				t.Fatalf("%d messages decoded, want the second to wait for the first", n)
			}
			stream(tt.other)
			eventually(t, "the other peer's message decoded", func() bool { return s.srv.messages.Load() == 2 })
			if n := budget.InUse() - kept; n != 4*size {
				t.Errorf("%d bytes reserved, want the first message's and the other's (%d)", n, 4*size)
			}
			close(s.srv.working)
			eventually(t, "the second message decoded once the first is released", func() bool { return s.srv.messages.Load() == 3 })
		})
	}
}

// A message whose room was reserved must arrive within the arrival
// timeout: one that does is decoded; one whose client stops sending has
// its stream reset (ENHANCE_YOUR_CALM to the client, a reset to grpc-go)
// and its room released; one whose client stops in the middle of a frame
// has its connection closed ResetGrace later.
func TestArrivalTimeout(t *testing.T) {
	for _, tt := range []struct {
		name  string
		send  int // bytes of the message sent (its length is maxMsg)
		frame bool
		want  string
	}{
		{"arrives", maxMsg - 8, false, "decoded"},
		{"stops after a window", window - prefixLen, false, "reset"},
		{"stops in the middle of a frame", window - prefixLen - 300, true, "closed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			budget := membudget.New(8*maxMsg, 20*time.Millisecond)
			g := New(budget, window, 2*maxMsg, WithArrivalTimeout(300*time.Millisecond))
			kept := budget.InUse()
			s := serve(t, g, false)
			if tt.want == "decoded" {
				if _, err := s.client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{Payload: payload(tt.send)}); err != nil {
					t.Fatal(err)
				}
				eventually(t, "the budget back to empty", func() bool { return budget.InUse() == kept })
				return
			}
			h := dialH2(t, s.lis.Addr().String())
			id := h.open("/grpc.testing.TestService/UnaryCall")
			// Its bytes do not make a SimpleRequest, nor do they all come.
			msg := append(msgPrefix(false, maxMsg), make([]byte, maxMsg)...)
			h.send(id, msg[:prefixLen+tt.send])
			if tt.frame {
				// A DATA frame of 200 bytes of which 100 come.
				hdr := []byte{0, 0, 200, typeData, 0, 0, 0, 0, 0}
				binary.BigEndian.PutUint32(hdr[5:], id)
				h.raw(append(hdr, make([]byte, 100)...))
			}
			switch tt.want {
			case "reset":
				code, rst := h.ended(id)
				if !rst || code != http2.ErrCodeEnhanceYourCalm {
					t.Fatalf("got reset %v (%v), want ENHANCE_YOUR_CALM", rst, code)
				}
				eventually(t, "the room released", func() bool { b, o := held(g); return b == 0 && o == 0 })
				if got := g.Resets(); got != 1 {
					t.Errorf("%d resets, want 1", got)
				}
				// The connection goes on: grpc-go ended the stream, and serves another.
				id2 := h.open("/grpc.testing.TestService/UnaryCall")
				h.mu.Lock()
				_ = h.fr.WriteData(id2, true, msgPrefix(false, 0))
				h.mu.Unlock()
				if code, rst := h.ended(id2); rst {
					t.Fatalf("the next stream was reset %v", code)
				}
			case "closed":
				select {
				case <-h.closed:
				case <-time.After(10 * time.Second):
					t.Fatal("the connection is still open")
				}
			}
			eventually(t, "the budget back to empty", func() bool { return budget.InUse() == kept })
		})
	}
}

// A compressed message reserves its inflated bound, whatever its length,
// and grpc-go does not get its last byte before: with the budget and the
// overdraft spent, the handler does not get it; once they are given back,
// it does.
func TestCompressedHeldBack(t *testing.T) {
	budget := membudget.New(8*maxMsg, 20*time.Millisecond)
	g := New(budget, window, 2*maxMsg, WithCompressed(2*maxMsg))
	kept := budget.InUse()
	s := serve(t, g, false)
	if _, err := s.client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	giveBack := spend(t, g)
	done := make(chan error, 1)
	go func() {
		// 1 MiB of zeros, a kilobyte once compressed: below the window.
		_, err := s.client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{Payload: payload(maxMsg)}, grpc.UseCompressor("gzip"))
		done <- err
	}()
	eventually(t, "the message's last byte held back", func() bool { return g.holding.Load() == 1 })
	if got := s.srv.messages.Load(); got != 1 {
		t.Fatalf("the handler got the compressed message while the budget was spent (%d messages)", got)
	}
	giveBack()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := g.reserves.Load(); got != 1 {
		t.Errorf("%d reservations, want 1", got)
	}
	eventually(t, "the budget back to what the overdraft keeps", func() bool { return budget.InUse() == kept })
}

// The room an admitted stream's message reserves counts in the share of
// the caller the tap's context names, as its request on its way in, and
// leaves it once the handler has the message and reads on; a stream
// whose tap names none reserves as no caller's.
func TestReservedInItsCallersName(t *testing.T) {
	for _, who := range []string{"alice", ""} {
		t.Run("caller "+strconv.Quote(who), func(t *testing.T) {
			budget := membudget.New(16*maxMsg, 20*time.Millisecond)
			g := New(budget, window, 2*maxMsg, WithAdmission())
			kept := budget.InUse()
			s := serve(t, g, false, admitTap(g))
			s.srv.working = make(chan struct{})
			md := []string{"admit", "0"}
			if who != "" {
				md = append(md, "who", who)
			}
			st, err := s.client.FullDuplexCall(metadata.AppendToOutgoingContext(t.Context(), md...))
			if err != nil {
				t.Fatal(err)
			}
			req := &testgrpc.StreamingOutputCallRequest{Payload: payload(maxMsg)}
			if err := st.Send(req); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the handler has the message", func() bool { return s.srv.messages.Load() == 1 })
			reserved := budget.InUse() - kept
			if reserved < 2*maxMsg {
				t.Fatalf("%d bytes reserved, want twice the message", reserved)
			}
			if got, want := budget.Callers()[who], reserved*btoi(who != ""); got != want {
				t.Errorf("%q holds %d of the budget, want %d", who, got, want)
			}
			close(s.srv.working)
			if _, err := st.Recv(); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the room given back", func() bool { return budget.InUse() == kept && len(budget.Callers()) == 0 })
			if err := st.CloseSend(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func btoi(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
