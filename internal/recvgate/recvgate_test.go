package recvgate

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/exprd/exprd/internal/testkit/testcert"
	"github.com/exprd/exprd/membudget"
)

const (
	window = 64 << 10
	maxMsg = 1 << 20
)

// testServer counts the messages and bytes its handlers are given.
type testServer struct {
	testgrpc.UnimplementedTestServiceServer
	messages atomic.Int64
	bytes    atomic.Int64
	working  chan struct{} // when not nil, FullDuplexCall waits for it after each message
}

func (t *testServer) UnaryCall(_ context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	t.messages.Add(1)
	t.bytes.Add(int64(len(req.GetPayload().GetBody())))
	return &testgrpc.SimpleResponse{}, nil
}

func (t *testServer) FullDuplexCall(stream testgrpc.TestService_FullDuplexCallServer) error {
	for {
		req, err := stream.Recv()
		if err != nil {
			return nil
		}
		t.messages.Add(1)
		t.bytes.Add(int64(len(req.GetPayload().GetBody())))
		if t.working != nil {
			<-t.working
		}
		if err := stream.Send(&testgrpc.StreamingOutputCallResponse{}); err != nil {
			return err
		}
	}
}

// countingListener counts the bytes its connections read.
type countingListener struct {
	net.Listener
	read atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, read: &l.read}, nil
}

type countingConn struct {
	net.Conn
	read *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

type served struct {
	client testgrpc.TestServiceClient
	srv    *testServer
	lis    *countingListener
}

// serve starts a server on loopback whose connections g admits (plain,
// or TLS when tlsOn), with opts, and a client of it.
func serve(t *testing.T, g *Gate, tlsOn bool, opts ...grpc.ServerOption) served {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis := &countingListener{Listener: l}
	if !g.admission { // with it, the test's tap admits (admitTap)
		opts = append(opts, grpc.InTapHandle(g.Tap))
	}
	opts = append(opts, grpc.StatsHandler(g.StatsHandler()), grpc.StreamInterceptor(g.StreamInterceptor()), grpc.MaxRecvMsgSize(2*maxMsg),
		grpc.InitialWindowSize(window), grpc.InitialConnWindowSize(16<<20))
	clientCreds := insecure.NewCredentials()
	var serveOn net.Listener = g.Listener(lis)
	if tlsOn {
		cert, pool := testcert.SelfSigned(t, "localhost")
		opts = append(opts, grpc.Creds(g.Credentials(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}}))))
		clientCreds = credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "localhost"})
		serveOn = lis
	}
	s := grpc.NewServer(opts...)
	srv := &testServer{}
	testgrpc.RegisterTestServiceServer(s, srv)
	go func() { _ = s.Serve(serveOn) }()
	t.Cleanup(s.Stop)
	cc, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(clientCreds),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(4*maxMsg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return served{client: testgrpc.NewTestServiceClient(cc), srv: srv, lis: lis}
}

func payload(n int) *testgrpc.Payload { return &testgrpc.Payload{Body: make([]byte, n)} }

// spend reserves all of the gate's budget and overdraft, until the
// returned func gives them back.
func spend(t *testing.T, g *Gate) func() {
	t.Helper()
	a, err := g.budget.Reserve(t.Context(), "test", g.budget.Limit()-g.budget.Limit()/16)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.overdraft.Acquire(t.Context(), g.overdraftLimit); err != nil {
		t.Fatal(err)
	}
	return func() { a.Release(); g.overdraft.Release(g.overdraftLimit) }
}

// held is what messages still being received or not yet decoded hold in
// the budget and in the overdraft.
func held(g *Gate) (budget, overdraft int64) {
	g.conns.Range(func(_, v any) bool {
		c := v.(*conn)
		c.mu.Lock()
		for _, s := range c.streams {
			for _, m := range s.msgs {
				budget += m.res.Size()
				overdraft += m.over
			}
		}
		c.mu.Unlock()
		return true
	})
	return budget, overdraft
}

// tracked is the streams the gate follows on its connections.
func tracked(g *Gate) int {
	n := 0
	g.conns.Range(func(_, v any) bool {
		c := v.(*conn)
		c.mu.Lock()
		n += len(c.streams)
		c.mu.Unlock()
		return true
	})
	return n
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
	}
}

// A message larger than the window gets no more than the window of its
// bytes through while the budget and the overdraft are spent, and all of
// them once there is room; what it held is released when it is decoded.
func TestMessageWaitsForRoom(t *testing.T) {
	for _, tlsOn := range []bool{false, true} {
		name := map[bool]string{false: "plaintext", true: "tls"}[tlsOn]
		t.Run(name, func(t *testing.T) {
			budget := membudget.New(8*maxMsg, 20*time.Millisecond)
			g := New(budget, window, 2*maxMsg)
			s := serve(t, g, tlsOn)
			if _, err := s.client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); err != nil {
				t.Fatal(err) // the connection is up: what it read so far is not the message
			}
			before := s.lis.read.Load()
			giveBack := spend(t, g)
			done := make(chan error, 1)
			go func() {
				_, err := s.client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{Payload: payload(maxMsg)})
				done <- err
			}()
			time.Sleep(300 * time.Millisecond)
			if got := s.srv.messages.Load(); got != 1 {
				t.Fatalf("the handler got the large message while the budget was spent (%d messages)", got)
			}
			// TLS adds records' overhead; the message is 16 windows long.
			if read := s.lis.read.Load() - before; read > 2*window {
				t.Fatalf("read %d bytes of a %d-byte message while the budget was spent: want at most about the window, %d", read, maxMsg, window)
			}
			giveBack()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if b, o := held(g); b != 0 || o != 0 {
				t.Fatalf("held after the message was decoded: %d in the budget, %d in the overdraft", b, o)
			}
			eventually(t, "the budget back to empty", func() bool { return budget.InUse() == 0 })
		})
	}
}

// A message refused before it is decoded (here by an interceptor) is
// released when its stream ends.
func TestRefusedMessageReleasedAtStreamEnd(t *testing.T) {
	budget := membudget.New(8*maxMsg, 20*time.Millisecond)
	g := New(budget, window, 2*maxMsg)
	refuse := func(context.Context, any, *grpc.UnaryServerInfo, grpc.UnaryHandler) (any, error) {
		return nil, status.Error(codes.PermissionDenied, "no")
	}
	s := serve(t, g, false, grpc.UnaryInterceptor(refuse))
	for range 3 {
		_, err := s.client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{Payload: payload(maxMsg)})
		if status.Code(err) != codes.PermissionDenied {
			t.Fatalf("got %v, want PermissionDenied", err)
		}
	}
	eventually(t, "the budget back to empty", func() bool { return budget.InUse() == 0 })
	eventually(t, "no stream followed", func() bool { return tracked(g) == 0 })
}

// A client that gives up while its message waits ends the wait: nothing
// is reserved for it later, and the gate forgets the stream.
func TestClientGivesUpWhileWaiting(t *testing.T) {
	budget := membudget.New(8*maxMsg, 20*time.Millisecond)
	g := New(budget, window, 2*maxMsg)
	s := serve(t, g, false)
	giveBack := spend(t, g)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err := s.client.UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: payload(maxMsg)})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("got %v, want DeadlineExceeded", err)
	}
	eventually(t, "no stream followed", func() bool { return tracked(g) == 0 })
	giveBack()
	time.Sleep(50 * time.Millisecond)
	if n := budget.InUse(); n != 0 {
		t.Fatalf("%d bytes reserved for a call its client gave up", n)
	}
	if got := s.srv.messages.Load(); got != 0 {
		t.Fatalf("the handler got %d messages", got)
	}
}

// Many streams on one connection sending large messages at once all get
// through, while the bytes received and not yet decoded stay within what
// the budget and the overdraft admit plus a window a stream; without the
// gate, every stream's whole message would be in flight at once.
func TestInterleavedStreamsBounded(t *testing.T) {
	const streams, each = 32, 3
	budget := membudget.New(4*maxMsg, 20*time.Millisecond)
	g := New(budget, window, 2*maxMsg)
	s := serve(t, g, false)
	var peak atomic.Int64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			if inFlight := s.lis.read.Load() - s.srv.bytes.Load(); inFlight > peak.Load() {
				peak.Store(inFlight)
			}
		}
	})
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for range streams {
		wg.Go(func() {
			st, err := s.client.FullDuplexCall(t.Context())
			if err != nil {
				errs <- err
				return
			}
			for range each {
				if err := st.Send(&testgrpc.StreamingOutputCallRequest{Payload: payload(maxMsg)}); err != nil {
					errs <- err
					return
				}
				if _, err := st.Recv(); err != nil {
					errs <- err
					return
				}
			}
			errs <- st.CloseSend()
		})
	}
	wg.Wait()
	close(stop)
	sampler.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := s.srv.messages.Load(); got != streams*each {
		t.Fatalf("%d messages decoded, want %d", got, streams*each)
	}
	// What the gate admits at once: the budget and the overdraft, at
	// twice a message's length each; plus a window a stream; plus framing.
	admitted := (budget.Limit() + g.Overdraft()) / 2
	bound := admitted + streams*window + 1<<20
	t.Logf("peak bytes received and not decoded: %d; bound %d; every message at once: %d", peak.Load(), bound, streams*maxMsg)
	if p := peak.Load(); p > bound {
		t.Fatalf("peak %d bytes received and not decoded, over %d", p, bound)
	}
	eventually(t, "the budget back to empty", func() bool { return budget.InUse() == 0 })
}

// A large message holds its reservation while its handler works on it,
// after grpc-go has decoded it, until the handler asks for the next one.
func TestHeldWhileHandlerWorks(t *testing.T) {
	budget := membudget.New(16*maxMsg, 20*time.Millisecond)
	g := New(budget, window, 2*maxMsg)
	kept := budget.InUse() // the overdraft
	s := serve(t, g, false)
	s.srv.working = make(chan struct{})
	st, err := s.client.FullDuplexCall(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&testgrpc.StreamingOutputCallRequest{Payload: payload(maxMsg)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the handler has the message", func() bool { return s.srv.messages.Load() == 1 })
	time.Sleep(50 * time.Millisecond)
	if n := budget.InUse() - kept; n < 2*maxMsg {
		t.Fatalf("%d bytes reserved while the handler works on a %d-byte message, want twice it", n, maxMsg)
	}
	close(s.srv.working)
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the reservation given back when the handler reads on", func() bool { return budget.InUse() == kept })
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
}

// The overdraft is a quarter of the budget, kept from it, when a quarter
// holds two largest messages; else it is that, on top of the budget.
func TestOverdraftWithinBudget(t *testing.T) {
	for _, tt := range []struct {
		name         string
		budget       int64
		maxMsg       int
		overdraft    int64
		keptInBudget bool
	}{
		{"a quarter of a large budget, kept from it", 64 << 20, 1 << 20, 16 << 20, true},
		{"a quarter that holds exactly two largest messages, kept", 8 << 20, 1 << 20, 2 << 20, true},
		{"a quarter a byte short of them: them, on top", 8<<20 - 4, 1 << 20, 2 << 20, false},
		{"two largest messages on top of a small budget", 4 << 20, 1 << 20, 2 << 20, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			budget := membudget.New(tt.budget, time.Millisecond)
			g := New(budget, window, tt.maxMsg)
			if g.Overdraft() != tt.overdraft {
				t.Errorf("overdraft %d, want %d", g.Overdraft(), tt.overdraft)
			}
			if kept := budget.InUse() == tt.overdraft; kept != tt.keptInBudget {
				t.Errorf("budget in use %d: the overdraft kept in it is %v, want %v", budget.InUse(), kept, tt.keptInBudget)
			}
		})
	}
}

// A connection follows at most maxTrackedSIDs streams: one more is not
// followed (its messages are not gated), and one that ends makes room.
func TestTrackedStreamsBound(t *testing.T) {
	c, _ := testConn(window)
	for id := uint32(1); id < 2*maxTrackedSIDs; id += 2 {
		c.opened(id)
	}
	if n := len(c.streams); n != maxTrackedSIDs {
		t.Fatalf("%d streams followed, want %d", n, maxTrackedSIDs)
	}
	past := uint32(2*maxTrackedSIDs + 1)
	c.opened(past)
	if c.streams[past] != nil {
		t.Fatal("a stream past the bound is followed")
	}
	c.ended(1)
	c.opened(past)
	if c.streams[past] == nil {
		t.Fatal("a stream that ended left no room")
	}
}
