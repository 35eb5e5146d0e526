package evaluator

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// waitFor starts an acquire for caller and waits until it is queued.
func waitFor(t *testing.T, tr *turns, ctx context.Context, caller string, got chan<- string) {
	t.Helper()
	before := queued(tr)
	go func() {
		if tr.acquire(ctx, caller) == nil {
			got <- caller
		}
	}()
	for queued(tr) == before {
		time.Sleep(time.Millisecond)
	}
}

func queued(tr *turns) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for _, q := range tr.waiting {
		n += len(q)
	}
	return n
}

// Waiting programs are let in by caller in turn, in order within a
// caller; one that gives up leaves the line and is never let in; a caller
// with nothing waiting is forgotten.
func TestTurnsByCaller(t *testing.T) {
	tr := newTurns(1)
	if err := tr.acquire(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 8)
	gone, giveUp := context.WithCancel(context.Background())
	for _, c := range []string{"a1", "a2", "a3"} {
		waitFor(t, tr, context.Background(), c[:1], got)
	}
	waitFor(t, tr, gone, "b", got)
	waitFor(t, tr, context.Background(), "b", got)
	waitFor(t, tr, context.Background(), "c", got)
	giveUp() // b's first leaves the line
	for queued(tr) != 5 {
		time.Sleep(time.Millisecond)
	}
	var order []string
	for range 5 {
		tr.release()
		order = append(order, <-got)
	}
	if want := []string{"a", "b", "c", "a", "a"}; !slices.Equal(order, want) {
		t.Fatalf("turns went to %q, want %q", order, want)
	}
	tr.release()
	if tr.running != 0 || len(tr.waiting) != 0 || len(tr.ring) != 0 {
		t.Fatalf("after every turn: running %d, waiting %v, ring %v", tr.running, tr.waiting, tr.ring)
	}
}

// The capacity is read at each acquire and release: when it grows, the
// next acquire lets in those that waited before it, in turn; when it
// shrinks, releases let nobody in until the running fit under it.
func TestTurnsFollowCapacity(t *testing.T) {
	var capacity atomic.Int64
	capacity.Store(1)
	tr := newTurnsOf(func() int { return int(capacity.Load()) })
	if err := tr.acquire(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 8)
	waitFor(t, tr, context.Background(), "b", got)
	capacity.Store(3)
	acquireNow := func(caller string) {
		t.Helper()
		go func() {
			if tr.acquire(context.Background(), caller) == nil {
				got <- caller
			}
		}()
	}
	acquireNow("c") // lets b in, then itself
	if in := []string{<-got, <-got}; !slices.Contains(in, "b") || !slices.Contains(in, "c") {
		t.Fatalf("after the capacity grew: %v got turns, want b and c", in)
	}
	capacity.Store(1)
	waitFor(t, tr, context.Background(), "d", got)
	tr.release() // 2 running, capacity 1: d waits
	tr.release() // 1 running: d still waits
	select {
	case c := <-got:
		t.Fatalf("%s got a turn over the capacity", c)
	case <-time.After(20 * time.Millisecond):
	}
	tr.release()
	if c := <-got; c != "d" {
		t.Fatalf("got %s, want d", c)
	}
	tr.release()
	if tr.running != 0 || len(tr.ring) != 0 {
		t.Fatalf("after every turn: running %d, ring %v", tr.running, tr.ring)
	}
}
