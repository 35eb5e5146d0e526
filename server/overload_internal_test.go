package server

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exprd/exprd/internal/overload"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// endOr ends a shed stream as soon as no send is in flight; while one is,
// the handler's own end wins if it comes first; a send that starts after
// the end fails and is not sent.
func TestTrackedStreamEndOr(t *testing.T) {
	handlerErr := errors.New("the handler's own end")
	for _, tt := range []struct {
		name    string
		sending time.Duration // how long a send is in flight when the shed comes; 0: none, -1: for good
		handler bool          // the handler ends while the send is in flight
		wantEnd bool
	}{
		{"no send in flight", 0, false, true},
		{"a send that finishes", 3 * endRetry, false, true},
		{"a send for good, the handler ends", -1, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ts := &trackedStream{ctx: context.Background()}
			ended := make(chan error, 1)
			release := make(chan struct{})
			if tt.sending != 0 {
				ts.mu.Lock()
				go func() {
					if tt.sending > 0 {
						time.Sleep(tt.sending)
					} else {
						<-release
					}
					ts.mu.Unlock()
				}()
			}
			if tt.handler {
				go func() { time.Sleep(3 * endRetry); ended <- handlerErr }()
			}
			ok, err := ts.endOr(ended)
			close(release)
			if ok != tt.wantEnd || (!ok && err != handlerErr) {
				t.Fatalf("endOr: %v, %v; want ended %v", ok, err, tt.wantEnd)
			}
			if ok {
				sent := false
				if err := ts.sending(func() error { sent = true; return nil }); err == nil || sent {
					t.Errorf("a send after the end: sent %v, error %v; want refused", sent, err)
				}
			}
		})
	}
}

// blockingStream is a server stream whose sends block until release
// closes: a client that reads nothing.
type blockingStream struct {
	grpc.ServerStream
	ctx     context.Context
	sending chan struct{} // closed once a send is in flight
	release chan struct{}
}

func (b *blockingStream) Context() context.Context { return b.ctx }
func (b *blockingStream) SendMsg(any) error {
	close(b.sending)
	<-b.release
	return nil
}

// A stream shed while its handler's send is in flight ends when the
// handler does; a handler that then returns nil (its send failed or was
// let go, and it had nothing more to say) must not end the stream as one
// that went well: the client reads RESOURCE_EXHAUSTED, OVERLOADED.
func TestShedStreamWhoseHandlerReturnsNil(t *testing.T) {
	line := int64(1000)
	var heap atomic.Int64
	m, err := overload.New(overload.Config{Line: line, Logger: slog.New(slog.DiscardHandler),
		Read: func() overload.Reading { return overload.Reading{Heap: heap.Load()} }, Collect: func() {}})
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{opts: options{overload: m}}
	_, intercept := s.overloadInterceptors()
	bs := &blockingStream{ctx: context.Background(), sending: make(chan struct{}), release: make(chan struct{})}
	go func() {
		<-bs.sending
		heap.Store(line) // past the shed threshold
		m.Check()
		// Let the interceptor find the send in flight and wait for it
		// (endOr), then let the send go: the handler returns before endOr
		// looks again.
		time.Sleep(endRetry / 2)
		close(bs.release)
	}()
	err = intercept(nil, bs, &grpc.StreamServerInfo{FullMethod: "/exprd.v1.ExprTool/Session"}, func(_ any, ss grpc.ServerStream) error {
		_ = ss.SendMsg(nil) // in flight when the stream is shed
		return nil
	})
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted {
		t.Fatalf("got %v, want RESOURCE_EXHAUSTED (OVERLOADED)", err)
	}
}
