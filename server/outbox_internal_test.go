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
