package stream

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/exprd/exprd/membudget"
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

	o := NewOutbox(100, 50*time.Millisecond, size, blocked, nil, nil)
	for _, n := range []int{10, 40, 50} { // 100 bytes in all: at the bound
		if err := o.Put(ctx, n); err != nil {
			t.Fatalf("put %d up to the bound: %v", n, err)
		}
	}
	if err := o.Put(ctx, 1); !errors.Is(err, ErrSlowReader) {
		t.Fatalf("a put one byte past the bound: got %v, want ErrSlowReader after the timeout", err)
	}
	select {
	case <-o.Dead():
	default:
		t.Errorf("the outbox is not dead after the timeout")
	}

	big := NewOutbox(100, 50*time.Millisecond, size, blocked, nil, nil)
	if err := big.Put(ctx, 1000); err != nil {
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
	o := NewOutbox(1<<20, time.Minute, func(int) int { return 1 }, send, nil, nil)
	ctx := context.Background()
	next := 0
	put := func() {
		if err := o.Put(ctx, next); err != nil {
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
	o.Close()
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

// What a queue holds past FreeBytes is reserved from the memory
// budget; a queue the budget cannot hold ends the stream with the budget's
// error, and what it held is given back once its sender lets go.
func TestOutboxMemory(t *testing.T) {
	budget := membudget.New(8<<20, 10*time.Millisecond)
	release := make(chan struct{})
	o := NewOutbox(4<<20, time.Minute, func(n int) int { return n }, func(int) error { <-release; return nil }, nil, budget.Empty("test"))
	const msg = 100 << 10
	for range 5 {
		if err := o.Put(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := budget.InUse(), int64(5*msg-FreeBytes); got != want {
		t.Fatalf("reserved %d for 5 × %d queued, want %d", got, msg, want)
	}
	large := budget.Limit() - budget.Limit()/16 // the part for reservations this size
	others, err := budget.Reserve(context.Background(), "others", large-budget.InUse())
	if err != nil {
		t.Fatal(err)
	}
	var spent *membudget.ExhaustedError
	if err := o.Put(context.Background(), msg); !errors.As(err, &spent) {
		t.Fatalf("put with the budget spent: got %v, want the budget's error", err)
	}
	select {
	case <-o.Dead():
	default:
		t.Fatal("the stream goes on with a queue the budget cannot hold")
	}
	if st := SendStatus(o.err); status.Code(st) != codes.ResourceExhausted {
		t.Fatalf("the stream ends %v, want RESOURCE_EXHAUSTED", st)
	}
	close(release)
	o.Close()
	others.Release()
	deadline := time.Now().Add(5 * time.Second)
	for budget.InUse() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes still reserved after the queue was sent", budget.InUse())
		}
		time.Sleep(time.Millisecond)
	}
}

// A queue of exactly FreeBytes reserves nothing; a byte more
// reserves that byte.
func TestOutboxFreeBytesEdge(t *testing.T) {
	budget := membudget.New(8<<20, 10*time.Millisecond)
	release := make(chan struct{})
	defer close(release)
	o := NewOutbox(4<<20, time.Minute, func(n int) int { return n }, func(int) error { <-release; return nil }, nil, budget.Empty("test"))
	if err := o.Put(context.Background(), FreeBytes); err != nil {
		t.Fatal(err)
	}
	if n := budget.InUse(); n != 0 {
		t.Fatalf("a queue of FreeBytes reserves %d, want 0", n)
	}
	if err := o.Put(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if n := budget.InUse(); n != 1 {
		t.Fatalf("a queue one byte past FreeBytes reserves %d, want 1", n)
	}
}
