package server_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	_ "google.golang.org/grpc/encoding/gzip" // as the OTLP exporters register it in exprd
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/exprd/exprd/evaluator"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/membudget"
	"github.com/exprd/exprd/server"
	"github.com/exprd/exprd/server/auth"
	"github.com/exprd/exprd/utcp/utcpall"
)

// The tests of the limits a peer meets before its token is checked, each
// through a real server on loopback with auth on, at the limit and one
// past it.

const (
	preauthToken   = "tok-preauth-0123456789"
	noScopeToken   = "tok-noscope-0123456789"
	squatterToken  = "tok-squatter-0123456789"
	callPath       = "/exprd.v1.ExprTool/Call"
	describePath   = "/exprd.v1.ExprTool/Describe"
	healthWatch    = "/grpc.health.v1.Health/Watch"
	healthCheck    = "/grpc.health.v1.Health/Check"
	bearerPreauth  = "Bearer " + preauthToken
	preauthTimeout = 15 * time.Second
)

func preauthTokens(t testing.TB) auth.Tokens {
	t.Helper()
	tokens, err := auth.ParseTokens(strings.NewReader("ui " + preauthToken + " *\nops " + noScopeToken + " codemode\nsquatter " + squatterToken + " *"))
	if err != nil {
		t.Fatal(err)
	}
	return tokens
}

// authServer serves a server with auth on and opts; it returns a client
// connection and the server's address.
func authServer(t testing.TB, opts ...server.Option) (*grpc.ClientConn, string) {
	t.Helper()
	conn := serve(t, newServer(t, append([]server.Option{server.WithAuth(preauthTokens(t))}, opts...)...))
	return conn, conn.Target()
}

func authed(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", bearerPreauth)
}

// headerFields are fields whose HTTP/2 size (name, value, 32 bytes each)
// with the request's own (h2.open's and the token) is exactly size.
func headerFields(t *testing.T, size int) []string {
	t.Helper()
	own := []string{":method", "POST", ":scheme", "http", ":path", describePath, ":authority", "exprd", "content-type", "application/grpc", "te", "trailers", "authorization", bearerPreauth}
	used := 0
	for i := 0; i < len(own); i += 2 {
		used += len(own[i]) + len(own[i+1]) + 32
	}
	pad := size - used - len("x-pad") - 32
	if pad < 0 {
		t.Fatalf("a header list of %d bytes cannot hold the request's own %d", size, used)
	}
	return []string{"authorization", bearerPreauth, "x-pad", strings.Repeat("p", pad)}
}

// A request whose header list is at --max-header-list-size is served; one
// byte past it is reset before any of it is kept.
func TestHeaderListSize(t *testing.T) {
	t.Parallel()
	_, addr := authServer(t)
	for _, tt := range []struct {
		name string
		size int
		ok   bool
	}{
		{"at the limit", server.DefaultMaxHeaderListSize, true},
		{"one past it", server.DefaultMaxHeaderListSize + 1, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := dialH2(t, addr, "")
			if got := h.serverSettings()[http2.SettingMaxHeaderListSize]; got != server.DefaultMaxHeaderListSize {
				t.Errorf("SETTINGS_MAX_HEADER_LIST_SIZE %d, want %d", got, server.DefaultMaxHeaderListSize)
			}
			id := h.open(describePath, headerFields(t, tt.size)...)
			h.send(id, grpcMessage(false, 0, nil), true)
			e := h.ended(id)
			switch {
			case tt.ok && (e.rst || e.status != 0):
				t.Fatalf("got %+v, want the call answered OK", e)
			case !tt.ok && (!e.rst || e.code != http2.ErrCodeFrameSize):
				t.Fatalf("got %+v, want RST_STREAM FRAME_SIZE_ERROR", e)
			}
		})
	}
}

// The header-list attack: streams of one HEADERS frame each, one 3,800
// character -bin field repeated by HPACK index (a byte a field), from a
// client with a token, so that nothing but the header list's bound stops
// them. grpc-go's own default (16 MiB) let each hold about 16 MiB of
// decoded fields for as long as it stayed open (60 held 976 MiB); now each
// is reset, and the heap does not grow.
func TestHeaderListAttackHoldsNothing(t *testing.T) {
	_, addr := authServer(t)
	h := dialH2(t, addr, "")
	h.serverSettings()
	const streams, repeats = 8, 4300
	fields := []string{"authorization", bearerPreauth}
	value := strings.Repeat("A", 3800) // base64 that decodes
	for range repeats {
		fields = append(fields, "x-a-bin", value)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ids := make([]uint32, streams)
	for i := range ids {
		ids[i] = h.open(callPath, fields...)
	}
	for _, id := range ids {
		if e := h.ended(id); !e.rst || e.code != http2.ErrCodeFrameSize {
			t.Fatalf("stream %d: got %+v, want RST_STREAM FRAME_SIZE_ERROR", id, e)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("heap grew %d KiB over %d streams (16 MiB a stream before the bound)", grown>>10, streams)
	if grown > 16<<20 {
		t.Fatalf("the heap grew %d MiB while %d reset streams stayed open", grown>>20, streams)
	}
}

// A connection takes --max-streams-per-connection streaming RPCs at once,
// health checks among them; one more is RESOURCE_EXHAUSTED. Its HTTP/2
// SETTINGS_MAX_CONCURRENT_STREAMS is that and --unary-streams-per-connection:
// a stream past it is refused REFUSED_STREAM.
func TestStreamsPerConnection(t *testing.T) {
	t.Parallel()
	const streams, unary = 4, 2
	conn, addr := authServer(t, server.WithMaxStreamsPerConn(streams), server.WithUnaryStreamsPerConn(unary))
	t.Run("streaming RPCs, health's among them", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), preauthTimeout)
		defer cancel()
		health := healthpb.NewHealthClient(conn)
		c := exprdv1.NewExprToolClient(conn)
		for i := range streams { // at the limit: half health watches, half sessions
			if i%2 == 0 {
				w, err := health.Watch(ctx, &healthpb.HealthCheckRequest{})
				if err == nil {
					_, err = w.Recv()
				}
				if err != nil {
					t.Fatalf("watch %d at the limit: %v", i, err)
				}
				continue
			}
			st, err := c.Session(authed(ctx))
			if err == nil {
				err = st.Send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_Open{Open: &exprdv1.Open{}}})
			}
			if err == nil {
				_, err = st.Recv()
			}
			if err != nil {
				t.Fatalf("session %d at the limit: %v", i, err)
			}
		}
		w, err := health.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err == nil {
			_, err = w.Recv()
		}
		if st := status.Convert(err); st.Code() != codes.ResourceExhausted || quotaSubject(st) != "max_streams_per_connection" {
			t.Fatalf("a health watch one past the limit: got %v, want RESOURCE_EXHAUSTED max_streams_per_connection", err)
		}
	})
	t.Run("HTTP/2 streams", func(t *testing.T) {
		t.Parallel()
		h := dialH2(t, addr, "")
		if got := h.serverSettings()[http2.SettingMaxConcurrentStreams]; got != streams+unary {
			t.Fatalf("SETTINGS_MAX_CONCURRENT_STREAMS %d, want %d", got, streams+unary)
		}
		// Unary calls whose request does not come hold their stream.
		var open []uint32
		for range streams + unary {
			id := h.open(describePath, "authorization", bearerPreauth)
			h.send(id, grpcMessage(false, 10, nil), false)
			open = append(open, id)
		}
		id := h.open(describePath, "authorization", bearerPreauth)
		if e := h.ended(id); !e.rst || e.code != http2.ErrCodeRefusedStream {
			t.Fatalf("a stream one past the limit: got %+v, want RST_STREAM REFUSED_STREAM", e)
		}
		// The streams at the limit were held: their requests (an unknown
		// field of 8 bytes) come now, and each is answered.
		for _, id := range open {
			h.send(id, []byte("\x7a\x08aaaaaaaa"), true)
			if e := h.ended(id); e.rst || e.status != 0 {
				t.Fatalf("a stream at the limit, its request sent: got %+v, want OK", e)
			}
		}
	})
}

// Health and reflection need no token: a connection holds at most
// server.MaxInfraPerConn of their calls at once, and their requests are at
// most server.MaxInfraMsgSize (the receive gate, which a server with a
// memory budget has, resets a stream with a longer one).
func TestInfrastructureCallsPerConnection(t *testing.T) {
	t.Parallel()
	conn, addr := authServer(t, server.WithMemoryBudget(membudget.New(64<<20, 10*time.Millisecond)))
	t.Run("calls", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), preauthTimeout)
		defer cancel()
		health := healthpb.NewHealthClient(conn)
		for i := range server.MaxInfraPerConn {
			w, err := health.Watch(ctx, &healthpb.HealthCheckRequest{})
			if err == nil {
				_, err = w.Recv()
			}
			if err != nil {
				t.Fatalf("watch %d, at the limit: %v", i, err)
			}
		}
		_, err := health.Check(ctx, &healthpb.HealthCheckRequest{})
		if st := status.Convert(err); st.Code() != codes.ResourceExhausted || quotaSubject(st) != "max_infra_calls_per_connection" {
			t.Fatalf("a check one past the limit: got %v, want RESOURCE_EXHAUSTED max_infra_calls_per_connection", err)
		}
	})
	t.Run("request size", func(t *testing.T) {
		t.Parallel()
		for _, tt := range []struct {
			name string
			size int
			ok   bool
		}{
			{"at the limit", server.MaxInfraMsgSize, true},
			{"one past it", server.MaxInfraMsgSize + 1, false},
		} {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				req := &healthpb.HealthCheckRequest{Service: strings.Repeat("s", tt.size-3)}
				if n := proto.Size(req); n != tt.size {
					t.Fatalf("the request is %d bytes, want %d", n, tt.size)
				}
				b, _ := proto.Marshal(req)
				h := dialH2(t, addr, "")
				id := h.open(healthCheck)
				h.send(id, grpcMessage(false, uint32(len(b)), b), true)
				e := h.ended(id)
				switch {
				case tt.ok && (e.rst || e.status != int(codes.NotFound)):
					t.Fatalf("got %+v, want NOT_FOUND (no such service)", e)
				case !tt.ok && (!e.rst || e.code != http2.ErrCodeEnhanceYourCalm):
					t.Fatalf("got %+v, want RST_STREAM ENHANCE_YOUR_CALM", e)
				}
			})
		}
	})
}

// A peer without a token that sends a message's length prefix, claiming
// 16 MiB, is refused UNAUTHENTICATED at once, before grpc-go reads the
// message or the receive gate reserves for it; one whose token lacks the
// scope is PERMISSION_DENIED the same way; one with a token is reserved
// for (and waits for its message).
func TestUnauthenticatedPrefixNotReserved(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		token  string
		status codes.Code
	}{
		{"no token", "", codes.Unauthenticated},
		{"an unknown token", "Bearer tok-unknown-0123456789", codes.Unauthenticated},
		{"a token without the scope", "Bearer " + noScopeToken, codes.PermissionDenied},
		{"a token", bearerPreauth, codes.OK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			budget := membudget.New(256<<20, 10*time.Millisecond)
			_, addr := authServer(t, server.WithMemoryBudget(budget))
			kept := budget.InUse() // the overdraft
			h := dialH2(t, addr, "")
			var fields []string
			if tt.token != "" {
				fields = []string{"authorization", tt.token}
			}
			id := h.open(callPath, fields...)
			h.send(id, grpcMessage(false, 16<<20-10, make([]byte, 100)), false)
			if tt.status == codes.OK {
				want := kept + 2*(16<<20-10)
				for deadline := time.Now().Add(preauthTimeout); budget.InUse() != want; time.Sleep(time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("reserved %d, want the message's 2x (%d)", budget.InUse()-kept, want-kept)
					}
				}
				return
			}
			if e := h.ended(id); e.rst || e.status != int(tt.status) {
				t.Fatalf("got %+v, want %v before the message", e, tt.status)
			}
			if n := budget.InUse(); n != kept {
				t.Fatalf("%d bytes reserved for a refused stream", n-kept)
			}
		})
	}
}

// gzipped is a CallRequest with a state of n bytes, gzipped, and its size.
func gzipped(t *testing.T, n int) ([]byte, int) {
	t.Helper()
	b, err := proto.Marshal(&exprdv1.CallRequest{StateJson: `{"p": "` + strings.Repeat("x", n) + `"}`, InputJson: `{"steps": []}`})
	if err != nil {
		t.Fatal(err)
	}
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	_, _ = w.Write(b)
	_ = w.Close()
	return z.Bytes(), len(b)
}

// Compressed messages: by default a call with grpc-encoding gzip is
// refused UNIMPLEMENTED before its message is read, unary or stream;
// with WithCompressedMessages, it is served, and the gate reserves for a
// compressed message the most it may inflate to (twice
// --max-recv-msg-size), not twice its compressed length.
func TestCompressedMessages(t *testing.T) {
	t.Parallel()
	t.Run("refused by default", func(t *testing.T) {
		t.Parallel()
		budget := membudget.New(256<<20, 10*time.Millisecond)
		conn, addr := authServer(t, server.WithMemoryBudget(budget))
		kept := budget.InUse()
		c := exprdv1.NewExprToolClient(conn)
		ctx, cancel := context.WithTimeout(authed(context.Background()), preauthTimeout)
		defer cancel()
		_, err := c.Call(ctx, &exprdv1.CallRequest{StateJson: `{}`, InputJson: `{"steps": []}`}, grpc.UseCompressor("gzip"))
		if status.Code(err) != codes.Unimplemented {
			t.Fatalf("a gzipped Call: got %v, want UNIMPLEMENTED", err)
		}
		st, err := c.Session(ctx, grpc.UseCompressor("gzip"))
		if err == nil {
			_ = st.Send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_Open{Open: &exprdv1.Open{}}})
			_, err = st.Recv()
		}
		if status.Code(err) != codes.Unimplemented {
			t.Fatalf("a gzipped Session: got %v, want UNIMPLEMENTED", err)
		}
		// A 16 MiB state, 16 KB gzipped, whose bytes do not all come: the
		// refusal does not wait for them, and nothing is reserved.
		z, _ := gzipped(t, 16<<20-200)
		h := dialH2(t, addr, "")
		id := h.open(callPath, "authorization", bearerPreauth, "grpc-encoding", "gzip")
		h.send(id, grpcMessage(true, uint32(len(z)), z[:len(z)/2]), false)
		if e := h.ended(id); e.rst || e.status != int(codes.Unimplemented) {
			t.Fatalf("got %+v, want UNIMPLEMENTED before the message", e)
		}
		if n := budget.InUse(); n != kept {
			t.Fatalf("%d bytes reserved", n-kept)
		}
	})
	t.Run("taken when enabled, at their inflated bound", func(t *testing.T) {
		t.Parallel()
		const maxRecv = 1 << 20
		budget := membudget.New(64<<20, 10*time.Millisecond)
		started, release := make(chan struct{}), make(chan struct{})
		wait := evaluator.Function{Name: "wait", Impl: func(context.Context, map[string]any) (any, error) {
			close(started)
			<-release
			return 1, nil
		}}
		conn, _ := authServer(t, server.WithMemoryBudget(budget), server.WithCompressedMessages(),
			server.WithMaxRecvMsgSize(maxRecv), server.WithFunctions(wait))
		kept := budget.InUse()
		c := exprdv1.NewExprToolClient(conn)
		ctx, cancel := context.WithTimeout(authed(context.Background()), preauthTimeout)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := c.Call(ctx, &exprdv1.CallRequest{
				Settings:  &exprdv1.Settings{Functions: []*exprdv1.Function{{Name: "wait", Runner: exprdv1.Function_RUNNER_SERVER}}},
				StateJson: `{"p": "` + strings.Repeat("x", 1000) + `"}`, InputJson: `{"steps": [{"expr": "wait({})"}]}`,
			}, grpc.UseCompressor("gzip"))
			done <- err
		}()
		select {
		case <-started:
		case err := <-done:
			t.Fatalf("the call ended before its function ran: %v", err)
		}
		// The handler works on the message: the gate holds its reservation.
		if n := budget.InUse() - kept; n < 2*maxRecv {
			t.Errorf("%d bytes reserved for a 100-byte gzipped message, want at least its inflated bound's 2x (%d)", n, 2*maxRecv)
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// Connections from one peer: --max-connections-per-peer at once, one more
// is closed at once; another peer is not counted with it, nor is a trusted
// proxy. And --max-connections in all.
func TestConnectionsPerPeer(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		opts    []server.Option
		locals  []string // the connections at the limit, then the one past it
		refused bool
	}{
		{"per peer", []server.Option{server.WithMaxConns(2, 100)}, []string{"127.0.0.1", "127.0.0.1", "127.0.0.1"}, true},
		{"per peer, another peer", []server.Option{server.WithMaxConns(2, 100)}, []string{"127.0.0.1", "127.0.0.1", "127.0.0.2"}, false},
		{"per peer, a trusted proxy", []server.Option{server.WithMaxConns(2, 100), server.WithTrustedProxies(mustPrefix(t, "127.0.0.1/32"))},
			[]string{"127.0.0.1", "127.0.0.1", "127.0.0.1"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, addr := authServer(t, tt.opts...)
			locals := tt.locals // the test's client connection has not connected
			for _, local := range locals[:len(locals)-1] {
				dialH2(t, addr, local).serverSettings()
			}
			past := dialH2(t, addr, locals[len(locals)-1])
			if got := past.refused(); got != tt.refused {
				t.Fatalf("the last connection refused: %v, want %v", got, tt.refused)
			}
		})
	}
}

// At --max-connections in all, a new connection takes the place of the
// oldest that has carried no admitted call (idle, or only refused calls
// without a token), which the server closes, so that peers without a
// token cannot keep a caller with one out; when every open connection has
// carried an admitted call, the new one is refused.
func TestConnectionsInAll(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		token   string // what the three open connections' one call carries
		refused bool
	}{
		{"idle connections make way", "-", false},
		{"connections whose calls had no token make way", "", false},
		{"connections that carried a call with a token are kept", bearerPreauth, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, addr := authServer(t, server.WithMaxConns(100, 3))
			var open []*h2
			for _, local := range []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"} {
				h := dialH2(t, addr, local)
				h.serverSettings()
				if tt.token != "-" {
					var fields []string
					if tt.token != "" {
						fields = []string{"authorization", tt.token}
					}
					id := h.open(describePath, fields...)
					h.send(id, grpcMessage(false, 0, nil), true)
					h.ended(id)
				}
				open = append(open, h)
			}
			past := dialH2(t, addr, "127.0.0.4")
			if got := past.refused(); got != tt.refused {
				t.Fatalf("the fourth connection refused: %v, want %v", got, tt.refused)
			}
			if tt.refused {
				return
			}
			select {
			case <-open[0].closed:
			case <-time.After(preauthTimeout):
				t.Fatal("the oldest connection was not closed for the fourth")
			}
			id := past.open(describePath, "authorization", bearerPreauth)
			past.send(id, grpcMessage(false, 0, nil), true)
			if e := past.ended(id); e.rst || e.status != 0 {
				t.Fatalf("a call on the fourth connection: %+v, want OK", e)
			}
		})
	}
}

// A message longer than a stream's window whose room was reserved must
// arrive within --recv-msg-timeout: one that does is served; one whose
// client stops sending has its stream reset (ENHANCE_YOUR_CALM) and its
// room given back, and the connection goes on.
func TestRecvMsgTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 500 * time.Millisecond
	for _, tt := range []struct {
		name    string
		arrives bool
	}{
		{"arrives in time", true},
		{"stops after a window", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			budget := membudget.New(256<<20, 10*time.Millisecond)
			conn, addr := authServer(t, server.WithMemoryBudget(budget), server.WithRecvMsgTimeout(timeout))
			kept := budget.InUse()
			if tt.arrives {
				ctx, cancel := context.WithTimeout(authed(context.Background()), preauthTimeout)
				defer cancel()
				big := `{"p": "` + strings.Repeat("x", 3<<20) + `"}`
				if _, err := exprdv1.NewExprToolClient(conn).Call(ctx, &exprdv1.CallRequest{StateJson: big, InputJson: `{"steps": []}`}); err != nil {
					t.Fatal(err)
				}
				return
			}
			h := dialH2(t, addr, "")
			id := h.open(callPath, "authorization", bearerPreauth)
			h.send(id, grpcMessage(false, 4<<20, make([]byte, server.DefaultInitialWindowSize-5)), false)
			if e := h.ended(id); !e.rst || e.code != http2.ErrCodeEnhanceYourCalm {
				t.Fatalf("got %+v, want RST_STREAM ENHANCE_YOUR_CALM", e)
			}
			for deadline := time.Now().Add(preauthTimeout); budget.InUse() != kept; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%d bytes still reserved after the reset", budget.InUse()-kept)
				}
			}
			next := h.open(describePath, "authorization", bearerPreauth)
			h.send(next, grpcMessage(false, 0, nil), true)
			if e := h.ended(next); e.rst || e.status != 0 {
				t.Fatalf("the connection's next call: got %+v, want OK", e)
			}
		})
	}
}

// A legitimate caller is answered while another client squats: it sends
// length prefixes claiming 16 MiB on many streams, from two addresses, and
// nothing more. Without a token it is refused and holds nothing; with one,
// what it holds is at most its token's share of the budget, over both its
// addresses (the rest of its messages wait for its own), so that a 3 MB
// state and a 200 KB one from another token are served at once.
func TestLegitimateCallerWhileSquatting(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		token string
	}{
		{"a squatter without a token", ""},
		{"a squatter with a token", "Bearer " + squatterToken},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			budget := membudget.New(128<<20, 50*time.Millisecond)
			_, addr := authServer(t, server.WithMemoryBudget(budget))
			kept := budget.InUse()
			var fields []string
			if tt.token != "" {
				fields = []string{"authorization", tt.token}
			}
			const streams = 16
			for _, from := range []string{"127.0.0.2", "127.0.0.4"} {
				squatter := dialH2(t, addr, from)
				for range streams / 2 {
					id := squatter.open(callPath, fields...)
					squatter.send(id, grpcMessage(false, 16<<20-10, make([]byte, 1000)), false)
				}
			}
			// The squatter holds at most its share, at least one largest
			// message, over both its addresses.
			share := max(int64(server.DefaultRecvPeerShare*float64(budget.Limit())), 2*server.DefaultMaxRecvMsgSize)
			want := int64(0)
			if tt.token != "" {
				want = 2 * (16<<20 - 10)
			}
			for deadline := time.Now().Add(preauthTimeout); budget.InUse()-kept != want; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the squatter holds %d, want %d (its share %d)", budget.InUse()-kept, want, share)
				}
			}
			time.Sleep(100 * time.Millisecond)
			if got := budget.InUse() - kept; got != want {
				t.Fatalf("the squatter holds %d, want %d: its share is its token's, over its addresses", got, want)
			}
			cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecureCreds()), grpc.WithContextDialer(dialFrom("127.0.0.3")))
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			c := exprdv1.NewExprToolClient(cc)
			var wg sync.WaitGroup
			for _, size := range []int{3 << 20, 200 << 10} {
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(authed(context.Background()), 5*time.Second)
					defer cancel()
					state := `{"p": "` + strings.Repeat("x", size) + `"}`
					if _, err := c.Call(ctx, &exprdv1.CallRequest{StateJson: state, InputJson: `{"steps": []}`}); err != nil {
						t.Errorf("a %d-byte state while the squatter waits: %v", size, err)
					}
				})
			}
			wg.Wait()
		})
	}
}

// A caller's rate is taken before its stream is admitted: at its burst a
// unary call waits for its request; one past it is refused RESOURCE_EXHAUSTED
// (rate_limit) at once, its request not come, and no handler started
// for it. Opening and resetting streams at once thus costs a caller with a
// token a HEADERS frame each past its burst, as it costs one without.
func TestRateLimitBeforeTheRequest(t *testing.T) {
	t.Parallel()
	const burst = 3
	_, addr := authServer(t, server.WithRateLimit(0.001, burst))
	h := dialH2(t, addr, "")
	var waiting []uint32
	for range burst { // at the burst: each waits for its request
		waiting = append(waiting, h.open(describePath, "authorization", bearerPreauth))
	}
	id := h.open(describePath, "authorization", bearerPreauth)
	if e := h.ended(id); e.rst || e.status != int(codes.ResourceExhausted) {
		t.Fatalf("a call one past the burst: got %+v, want RESOURCE_EXHAUSTED before its request", e)
	}
	for {
		select {
		case e := <-h.ends:
			if e.stream != id { // the refused stream's RST_STREAM follows its trailers
				t.Fatalf("a call within the burst ended: %+v", e)
			}
			continue
		default:
		}
		break
	}
	for _, w := range waiting {
		h.send(w, grpcMessage(false, 0, nil), true)
		if e := h.ended(w); e.rst || e.status != 0 {
			t.Fatalf("a call within the burst, its request sent: got %+v, want OK", e)
		}
	}
}

// Calls refused for their token are charged to their client's bucket, as
// calls without one are: within the burst each is refused
// UNAUTHENTICATED on a connection that stays open; one past it is
// RESOURCE_EXHAUSTED and its connection, which carried no admitted call,
// is closed, so that refusals cannot keep coming on it. A caller with a
// token is served meanwhile.
func TestRefusedCallsChargedToTheirClient(t *testing.T) {
	t.Parallel()
	const burst = 3
	conn, addr := authServer(t, server.WithRateLimit(0.001, burst))
	h := dialH2(t, addr, "127.0.0.9")
	const wrong = "Bearer not-the-token-of-anyone-at-all"
	for i := range burst {
		id := h.open(describePath, "authorization", wrong)
		if e := h.ended(id); e.status != int(codes.Unauthenticated) {
			t.Fatalf("refused call %d of the burst: got %+v, want UNAUTHENTICATED", i+1, e)
		}
	}
	select {
	case <-h.closed:
		t.Fatal("the connection closed within the burst")
	default:
	}
	h.open(describePath, "authorization", wrong)
	select {
	case <-h.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("one past the burst: the connection is still open")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := exprdv1.NewExprToolClient(conn).Describe(authed(ctx), &exprdv1.DescribeRequest{}); err != nil {
		t.Fatalf("a caller with a token: %v", err)
	}
}

// The requests of the methods that carry only names, a query and a page
// token are at most server.MaxSmallRequestSize: a search query at the
// limit is read and refused by its handler (INVALID_ARGUMENT, past 4,096
// bytes); one past it is reset before it is read (RESOURCE_EXHAUSTED),
// through a gRPC client.
func TestSmallRequestSize(t *testing.T) {
	t.Parallel()
	registry, err := utcpall.New(loopbackEgress)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { registry.Close() })
	conn, _ := authServer(t, server.WithMemoryBudget(membudget.New(64<<20, 10*time.Millisecond)), server.WithRegistry(registry))
	reg := exprdv1.NewToolRegistryClient(conn)
	for _, tt := range []struct {
		name string
		size int
		want codes.Code
	}{
		{"at the limit", server.MaxSmallRequestSize, codes.InvalidArgument},
		{"one past it", server.MaxSmallRequestSize + 1, codes.ResourceExhausted},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := &exprdv1.SearchToolsRequest{Query: strings.Repeat("q ", tt.size/2)}
			for n := proto.Size(req); n != tt.size; n = proto.Size(req) {
				req.Query = req.Query[:len(req.Query)-(n-tt.size)]
			}
			ctx, cancel := context.WithTimeout(authed(context.Background()), preauthTimeout)
			defer cancel()
			_, err := reg.SearchTools(ctx, req)
			if got := status.Code(err); got != tt.want {
				t.Fatalf("a %d-byte request: got %v, want %v", tt.size, err, tt.want)
			}
		})
	}
	// The server goes on: a small search is answered.
	ctx, cancel := context.WithTimeout(authed(context.Background()), preauthTimeout)
	defer cancel()
	if _, err := reg.SearchTools(ctx, &exprdv1.SearchToolsRequest{Query: "weather"}); err != nil {
		t.Fatalf("a small search after: %v", err)
	}
}
