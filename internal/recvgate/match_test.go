package recvgate

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/protobuf/proto"

	"github.com/exprd/exprd/membudget"
)

// arrivedHeld is the messages that arrived whole and are not decoded yet
// whose room the gate holds, over its connections.
func arrivedHeld(g *Gate) int {
	n := 0
	g.conns.Range(func(_, v any) bool {
		c := v.(*conn)
		c.mu.Lock()
		for _, s := range c.streams {
			for _, m := range s.msgs {
				if m.complete && (m.res != nil || m.over > 0) {
					n++
				}
			}
		}
		c.mu.Unlock()
		return true
	})
	return n
}

// The gate's window for these tests: a message of matchSize is gated, yet
// fits in grpc-go's window, so that it arrives whole while its handler
// has not asked for it.
const (
	matchWindow = 4 << 10
	matchSize   = window / 2
)

// holdSecond opens a FullDuplexCall on client, in ctx, and sends it two messages
// of matchSize: the handler takes the first and waits (srv.working), the
// second arrives whole and waits for it, undecoded. before is the
// messages the server's handlers were given before.
func holdSecond(t *testing.T, ctx context.Context, client testgrpc.TestServiceClient, srv *testServer, before int64) testgrpc.TestService_FullDuplexCallClient {
	t.Helper()
	st, err := client.FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	req := &testgrpc.StreamingOutputCallRequest{Payload: payload(matchSize)}
	if err := st.Send(req); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the handler has the first message", func() bool { return srv.messages.Load() == before+1 })
	if err := st.Send(req); err != nil {
		t.Fatal(err)
	}
	return st
}

// finish lets the held handlers go on and ends their streams; the budget
// is then back to kept.
func finish(t *testing.T, srv *testServer, budget *membudget.Budget, kept int64, streams []testgrpc.TestService_FullDuplexCallClient) {
	t.Helper()
	close(srv.working)
	for _, st := range streams {
		for range 2 {
			if _, err := st.Recv(); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.CloseSend(); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the budget back to what it was", func() bool { return budget.InUse() == kept })
}

// Streams of one connection whose messages have the same length: a
// decoded message releases its own stream's room and no other's. Held
// streams' second messages have arrived whole, undecoded, while unary
// calls' messages of the same length are decoded on the same connection;
// the held ones keep their room until their handlers take them.
func TestDecodedMatchedByStream(t *testing.T) {
	unary := &testgrpc.SimpleRequest{Payload: payload(matchSize)}
	if a, b := proto.Size(unary), proto.Size(&testgrpc.StreamingOutputCallRequest{Payload: payload(matchSize)}); a != b {
		t.Fatalf("the unary and streaming messages are %d and %d bytes: not the same length", a, b)
	}
	budget := membudget.New(64*maxMsg, 20*time.Millisecond)
	g := New(budget, matchWindow, 2*maxMsg)
	kept := budget.InUse() // the overdraft
	s := serve(t, g, false)
	s.srv.working = make(chan struct{})
	const heldStreams = 4
	var streams []testgrpc.TestService_FullDuplexCallClient
	for i := range heldStreams {
		streams = append(streams, holdSecond(t, t.Context(), s.client, s.srv, int64(i)))
	}
	eventually(t, "the second messages arrived, their room reserved", func() bool { return arrivedHeld(g) == heldStreams })
	for i := range 4 {
		if _, err := s.client.UnaryCall(t.Context(), unary); err != nil {
			t.Fatal(err)
		}
		if n := arrivedHeld(g); n != heldStreams {
			t.Fatalf("after unary call %d, %d undecoded messages hold their room, want %d: a decoded message released another stream's", i+1, n, heldStreams)
		}
	}
	finish(t, s.srv, budget, kept, streams)
}

// sameAddrs gives every connection it accepts the same local and remote
// addresses, as a proxy's or a NAT's connections may look.
type sameAddrs struct{ net.Listener }

type sameAddrConn struct{ net.Conn }

var (
	sameLocal  = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}
	sameRemote = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 2}
)

func (l sameAddrs) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return sameAddrConn{c}, nil
}

func (sameAddrConn) LocalAddr() net.Addr  { return sameLocal }
func (sameAddrConn) RemoteAddr() net.Addr { return sameRemote }

// Two connections with the same addresses are each their own to the
// gate: with admission, each one's streams are admitted and their
// messages hold room, and none is taken for the other's.
func TestSameAddressesApart(t *testing.T) {
	budget := membudget.New(64*maxMsg, 20*time.Millisecond)
	g := New(budget, matchWindow, 2*maxMsg, WithAdmission())
	kept := budget.InUse()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &testServer{working: make(chan struct{})}
	s := grpc.NewServer(admitTap(g), grpc.StatsHandler(g.StatsHandler()), grpc.StreamInterceptor(g.StreamInterceptor()),
		grpc.InitialWindowSize(window), grpc.InitialConnWindowSize(16<<20))
	testgrpc.RegisterTestServiceServer(s, srv)
	go func() { _ = s.Serve(g.Listener(sameAddrs{l})) }()
	t.Cleanup(s.Stop)
	var streams []testgrpc.TestService_FullDuplexCallClient
	for i := range 2 {
		cc, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		streams = append(streams, holdSecond(t, admitCtx(t, "0"), testgrpc.NewTestServiceClient(cc), srv, int64(i)))
	}
	eventually(t, "both connections' second messages arrived, their room reserved", func() bool { return arrivedHeld(g) == 2 })
	if n := g.unmatched.Load(); n != 0 {
		t.Fatalf("%d admissions found no stream on their connection", n)
	}
	finish(t, srv, budget, kept, streams)
}
