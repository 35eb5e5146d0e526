// Package turns shares a process's cores among callers: at most as many
// goroutines compute at once as there are turns, each for a Slice at a
// time, the caller that has computed least first. Programs take turns
// (evaluator, codemode), and so does other work that computes for long
// on a caller's behalf, through its context (Compute, Yield).
//
// The turns are one process's: each replica shares its own cores.
package turns

import (
	"container/heap"
	"context"
	"slices"
	"sync"
	"time"
)

// Slice is how long a program computes on one turn before it gives
// it back and waits its turn again, behind the callers that wait and
// have run less: a program's time budget is 100 ms in ExprTool and
// seconds in CodeMode, and one that held its turn for all of it kept
// every other caller's program off a core for that long (a steady
// caller's millisecond call waited 50-60 ms behind 64 programs running
// to their budgets on two cores). Without waiters it takes its turn back
// at once: a lock, and for ExprTool a thread lock, every slice.
const Slice = 2 * time.Millisecond

// Turns lets at most capacity() programs run at once, ExprTool's and
// CodeMode's alike: a program holds a turn while it computes, and gives
// it back while it waits (on the user, a host function, a tool). Those that wait are
// let in by caller, the caller whose programs have run the least first
// (the time each ran, told at its release), first come, first served
// within a caller and among callers that ran as long: a caller whose
// programs run to their time budget waits behind one whose programs take
// a millisecond, and one caller's many programs delay another's by at
// most one of theirs each turn, whatever their number. A caller is kept
// only while it has programs waiting; one that comes back starts level
// with the caller that ran the least among those waiting, so that no
// caller banks a head start by staying away, and goes first among those
// level with it: it waited for none of their turns, and a caller that
// sends one program at a time (a user's call) comes back for each, so
// behind them it waited a slice for each caller that had run as little. The capacity is read at each
// acquire and release, so it may follow the cores Go runs on
// (GOMAXPROCS), which exprd changes with its load.
type Turns struct {
	mu       sync.Mutex
	capacity func() int
	running  int
	waiting  map[string]*inLine // by caller
	line     line               // the callers that wait, the next first
	seq      uint64
}

// inLine is a caller's programs waiting, in order, and how long its
// programs have run while it waited.
type inLine struct {
	caller string
	q      []chan struct{}
	ran    time.Duration
	fresh  bool   // it came back and has had no turn since: first among those that ran as long
	seq    uint64 // its place among callers that ran as long
	i      int    // its index in the line
}

// line is a heap of the waiting callers: least run first, then the
// callers that came back, then first come.
type line []*inLine

func (l line) Len() int { return len(l) }
func (l line) Less(i, j int) bool {
	if l[i].ran != l[j].ran {
		return l[i].ran < l[j].ran
	}
	if l[i].fresh != l[j].fresh {
		return l[i].fresh
	}
	return l[i].seq < l[j].seq
}
func (l line) Swap(i, j int) { l[i], l[j] = l[j], l[i]; l[i].i, l[j].i = i, j }
func (l *line) Push(x any)   { w := x.(*inLine); w.i = len(*l); *l = append(*l, w) }
func (l *line) Pop() any {
	old := *l
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*l = old[:len(old)-1]
	return w
}

// NewTurns lets n programs run at once.
func NewTurns(n int) *Turns { return NewTurnsOf(func() int { return n }) }

// NewTurnsOf lets capacity() programs run at once, read at each Acquire
// and Release.
func NewTurnsOf(capacity func() int) *Turns {
	return &Turns{capacity: capacity, waiting: map[string]*inLine{}}
}

// Acquire waits for a turn for caller, or for ctx to end (its error).
func (t *Turns) Acquire(ctx context.Context, caller string) error {
	t.mu.Lock()
	if len(t.line) == 0 && t.running < t.capacity() {
		t.running++
		t.mu.Unlock()
		return nil
	}
	ready := make(chan struct{})
	w, ok := t.waiting[caller]
	if !ok {
		var ran time.Duration
		if len(t.line) > 0 {
			ran = t.line[0].ran // level with the least run of those waiting
		}
		t.seq++
		w = &inLine{caller: caller, ran: ran, fresh: true, seq: t.seq}
		t.waiting[caller] = w
		heap.Push(&t.line, w)
	}
	w.q = append(w.q, ready)
	t.fill() // the capacity may have grown since the last release
	t.mu.Unlock()
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
	}
	t.mu.Lock()
	if w := t.waiting[caller]; w != nil {
		if i := slices.Index(w.q, ready); i >= 0 {
			w.q = slices.Delete(w.q, i, i+1)
			t.forgetIfDone(w)
			t.mu.Unlock()
			return ctx.Err()
		}
	}
	t.mu.Unlock()
	t.Release(caller, 0) // handed a turn as it gave up: pass it on
	return ctx.Err()
}

// Release gives a turn of caller's back, its program having run for ran:
// the turn goes to the next callers that wait, as many as the capacity
// lets run.
func (t *Turns) Release(caller string, ran time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.running--
	if w := t.waiting[caller]; w != nil && ran > 0 {
		w.ran += ran
		heap.Fix(&t.line, w.i)
	}
	t.fill()
}

// fill hands turns to waiting callers, the next first, while the capacity
// allows. t.mu is held.
func (t *Turns) fill() {
	for len(t.line) > 0 && t.running < t.capacity() {
		w := t.line[0]
		close(w.q[0])
		w.q = w.q[1:]
		t.running++
		if !t.forgetIfDone(w) {
			t.seq++
			w.seq, w.fresh = t.seq, false // behind the callers that ran as long
			heap.Fix(&t.line, w.i)
		}
	}
}

// forgetIfDone forgets a caller with nothing waiting, and says so. t.mu
// is held.
func (t *Turns) forgetIfDone(w *inLine) bool {
	if len(w.q) > 0 {
		return false
	}
	heap.Remove(&t.line, w.i)
	delete(t.waiting, w.caller)
	return true
}
