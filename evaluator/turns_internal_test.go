package evaluator

import (
	"context"
	"slices"
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
	if tr.free != 1 || len(tr.waiting) != 0 || len(tr.ring) != 0 {
		t.Fatalf("after every turn: free %d, waiting %v, ring %v", tr.free, tr.waiting, tr.ring)
	}
}
