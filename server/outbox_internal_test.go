package server

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The queue holds up to its bytes while the client reads nothing: puts up
// to the bound are taken at once, one byte past it waits the slow-reader
// timeout and ends the stream; a message larger than the bound is taken
// alone.
func TestOutboxBytesBound(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	blocked := func(int) error { <-release; return nil } // a client that does not read
	defer close(release)
	size := func(n int) int { return n }
	ctx := context.Background()

	o := newOutbox(100, 50*time.Millisecond, size, blocked, nil)
	for _, n := range []int{10, 40, 50} { // 100 bytes in all: at the bound
		if err := o.put(ctx, n); err != nil {
			t.Fatalf("put %d up to the bound: %v", n, err)
		}
	}
	if err := o.put(ctx, 1); !errors.Is(err, errSlowReader) {
		t.Fatalf("a put one byte past the bound: got %v, want errSlowReader after the timeout", err)
	}
	select {
	case <-o.Dead():
	default:
		t.Errorf("the outbox is not dead after the timeout")
	}

	big := newOutbox(100, 50*time.Millisecond, size, blocked, nil)
	if err := big.put(ctx, 1000); err != nil {
		t.Errorf("a message past the bound into an empty queue: %v, want it taken alone", err)
	}
}

// Messages go out in the order they were put while the queue's array is
// reused: a put into a full array whose front is sent moves what waits to
// the front instead of growing it.
func TestOutboxOrderWhileReused(t *testing.T) {
	t.Parallel()
	entered := make(chan int)      // the sender is in send(i)
	proceed := make(chan struct{}) // one send may return
	var sent []int
	send := func(i int) error {
		entered <- i
		<-proceed
		sent = append(sent, i) // only the sender goroutine appends
		return nil
	}
	o := newOutbox(1<<20, time.Minute, func(int) int { return 1 }, send, nil)
	ctx := context.Background()
	next := 0
	put := func() {
		if err := o.put(ctx, next); err != nil {
			t.Fatalf("put %d: %v", next, err)
		}
		next++
	}
	state := func() (head, n, c int) {
		o.mu.Lock()
		defer o.mu.Unlock()
		return o.head, len(o.q), cap(o.q)
	}
	put()
	<-entered // 0 is being sent
	for {     // fill the array
		put()
		if _, n, c := state(); n >= 4 && n == c {
			break
		}
	}
	for range 2 { // two more sent, the next being sent
		proceed <- struct{}{}
		<-entered
	}
	head, n, c := state()
	put()
	head2, n2, c2 := state()
	if head == 0 || head2 != 0 || n2 != n-head+1 || c2 != c {
		t.Errorf("a put into a full array (head %d, len %d, cap %d): got head %d, len %d, cap %d, want 0, %d, %d",
			head, n, c, head2, n2, c2, n-head+1, c)
	}
	go func() {
		for range entered {
			proceed <- struct{}{}
		}
	}()
	proceed <- struct{}{} // the one being sent
	o.close()
	close(entered)
	if len(sent) != next {
		t.Fatalf("sent %d messages, want %d", len(sent), next)
	}
	for i, m := range sent {
		if m != i {
			t.Fatalf("sent %v, want 0 to %d in order", sent, next-1)
		}
	}
}
