package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	_ "google.golang.org/grpc/encoding/gzip" // the OTLP exporters register it in exprd
	"google.golang.org/grpc/status"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/membudget"
	"github.com/exprd/exprd/server"
)

// Each connection limit's flag must be in its range, named when it is not.
func TestConnLimitFlagsInRange(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-header-list-size", "1023"}, "max-header-list-size: 1023, want at least 1024"},
		{[]string{"--unary-streams-per-connection", "0"}, "unary-streams-per-connection: 0, want a positive value"},
		{[]string{"--connection-timeout", "0s"}, "connection-timeout: 0s, want a positive duration"},
		{[]string{"--max-connections-per-peer", "0"}, "max-connections-per-peer: 0, want a positive value"},
		{[]string{"--max-connections", "-1"}, "max-connections: -1, want a positive value, or 0 for one for 2 MiB of the memory budget"},
		{[]string{"--recv-msg-timeout", "-1s"}, "recv-msg-timeout: -1s, want a positive duration"},
		{[]string{"--recv-peer-share", "0"}, "recv-peer-share: 0, want more than 0 and at most 1"},
		{[]string{"--recv-peer-share", "1.01"}, "recv-peer-share: 1.01, want more than 0 and at most 1"},
	} {
		if _, err := parseConfig(tt.args, io.Discard); err == nil || err.Error() != tt.want {
			t.Errorf("%v: got %v, want %q", tt.args, err, tt.want)
		}
	}
	args := []string{"--max-header-list-size", "1024", "--unary-streams-per-connection", "1", "--connection-timeout", "1ms",
		"--max-connections-per-peer", "1", "--max-connections", "1", "--recv-msg-timeout", "1ms", "--recv-peer-share", "1"}
	if _, err := parseConfig(args, io.Discard); err != nil {
		t.Errorf("the edges of the ranges: got %v, want none", err)
	}
}

// serveFlags serves a server built from args (and a memory budget, as
// exprd always has one) on loopback.
func serveFlags(t *testing.T, args ...string) string {
	t.Helper()
	c, err := parseConfig(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := c.serverOptions(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(append(opts, server.WithMemoryBudget(membudget.New(256<<20, 10*time.Millisecond)))...)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return lis.Addr().String()
}

// rawConn is an HTTP/2 connection whose client speaks frame by frame.
type rawConn struct {
	c        net.Conn
	mu       sync.Mutex // held by writes
	fr       *http2.Framer
	settings chan map[http2.SettingID]uint32
	rst      chan http2.ErrCode
	closed   chan struct{}
}

func dialRaw(t *testing.T, addr string, preface bool) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	r := &rawConn{c: c, fr: http2.NewFramer(c, c), settings: make(chan map[http2.SettingID]uint32, 1), rst: make(chan http2.ErrCode, 16), closed: make(chan struct{})}
	if preface {
		if _, err := c.Write([]byte(http2.ClientPreface)); err == nil {
			_ = r.fr.WriteSettings()
		}
	}
	go func() {
		defer close(r.closed)
		for {
			f, err := r.fr.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					s := map[http2.SettingID]uint32{}
					_ = f.ForeachSetting(func(st http2.Setting) error { s[st.ID] = st.Val; return nil })
					select {
					case r.settings <- s:
					default:
					}
					r.mu.Lock()
					_ = r.fr.WriteSettingsAck()
					r.mu.Unlock()
				}
			case *http2.RSTStreamFrame:
				r.rst <- f.ErrCode
			}
		}
	}()
	return r
}

// up reports whether the server sent its SETTINGS (true) or closed the
// connection (false).
func (r *rawConn) up(t *testing.T) (map[http2.SettingID]uint32, bool) {
	t.Helper()
	select {
	case s := <-r.settings:
		return s, true
	case <-r.closed:
		return nil, false
	case <-time.After(10 * time.Second):
		t.Fatal("neither SETTINGS nor a close within 10s")
	}
	return nil, false
}

// The flags reach the server: its SETTINGS say --max-header-list-size and
// --max-streams-per-connection plus --unary-streams-per-connection; a
// connection past --max-connections-per-peer is closed, as one that does
// not finish its handshake within --connection-timeout is; a message
// that stops is reset after --recv-msg-timeout; gzip is refused, or taken
// with --accept-compressed.
func TestConnLimitFlagsReachTheServer(t *testing.T) {
	addr := serveFlags(t, "--max-header-list-size", "2048", "--max-streams-per-connection", "3", "--unary-streams-per-connection", "2",
		"--max-connections-per-peer", "2", "--connection-timeout", "1s", "--recv-msg-timeout", "200ms")
	first := dialRaw(t, addr, true)
	s, ok := first.up(t)
	if !ok {
		t.Fatal("the first connection was closed")
	}
	if s[http2.SettingMaxHeaderListSize] != 2048 || s[http2.SettingMaxConcurrentStreams] != 5 {
		t.Errorf("SETTINGS %v, want MAX_HEADER_LIST_SIZE 2048 and MAX_CONCURRENT_STREAMS 5", s)
	}
	silent := dialRaw(t, addr, false) // the second: at the limit, it sends nothing
	if _, ok := dialRaw(t, addr, true).up(t); ok {
		t.Error("a third connection from the peer was served")
	}
	select {
	case <-silent.closed:
	case <-time.After(10 * time.Second):
		t.Error("a connection that sent no preface is open after the connection timeout")
	}

	// A message that claims 4 MiB and stops after the window.
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/exprd.v1.ExprTool/Call"}, {":authority", "x"}, {"content-type", "application/grpc"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	func() {
		first.mu.Lock()
		defer first.mu.Unlock()
		if err := first.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		msg := binary.BigEndian.AppendUint32([]byte{0}, 4<<20)
		msg = append(msg, make([]byte, server.DefaultInitialWindowSize-len(msg))...)
		for len(msg) > 0 {
			n := min(len(msg), 16<<10)
			if err := first.fr.WriteData(1, false, msg[:n]); err != nil {
				t.Fatal(err)
			}
			msg = msg[n:]
		}
	}()
	select {
	case code := <-first.rst:
		if code != http2.ErrCodeEnhanceYourCalm {
			t.Errorf("reset %v, want ENHANCE_YOUR_CALM", code)
		}
	case <-time.After(10 * time.Second):
		t.Error("a message that stopped was not reset")
	}

	for _, tt := range []struct {
		args []string
		want codes.Code
	}{
		{nil, codes.Unimplemented},
		{[]string{"--accept-compressed"}, codes.OK},
	} {
		cc, err := grpc.NewClient(serveFlags(t, tt.args...), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = exprdv1.NewExprToolClient(cc).Describe(ctx, &exprdv1.DescribeRequest{}, grpc.UseCompressor("gzip"))
		cancel()
		cc.Close()
		if status.Code(err) != tt.want {
			t.Errorf("%v: a gzipped call got %v, want %v", tt.args, err, tt.want)
		}
	}
}
