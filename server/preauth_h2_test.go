package server_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

func mustPrefix(t testing.TB, s string) netip.Prefix {
	t.Helper()
	p, err := netip.ParsePrefix(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func insecureCreds() credentials.TransportCredentials { return insecure.NewCredentials() }

// dialFrom dials from the loopback address local (Linux routes all of
// 127.0.0.0/8 to loopback), so that a test has peers of its own.
func dialFrom(local string) func(context.Context, string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	return func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
}

// h2 is a client that speaks HTTP/2 frame by frame, as a hostile peer
// does: it sends what it likes and reads what the server answers.
type h2 struct {
	t    testing.TB
	c    net.Conn
	fr   *http2.Framer
	mu   sync.Mutex // held by writes
	enc  *hpack.Encoder
	buf  bytes.Buffer
	next uint32

	settings chan map[http2.SettingID]uint32 // the server's first SETTINGS
	ends     chan streamEnd                  // the frames that end streams
	closed   chan struct{}                   // closed when the server closes the connection
}

// streamEnd is a frame that ends a stream: a RST_STREAM, or trailers with
// their grpc-status.
type streamEnd struct {
	stream uint32
	rst    bool
	code   http2.ErrCode
	status int // grpc-status of the trailers
}

// dialH2 connects to addr (from local, when not empty) and sends the
// client preface and SETTINGS.
func dialH2(t testing.TB, addr, local string) *h2 {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second}
	if local != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	h := &h2{t: t, c: c, next: 1, settings: make(chan map[http2.SettingID]uint32, 1),
		ends: make(chan streamEnd, 4096), closed: make(chan struct{})}
	h.fr = http2.NewFramer(c, c)
	h.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	h.enc = hpack.NewEncoder(&h.buf)
	// A server that refuses the connection may have closed it already: the
	// reader sees that.
	if _, err := c.Write([]byte(http2.ClientPreface)); err == nil {
		_ = h.fr.WriteSettings()
	}
	go h.read()
	return h
}

func (h *h2) read() {
	defer close(h.closed)
	first := true
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if f.IsAck() {
				continue
			}
			if first {
				first = false
				s := map[http2.SettingID]uint32{}
				_ = f.ForeachSetting(func(st http2.Setting) error { s[st.ID] = st.Val; return nil })
				h.settings <- s
			}
			h.mu.Lock()
			_ = h.fr.WriteSettingsAck()
			h.mu.Unlock()
		case *http2.RSTStreamFrame:
			h.ends <- streamEnd{stream: f.StreamID, rst: true, code: f.ErrCode}
		case *http2.MetaHeadersFrame:
			if f.StreamEnded() {
				code, _ := strconv.Atoi(f.PseudoValue("status"))
				if v := f.Fields; len(v) > 0 {
					for _, hf := range v {
						if hf.Name == "grpc-status" {
							code, _ = strconv.Atoi(hf.Value)
						}
					}
				}
				h.ends <- streamEnd{stream: f.StreamID, status: code}
			}
		}
	}
}

// serverSettings waits for the server's SETTINGS: the connection is up.
func (h *h2) serverSettings() map[http2.SettingID]uint32 {
	h.t.Helper()
	select {
	case s := <-h.settings:
		return s
	case <-h.closed:
		h.t.Fatal("the server closed the connection before its SETTINGS")
	case <-time.After(10 * time.Second):
		h.t.Fatal("no SETTINGS from the server within 10s")
	}
	return nil
}

// refused waits for the server to close the connection without a SETTINGS.
func (h *h2) refused() bool {
	select {
	case <-h.settings:
		return false
	case <-h.closed:
		return true
	case <-time.After(10 * time.Second):
		h.t.Fatal("neither SETTINGS nor a close within 10s")
	}
	return false
}

// open opens a stream to path; fields are name, value, ... after the
// request's own.
func (h *h2) open(path string, fields ...string) uint32 {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	id := h.next
	h.next += 2
	h.buf.Reset()
	all := append([]string{":method", "POST", ":scheme", "http", ":path", path, ":authority", "exprd", "content-type", "application/grpc", "te", "trailers"}, fields...)
	for i := 0; i+1 < len(all); i += 2 {
		_ = h.enc.WriteField(hpack.HeaderField{Name: all[i], Value: all[i+1]})
	}
	if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.buf.Bytes(), EndHeaders: true}); err != nil {
		h.t.Fatal(err)
	}
	return id
}

// send sends b on stream id in DATA frames of at most 16 KiB, the last one
// ending the stream when end.
func (h *h2) send(id uint32, b []byte, end bool) {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for first := true; first || len(b) > 0; first = false {
		n := min(len(b), 16<<10)
		if err := h.fr.WriteData(id, end && n == len(b), b[:n]); err != nil {
			h.t.Fatal(err)
		}
		b = b[n:]
	}
}

// ended waits for the frame that ends stream id.
func (h *h2) ended(id uint32) streamEnd {
	h.t.Helper()
	timeout := time.After(15 * time.Second)
	for {
		select {
		case e := <-h.ends:
			if e.stream == id {
				return e
			}
		case <-h.closed:
			h.t.Fatalf("the server closed the connection before stream %d ended", id)
		case <-timeout:
			h.t.Fatalf("stream %d not ended within 15s", id)
		}
	}
}

// grpcMessage is b behind a gRPC message prefix that claims n bytes.
func grpcMessage(compressed bool, n uint32, b []byte) []byte {
	p := binary.BigEndian.AppendUint32([]byte{0}, n)
	if compressed {
		p[0] = 1
	}
	return append(p, b...)
}
