package evaluator

import (
	"context"
	"slices"
	"sync"
)

// turns lets at most n programs run at once. Those that wait are let in
// by caller in turn (round robin), first come, first served within a
// caller: one caller's many programs delay another caller's by at most
// one of theirs each turn, whatever their number. A caller is kept only
// while it has programs waiting.
type turns struct {
	mu      sync.Mutex
	free    int
	waiting map[string][]chan struct{} // by caller, in order
	ring    []string                   // the callers that wait, in turn order
}

func newTurns(n int) *turns { return &turns{free: n, waiting: map[string][]chan struct{}{}} }

// acquire waits for a turn for caller, or for ctx to end (its error).
func (t *turns) acquire(ctx context.Context, caller string) error {
	t.mu.Lock()
	if t.free > 0 { // then nobody waits: release hands a turn to a waiter first
		t.free--
		t.mu.Unlock()
		return nil
	}
	ready := make(chan struct{})
	q, ok := t.waiting[caller]
	if !ok {
		t.ring = append(t.ring, caller)
	}
	t.waiting[caller] = append(q, ready)
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

// release gives a turn back: to the next caller that waits, else free.
func (t *turns) release() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.ring) == 0 {
		t.free++
		return
	}
	caller := t.ring[0]
	q := t.waiting[caller]
	close(q[0])
	t.ring = t.ring[1:]
	if len(q) > 1 {
		t.ring = append(t.ring, caller)
	}
	t.drop(caller, q[1:])
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

type callerKey struct{}

// WithCaller returns ctx naming the caller whose programs its runs are
// (a server's rate-limit key: an identity or an address): programs waiting
// to run take turns by caller (WithMaxRunning). Runs without one share
// the caller "".
func WithCaller(ctx context.Context, caller string) context.Context {
	return context.WithValue(ctx, callerKey{}, caller)
}

func callerOf(ctx context.Context) string {
	c, _ := ctx.Value(callerKey{}).(string)
	return c
}
