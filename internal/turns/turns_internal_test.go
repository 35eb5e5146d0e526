package turns

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// waitFor starts an acquire for caller and waits until it is queued.
func waitFor(t *testing.T, tr *Turns, ctx context.Context, caller string, got chan<- string) {
	t.Helper()
	before := queued(tr)
	go func() {
		if tr.Acquire(ctx, caller) == nil {
			got <- caller
		}
	}()
	for queued(tr) == before {
		time.Sleep(time.Millisecond)
	}
}

func queued(tr *Turns) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for _, w := range tr.waiting {
		n += len(w.q)
	}
	return n
}

// Waiting programs of callers that ran as long are let in by caller in
// turn, in order within a caller; one that gives up leaves the line and
// is never let in; a caller with nothing waiting is forgotten.
func TestTurnsByCaller(t *testing.T) {
	tr := NewTurns(1)
	if err := tr.Acquire(context.Background(), "a"); err != nil {
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
		tr.Release("", 0)
		order = append(order, <-got)
	}
	if want := []string{"a", "b", "c", "a", "a"}; !slices.Equal(order, want) {
		t.Fatalf("turns went to %q, want %q", order, want)
	}
	tr.Release("", 0)
	if tr.running != 0 || len(tr.waiting) != 0 || len(tr.line) != 0 {
		t.Fatalf("after every turn: running %d, waiting %v, line %v", tr.running, tr.waiting, tr.line)
	}
}

// The capacity is read at each acquire and release: when it grows, the
// next acquire lets in those that waited before it, in turn; when it
// shrinks, releases let nobody in until the running fit under it.
func TestTurnsFollowCapacity(t *testing.T) {
	var capacity atomic.Int64
	capacity.Store(1)
	tr := NewTurnsOf(func() int { return int(capacity.Load()) })
	if err := tr.Acquire(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 8)
	waitFor(t, tr, context.Background(), "b", got)
	capacity.Store(3)
	acquireNow := func(caller string) {
		t.Helper()
		go func() {
			if tr.Acquire(context.Background(), caller) == nil {
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
	tr.Release("", 0) // 2 running, capacity 1: d waits
	tr.Release("", 0) // 1 running: d still waits
	select {
	case c := <-got:
		t.Fatalf("%s got a turn over the capacity", c)
	case <-time.After(20 * time.Millisecond):
	}
	tr.Release("", 0)
	if c := <-got; c != "d" {
		t.Fatalf("got %s, want d", c)
	}
	tr.Release("", 0)
	if tr.running != 0 || len(tr.line) != 0 {
		t.Fatalf("after every turn: running %d, line %v", tr.running, tr.line)
	}
}

// The caller whose programs ran the least is let in first: a light
// caller that comes while heavy ones' programs wait (each having run its
// time budget) goes before their next, each time it comes back, starting
// level with the least run of those waiting and first among them; two
// heavy callers that ran as long take turns. Each release names the caller whose turn it was.
func TestTurnsLeastRunFirst(t *testing.T) {
	tr := NewTurns(1)
	if err := tr.Acquire(context.Background(), "heavy"); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 16)
	for range 3 {
		waitFor(t, tr, context.Background(), "heavy", got)
	}
	for range 2 {
		waitFor(t, tr, context.Background(), "other", got)
	}
	const budget = 100 * time.Millisecond
	order, ran := []string(nil), "heavy"
	release := func(d time.Duration) {
		t.Helper()
		tr.Release(ran, d)
		ran = <-got
		order = append(order, ran)
	}
	release(budget) // heavy ran 100 ms, other nothing: other
	waitFor(t, tr, context.Background(), "light", got)
	release(budget)           // light comes level with other (0 ms): light
	release(time.Millisecond) // heavy and other ran as long: heavy, come first
	waitFor(t, tr, context.Background(), "light", got)
	release(budget)           // other 100 ms, light level with it and back, heavy 200 ms: light
	release(budget)           // other
	release(time.Millisecond) // heavy's last two
	release(budget)
	if want := []string{"other", "light", "heavy", "light", "other", "heavy", "heavy"}; !slices.Equal(order, want) {
		t.Fatalf("turns went to %q, want %q", order, want)
	}
	tr.Release(ran, budget)
	if tr.running != 0 || len(tr.waiting) != 0 || len(tr.line) != 0 {
		t.Fatalf("after every turn: running %d, waiting %v, line %v", tr.running, tr.waiting, tr.line)
	}
}
