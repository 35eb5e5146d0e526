package stream

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/exprd/exprd/membudget"
)

// fakeRPC is a bidi stream whose client sends what recv holds (then waits
// for its context, or ends with recvErr) and reads when read is open.
type fakeRPC struct {
	ctx     context.Context
	recv    chan *wrapperspb.StringValue
	recvErr error
	read    chan struct{} // closed: Send returns at once; else Send blocks until it is
	mu      sync.Mutex
	sent    []string
}

func newFakeRPC(ctx context.Context) *fakeRPC {
	return &fakeRPC{ctx: ctx, recv: make(chan *wrapperspb.StringValue, 8), read: make(chan struct{})}
}

func (f *fakeRPC) Context() context.Context { return f.ctx }

func (f *fakeRPC) Recv() (*wrapperspb.StringValue, error) {
	select {
	case m, ok := <-f.recv:
		if !ok {
			if f.recvErr != nil {
				return nil, f.recvErr
			}
			return nil, io.EOF
		}
		return m, nil
	case <-f.ctx.Done():
		return nil, status.FromContextError(f.ctx.Err()).Err()
	}
}

func (f *fakeRPC) Send(m *wrapperspb.StringValue) error {
	select {
	case <-f.read:
	case <-f.ctx.Done():
		return f.ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent = append(f.sent, m.GetValue())
	return nil
}

func (f *fakeRPC) got() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.sent...)
}

func testConfig(mem *membudget.Budget) Config {
	return Config{OutboxBytes: 1 << 10, SlowReaderTimeout: 200 * time.Millisecond, Memory: mem,
		Recover: func(context.Context, any) error { return status.Error(codes.Internal, "internal error") }}
}

// Close releases in its order: the group's goroutines end first (what
// they queue is sent), then the outbox is drained, the stream's
// reservations are given back, and the work's context is cancelled.
func TestStreamCloseOrder(t *testing.T) {
	mem := membudget.New(1<<20, time.Second)
	rpc := newFakeRPC(context.Background())
	close(rpc.read)
	st := Open(testConfig(mem), rpc, nil, EndsWork)
	held := st.Memory("a test's")
	if err := held.TryResize(1000); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	st.Group.Go(func() error {
		<-release
		return st.Send(wrapperspb.String("from the group"))
	})
	if err := st.Send(wrapperspb.String("first")); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() { st.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned before the group's goroutine ended")
	case <-time.After(50 * time.Millisecond):
	}
	if st.Ctx.Err() != nil {
		t.Fatal("the work was cancelled before the group ended")
	}
	close(release)
	<-closed
	if got := rpc.got(); len(got) != 2 || got[0] != "first" || got[1] != "from the group" {
		t.Fatalf("sent %q, want first and from the group, in order", got)
	}
	if mem.InUse() != 0 {
		t.Fatalf("the budget holds %d bytes after Close, want 0", mem.InUse())
	}
	if st.Ctx.Err() == nil {
		t.Fatal("the work's context lives on after Close")
	}
}

// What a client that stops reading does to the work, by Ends: the status
// the stream ends with is the slow reader's.
func TestStreamEnds(t *testing.T) {
	for _, tt := range []struct {
		name       string
		ends       Ends
		clientGone bool // the stream's context ends before the outbox dies
		cancelled  bool
	}{
		{"the work ends with the stream", EndsWork, false, true},
		{"a detached work goes on without a client that went away", EndsWorkUnlessGone, true, false},
		{"a detached work ends when the client stops reading", EndsWorkUnlessGone, false, true},
		{"the handler finds the outbox dead itself", EndsNothing, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			streamCtx, streamCancel := context.WithCancel(context.Background())
			defer streamCancel()
			rpc := newFakeRPC(streamCtx)
			parent := context.WithoutCancel(streamCtx)
			st := Open(testConfig(nil), rpc, parent, tt.ends)
			defer st.Close()
			if tt.clientGone {
				streamCancel()
			}
			// One message fills the queue and the next waits past the
			// slow-reader timeout: the outbox dies.
			_ = st.Send(wrapperspb.String(string(make([]byte, 2<<10))))
			err := st.Send(wrapperspb.String("more"))
			<-st.Out.Dead()
			if tt.clientGone {
				// The outbox's writer may have taken the first message off
				// the queue before it saw the client gone, and the second
				// been queued: a send once the outbox is dead is refused.
				if err := st.Send(wrapperspb.String("after")); err == nil {
					t.Fatal("a send to a client gone was taken")
				}
			} else if !errors.Is(err, ErrSlowReader) {
				t.Fatalf("send: %v, want the slow reader's", err)
			}
			if got := st.Ctx.Err() != nil; got != tt.cancelled {
				t.Fatalf("work cancelled: %v, want %v (cause %v)", got, tt.cancelled, context.Cause(st.Ctx))
			}
			if tt.cancelled && !tt.clientGone {
				if st := status.Convert(BrokenProtocol(st.Ctx)); st.Code() != codes.ResourceExhausted {
					t.Fatalf("the work's cause: %v, want the slow reader's RESOURCE_EXHAUSTED", st)
				}
			}
		})
	}
}

// First: a stream that ends before its first message is missing's
// status; any other failure is Recv's own.
func TestFirst(t *testing.T) {
	missing := status.Error(codes.InvalidArgument, "start: the stream's first message must be Start")
	for _, tt := range []struct {
		name    string
		send    []string
		recvErr error
		want    error
		wantMsg string
	}{
		{"a first message", []string{"start"}, nil, nil, "start"},
		{"none before the end", nil, nil, missing, ""},
		{"a failed Recv", nil, status.Error(codes.Unavailable, "gone"), status.Error(codes.Unavailable, "gone"), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rpc := newFakeRPC(context.Background())
			for _, m := range tt.send {
				rpc.recv <- wrapperspb.String(m)
			}
			if tt.send == nil {
				rpc.recvErr = tt.recvErr
				close(rpc.recv)
			}
			m, err := First(rpc, missing)
			if status.Code(err) != status.Code(tt.want) || (err != nil && err.Error() != tt.want.Error()) {
				t.Fatalf("err %v, want %v", err, tt.want)
			}
			if m.GetValue() != tt.wantMsg {
				t.Fatalf("message %q, want %q", m.GetValue(), tt.wantMsg)
			}
		})
	}
}
