package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
)

// Each load dials from its own loopback address, so that exprd's rate
// limiter (keyed by the client's address) sees each load, and the steady
// client, as a caller of its own: Linux routes all of 127/8 to lo.
var steadySource = netip.MustParseAddr("127.0.0.2")

// caseSource is the address the clients of case n dial from: 127.0.n.1.
func caseSource(n int) netip.Addr { return netip.AddrFrom4([4]byte{127, 0, byte(n), 1}) }

// callerSource is the i-th distinct caller of case 5: 127.1.0.0 onwards,
// 2^24 - 2^16 of them before 127/8 runs out.
func callerSource(i int) netip.Addr {
	v := 1<<16 + i
	return netip.AddrFrom4([4]byte{127, byte(v >> 16), byte(v >> 8), byte(v)})
}

// dialFrom opens a client connection to addr whose TCP connections start
// from src.
func dialFrom(addr string, src netip.Addr, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0)), Timeout: 10 * time.Second}
	base := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", a)
		}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)),
	}
	return grpc.NewClient("passthrough:///"+addr, append(base, opts...)...)
}

// pool is n connections from one source that streams take in turn, so
// that no connection carries more than exprd's streams per connection.
type pool []*grpc.ClientConn

func dialPool(addr string, src netip.Addr, n int, opts ...grpc.DialOption) (pool, error) {
	var p pool
	for range max(n, 1) {
		c, err := dialFrom(addr, src, opts...)
		if err != nil {
			p.Close()
			return nil, err
		}
		p = append(p, c)
	}
	return p, nil
}

func (p pool) get(i int) *grpc.ClientConn { return p[i%len(p)] }

func (p pool) Close() {
	for _, c := range p {
		c.Close()
	}
}

// session is a client's Session stream whose every wait for an answer is
// bounded: past the deadline the stream is cancelled and the wait reported
// as having no answer.
type session struct {
	stream   grpc.BidiStreamingClient[exprdv1.SessionRequest, exprdv1.SessionResponse]
	cancel   context.CancelFunc
	deadline time.Duration
	expired  atomic.Bool
}

// openSession opens a stream and sends Open; it does not wait for Opened.
func openSession(conn *grpc.ClientConn, deadline time.Duration, open *exprdv1.Open) (*session, error) {
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := exprdv1.NewExprToolClient(conn).Session(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	s := &session{stream: stream, cancel: cancel, deadline: deadline}
	if err := s.send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_Open{Open: open}}); err != nil {
		cancel()
		return nil, err
	}
	return s, nil
}

// send sends m, bounded by the deadline too: a send blocks while exprd
// does not read.
func (s *session) send(m *exprdv1.SessionRequest) error {
	t := time.AfterFunc(s.deadline, func() { s.expired.Store(true); s.cancel() })
	defer t.Stop()
	err := s.stream.Send(m)
	if errors.Is(err, io.EOF) {
		// grpc-go: the server ended the stream, and its status is what
		// Recv returns after the messages still to read (io.EOF only
		// when it ended well).
		for {
			if _, rerr := s.stream.Recv(); rerr != nil {
				return rerr
			}
		}
	}
	return err
}

// recv waits for the next message, at most the deadline.
func (s *session) recv() (*exprdv1.SessionResponse, error) {
	t := time.AfterFunc(s.deadline, func() { s.expired.Store(true); s.cancel() })
	defer t.Stop()
	return s.stream.Recv()
}

// close half-closes and reads what is left, then cancels.
func (s *session) close() {
	defer s.cancel()
	if s.stream.CloseSend() != nil {
		return
	}
	for {
		if _, err := s.recv(); err != nil {
			return
		}
	}
}

// record counts a stream error: no answer when our deadline cancelled it,
// else by its status.
func (s *session) record(t *tally, what string, err error, d time.Duration) {
	if s.expired.Load() {
		t.noAnswer(what)
		return
	}
	t.rpcError(err, nil, false, d)
}
