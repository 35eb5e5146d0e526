package turns

import (
	"context"
	"runtime"
	"sync"
	"time"
)

// The goroutines of a program hold their turns themselves (evaluator,
// codemode); any other work that computes for long on a caller's behalf
// (converting a provider's document, say) takes them through its context:
// the server puts its Turns there (With), the work runs in Compute, and
// calls Yield where it would check its context.

type turnsKey struct{}

type heldKey struct{}

// With makes the work run in Compute under ctx take its turns of t.
func With(ctx context.Context, t *Turns) context.Context {
	if t == nil {
		return ctx
	}
	return context.WithValue(ctx, turnsKey{}, t)
}

// held is the turn a Compute holds. mu is held by whoever gives it back
// or takes it again: Yield from a goroutine f started, while another
// yields, does nothing.
type held struct {
	mu     sync.Mutex
	t      *Turns
	caller string
	since  time.Time // when it took the turn; zero: not held
}

// Compute runs f on a turn of the Turns ctx carries (With), as caller:
// it waits for the turn (or ctx's end: its error), and f's context
// carries the turn, which Yield gives back after each Slice and waits for
// again. Without Turns, or in a Compute already, f runs at once. f is
// computing: it must not wait on the network or on another caller while
// it holds the turn.
func Compute(ctx context.Context, caller string, f func(context.Context) error) error {
	t, _ := ctx.Value(turnsKey{}).(*Turns)
	if _, in := ctx.Value(heldKey{}).(*held); t == nil || in {
		return f(ctx)
	}
	if err := t.Acquire(ctx, caller); err != nil {
		return err
	}
	h := &held{t: t, caller: caller, since: time.Now()}
	defer func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if !h.since.IsZero() {
			t.Release(caller, time.Since(h.since))
			h.since = time.Time{}
		}
	}()
	return f(context.WithValue(ctx, heldKey{}, h))
}

// Yield is a checkpoint of work in Compute: it reports ctx's error, and
// once the turn has been held for a Slice it lets the goroutines that
// wait for a core run (Go preempts a goroutine that computes only after
// 10 ms), gives the turn to the callers that wait, and waits its turn
// again. Outside Compute it is ctx.Err().
func Yield(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	h, ok := ctx.Value(heldKey{}).(*held)
	if !ok || !h.mu.TryLock() {
		return nil
	}
	defer h.mu.Unlock()
	if h.since.IsZero() || time.Since(h.since) < Slice {
		return nil
	}
	// The core first, while the turn is still held: a turn given back
	// wakes its next holder on this core, ahead of every goroutine that
	// waits for one.
	runtime.Gosched()
	h.t.Release(h.caller, time.Since(h.since))
	h.since = time.Time{}
	if err := h.t.Acquire(ctx, h.caller); err != nil {
		return err
	}
	h.since = time.Now()
	return nil
}
