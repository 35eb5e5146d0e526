package stream

import (
	"context"
	"errors"
	"testing"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func testCorrelator() *Correlator[string, int] {
	return NewCorrelator[string, int](func(id string) string { return "no request " + id + " is waiting" })
}

// wantNotAwaited fails unless err is the rule's NOT_FOUND, REPLY_NOT_AWAITED.
func wantNotAwaited(t *testing.T, err error) {
	t.Helper()
	st := status.Convert(err)
	if err == nil || st.Code() != codes.NotFound {
		t.Fatalf("got %v, want NOT_FOUND", err)
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == exprdv1.ErrorReason_REPLY_NOT_AWAITED.String() {
			return
		}
	}
	t.Errorf("got details %v, want the ErrorInfo %s", st.Details(), exprdv1.ErrorReason_REPLY_NOT_AWAITED.String())
}

// asked starts ask in a goroutine and returns, once the request is sent,
// a channel with what ask returned.
func asked(ctx context.Context, c *Correlator[string, int], id string, check func(int) error) <-chan askResult {
	sent := make(chan struct{})
	out := make(chan askResult, 1)
	go func() {
		v, err := c.Ask(ctx, id, check, func() error { close(sent); return nil })
		out <- askResult{v, err}
	}()
	<-sent
	return out
}

type askResult struct {
	v   int
	err error
}

func TestCorrelatorDelivers(t *testing.T) {
	t.Parallel()
	c := testCorrelator()
	got := asked(context.Background(), c, c.ID(), nil)
	if err := c.Deliver("1", 7); err != nil {
		t.Fatalf("deliver: %v", err)
	}
	if r := <-got; r.v != 7 || r.err != nil {
		t.Errorf("got %d, %v; want 7", r.v, r.err)
	}
	// The same reply again, and one for an id never sent: nobody waits.
	wantNotAwaited(t, c.Deliver("1", 7))
	wantNotAwaited(t, c.Deliver("nobody", 1))
	if id := c.ID(); id != "2" {
		t.Errorf("got the next id %q, want 2", id)
	}
}

// A reply that comes once its request's context ended is not awaited,
// even before the waiting goroutine has run (regression: a tool output
// arriving between a call's timeout and its waiter's removal was taken and
// dropped without a word).
func TestCorrelatorReplyAfterTimeoutIsRejected(t *testing.T) {
	t.Parallel()
	c := testCorrelator()
	ctx, cancel := context.WithCancel(context.Background())
	got := asked(ctx, c, "late", nil)
	cancel()
	wantNotAwaited(t, c.Deliver("late", 1))
	if r := <-got; !errors.Is(r.err, context.Canceled) {
		t.Errorf("got %d, %v; want context.Canceled", r.v, r.err)
	}
}

// A reply delivered before the request stopped waiting is what ask
// returns, whatever ended the wait after it.
func TestCorrelatorDeliveredBeforeTheEndIsReturned(t *testing.T) {
	t.Parallel()
	c := testCorrelator()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	v, err := c.Ask(ctx, "a", nil, func() error {
		if err := c.Deliver("a", 3); err != nil {
			t.Errorf("deliver: %v", err)
		}
		cancel()
		c.Close()
		return nil
	})
	if v != 3 || err != nil {
		t.Errorf("got %d, %v; want 3", v, err)
	}
}

// A reply the check refuses is its error, and the request goes on waiting.
func TestCorrelatorCheckRefuses(t *testing.T) {
	t.Parallel()
	c := testCorrelator()
	odd := errors.New("want an even number")
	got := asked(context.Background(), c, "a", func(v int) error {
		if v%2 != 0 {
			return odd
		}
		return nil
	})
	if err := c.Deliver("a", 1); !errors.Is(err, odd) {
		t.Fatalf("got %v, want the check's error", err)
	}
	if err := c.Deliver("a", 2); err != nil {
		t.Fatalf("got %v, want the fitting reply taken", err)
	}
	if r := <-got; r.v != 2 || r.err != nil {
		t.Errorf("got %d, %v; want 2", r.v, r.err)
	}
}

// The half-close answers every waiter, and every later request at once,
// without sending it.
func TestCorrelatorHalfClose(t *testing.T) {
	t.Parallel()
	c := testCorrelator()
	a, b := asked(context.Background(), c, "a", nil), asked(context.Background(), c, "b", nil)
	c.Close()
	for _, got := range []<-chan askResult{a, b} {
		if r := <-got; !errors.Is(r.err, ErrClientGone) {
			t.Errorf("got %d, %v; want ErrClientGone", r.v, r.err)
		}
	}
	_, err := c.Ask(context.Background(), "c", nil, func() error {
		t.Error("a request was sent after the half-close")
		return nil
	})
	if !errors.Is(err, ErrClientGone) {
		t.Errorf("got %v, want ErrClientGone", err)
	}
}

// A second request under a key that is waiting is refused: its replies
// could not be told apart. The first goes on waiting.
func TestCorrelatorKeyWaitingTwice(t *testing.T) {
	t.Parallel()
	c := testCorrelator()
	got := asked(context.Background(), c, "a", nil)
	if _, err := c.Ask(context.Background(), "a", nil, func() error { return nil }); !errors.Is(err, ErrAlreadyWaiting) {
		t.Errorf("got %v, want ErrAlreadyWaiting", err)
	}
	if err := c.Deliver("a", 5); err != nil {
		t.Fatal(err)
	}
	if r := <-got; r.v != 5 {
		t.Errorf("got %d, %v; want 5", r.v, r.err)
	}
}

// A request that could not be sent is forgotten: a reply to it is not
// awaited.
func TestCorrelatorSendFails(t *testing.T) {
	t.Parallel()
	c := testCorrelator()
	broken := errors.New("the stream is gone")
	if _, err := c.Ask(context.Background(), "a", nil, func() error { return broken }); !errors.Is(err, broken) {
		t.Errorf("got %v, want the send's error", err)
	}
	wantNotAwaited(t, c.Deliver("a", 1))
}
