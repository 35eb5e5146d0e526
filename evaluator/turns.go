package evaluator

import (
	"context"
	"slices"
	"sync"

	"github.com/exprd/exprd/membudget"
)

// turns lets at most capacity() programs run at once. Those that wait are
// let in by caller in turn (round robin), first come, first served within
// a caller: one caller's many programs delay another caller's by at most
// one of theirs each turn, whatever their number. A caller is kept only
// while it has programs waiting. The capacity is read at each acquire and
// release, so it may follow the cores Go runs on (GOMAXPROCS), which
// exprd changes with its load.
type turns struct {
	mu       sync.Mutex
	capacity func() int
	running  int
	waiting  map[string][]chan struct{} // by caller, in order
	ring     []string                   // the callers that wait, in turn order
}

// newTurns lets n programs run at once.
func newTurns(n int) *turns { return newTurnsOf(func() int { return n }) }

func newTurnsOf(capacity func() int) *turns {
	return &turns{capacity: capacity, waiting: map[string][]chan struct{}{}}
}

// acquire waits for a turn for caller, or for ctx to end (its error).
func (t *turns) acquire(ctx context.Context, caller string) error {
	t.mu.Lock()
	if len(t.ring) == 0 && t.running < t.capacity() {
		t.running++
		t.mu.Unlock()
		return nil
	}
	ready := make(chan struct{})
	q, ok := t.waiting[caller]
	if !ok {
		t.ring = append(t.ring, caller)
	}
	t.waiting[caller] = append(q, ready)
	t.fill() // the capacity may have grown since the last release
	t.mu.Unlock()
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
	}
	t.mu.Lock()
	q = t.waiting[caller]
	if i := slices.Index(q, ready); i >= 0 {
		t.drop(caller, slices.Delete(q, i, i+1))
		t.mu.Unlock()
		return ctx.Err()
	}
	t.mu.Unlock()
	t.release() // handed a turn as it gave up: pass it on
	return ctx.Err()
}

// release gives a turn back: to the next callers that wait, as many as
// the capacity lets run.
func (t *turns) release() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.running--
	t.fill()
}

// fill hands turns to waiting callers, in turn, while the capacity allows.
// t.mu is held.
func (t *turns) fill() {
	for len(t.ring) > 0 && t.running < t.capacity() {
		caller := t.ring[0]
		q := t.waiting[caller]
		close(q[0])
		t.running++
		t.ring = t.ring[1:]
		if len(q) > 1 {
			t.ring = append(t.ring, caller)
		}
		t.drop(caller, q[1:])
	}
}

// drop sets caller's queue to q, forgetting the caller when q is empty.
// t.mu is held.
func (t *turns) drop(caller string, q []chan struct{}) {
	if len(q) > 0 {
		t.waiting[caller] = q
		return
	}
	delete(t.waiting, caller)
	if i := slices.Index(t.ring, caller); i >= 0 {
		t.ring = slices.Delete(t.ring, i, i+1)
	}
}

// callerOf is the caller whose programs ctx's runs are (membudget's
// WithCaller: a server's rate-limit key, an identity or an address):
// programs waiting to run take turns by caller (WithMaxRunning). Runs
// without one share the caller "".
func callerOf(ctx context.Context) string { return membudget.CallerOf(ctx) }
