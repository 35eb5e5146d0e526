// Package membudget is the process's memory budget: work that holds memory
// a client chose the size of (a state, a tool's answer) reserves its bytes
// before it allocates them and gives them back when done. When the budget
// is spent, a reservation waits briefly for room, then fails: a clear
// error for that one request instead of the OOM killer for every one.
//
// The sizes are estimates of what Go will hold, decided by the callers;
// the budget keeps the sum under its limit. A reservation that fits is
// made at once, whatever waits (a queue would make one large request hold
// up every small one, and a caller that holds nothing and keeps asking for
// more than is free could hold up every other). Room that frees goes to
// the waiting reservations by caller (WithCaller), the caller that holds
// the least first, each that fits, so that the callers holding most of
// the budget do not take it before one that holds less and waits.
package membudget

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Budget is a limit on the bytes reserved at once. A nil *Budget is
// unlimited: its reservations reserve nothing and never fail.
//
// With LimitCallers, one caller (the work a context names with
// WithCaller: a token's caller, or with auth off a client's address) may
// hold at most a share of the budget at once, so that no one caller,
// however many streams it opens, can keep every other from room.
//
// A sixteenth of the budget is kept for small reservations (each at most a
// thousandth of it: a small state, a short answer), so that a few large
// ones cannot hold every byte and make every small request, and the
// clients that send only those, wait or fail.
type Budget struct {
	large    *pool // the budget less the small part
	small    *pool // for reservations of at most smallMax
	smallMax int64
	limit    int64
	wait     time.Duration
	inUse    atomic.Int64
	refusals atomic.Int64

	noCaller atomic.Int64 // what reservations of no caller hold in the large part
	askedAt  atomic.Int64 // when a waiting reservation last asked again (Unix ns)

	callerMax int64 // what one caller may hold; 0: no bound but the budget
	onWait    func(fair, need int64) bool
	restrict  atomic.Bool
	callerMu  sync.Mutex
	callers   map[string]int64 // what each caller holds, while it holds any
	incoming  map[string]int64 // ... of which its requests on their way in (Incoming)
}

// New returns a budget of limit bytes whose reservations wait at most wait
// for room.
func New(limit int64, wait time.Duration) *Budget {
	small := limit / 16
	return &Budget{large: newPool(limit - small), small: newPool(small),
		smallMax: limit / 1024, limit: limit, wait: wait, callers: map[string]int64{}, incoming: map[string]int64{}}
}

// DefaultCallerShare is the part of the budget one caller may hold at
// once by default (exprd's --memory-caller-share): however many streams
// and calls it has, the others find at least half the budget it cannot
// take.
const DefaultCallerShare = 0.5

// LimitCallers bounds what one caller may hold at once at share of the
// budget (1, or 0: no bound but the budget), and returns b; a reservation
// of more than the share is refused as one that can never be made. Call
// it before the budget is used.
func (b *Budget) LimitCallers(share float64) *Budget {
	if b == nil || share <= 0 || share >= 1 {
		return b
	}
	b.callerMax = int64(float64(b.limit) * share)
	return b
}

// OnWait has f called when a reservation of need bytes waits for room in
// the large part of a spent budget while what its caller (WithCaller)
// would hold with it is within the caller's fair share: the large part
// shared max-min among the callers holding some of the budget or waiting
// for it, fair. f may cancel work of callers holding more than fair (the
// overload manager does), so that room frees for one holding less:
// without it, a user's 3 MB state (25 MB reserved) waited while a few
// callers held the whole budget, and was refused. f reports whether it
// did: the room that frees is then kept for the reservation (see
// pool.grantLocked). Call it before the budget is used.
func (b *Budget) OnWait(f func(fair, need int64) bool) {
	if b != nil {
		b.onWait = f
	}
}

// fairShare is the large part shared max-min among the callers holding
// some of the budget (one waiting counts what it waits for: its share is
// taken before it waits): the level such that the callers holding less
// keep what they hold and the others each hold the level. A thousand
// callers holding a kilobyte each do not make it a thousandth. What work
// of no caller holds there (the receive gate's overdraft, the turn
// store's events) is not theirs to share: shared as if it were, the level
// was above what the callers held between them, so that none was past it
// while the large part was spent, and a caller holding next to nothing
// waited out its wait and was refused (the hostile mix's legitimate
// caller, behind 67 MB of such work).
func (b *Budget) fairShare() int64 {
	b.callerMu.Lock()
	held := slices.Collect(maps.Values(b.callers))
	b.callerMu.Unlock()
	slices.Sort(held)
	left := max(b.large.size-b.noCaller.Load(), 0)
	for i, h := range held {
		level := left / int64(len(held)-i)
		if h > level {
			return level
		}
		left -= h
	}
	return b.large.size // no caller holds past its share
}

// Callers is what each caller (WithCaller) holds of the budget now, or
// waits for (its share is taken before it waits), while it holds any:
// what its calls reserved, and what was reserved in its name outside
// them (its messages on their way in, at the receive gate).
func (b *Budget) Callers() map[string]int64 {
	if b == nil {
		return nil
	}
	b.callerMu.Lock()
	defer b.callerMu.Unlock()
	return maps.Clone(b.callers)
}

// CallerMax is what one caller may hold at once (0: no bound but the
// budget).
func (b *Budget) CallerMax() int64 {
	if b == nil {
		return 0
	}
	return b.callerMax
}

// Limit is the budget's size in bytes (0 for nil: unlimited).
func (b *Budget) Limit() int64 {
	if b == nil {
		return 0
	}
	return b.limit
}

// InUse is the bytes reserved now.
func (b *Budget) InUse() int64 {
	if b == nil {
		return 0
	}
	return b.inUse.Load()
}

// Restrict, while on, makes the budget refuse at once a reservation in
// its large part for a caller that already holds more than a small
// reservation's worth of the budget (a thousandth) besides its requests
// on their way in (Incoming), or one it would take past its fair share
// (see OnWait), or for work of no caller; one for a caller that holds
// next to nothing (a new session's empty state, the message carrying its
// first state) is made as before, within its share, and the small part is
// untouched. (A user whose new session held an empty state's 80 bytes had
// its 3 MB state refused at once while the hostile mix kept the manager
// refusing.) An overload manager sets it
// while the heap is past its refuse threshold: refusing new RPCs does not
// stop the work already in flight (a stream's next state, a program's
// next megabyte, a tool's answer, a turn's history) from taking more, and
// the GC, past its soft limit, does not keep up with what it frees.
func (b *Budget) Restrict(on bool) {
	if b != nil {
		b.restrict.Store(on)
	}
}

// Waiting is the reservations waiting for room now.
func (b *Budget) Waiting() int {
	if b == nil {
		return 0
	}
	b.large.mu.Lock()
	defer b.large.mu.Unlock()
	return len(b.large.waiting)
}

// Refusals counts the reservations that failed.
func (b *Budget) Refusals() int64 {
	if b == nil {
		return 0
	}
	return b.refusals.Load()
}

// ExhaustedError is a reservation the budget could not make in time.
type ExhaustedError struct {
	What        string // what the bytes were for
	Need        int64  // bytes asked for
	Limit       int64  // the budget; with Unreachable, what one reservation may hold; with CallerShare, what one caller may
	InUse       int64  // reserved by others when it gave up; with CallerShare, by the caller
	Unreachable bool   // Need is more than one reservation may ever hold
	CallerShare bool   // the caller holds its share of the budget (LimitCallers)
}

// Error is what the client is told: what the bytes were for and how many,
// never how much the server holds (InUse) nor its budget (Limit) but for
// the bound one request may hold, a setting: figures that would tell a
// caller when the server is near its end. Logs may read the fields.
func (e *ExhaustedError) Error() string {
	if e.Unreachable {
		return fmt.Sprintf("%s needs about %d bytes of memory, more than the server's memory budget lets one request hold (%d)", e.What, e.Need, e.Limit)
	}
	if e.CallerShare {
		return fmt.Sprintf("this caller holds its share of the server's memory budget (%d bytes at once): %s needs about %d bytes more; retry when its other work has ended", e.Limit, e.What, e.Need)
	}
	return fmt.Sprintf("the server's memory budget is spent for now: %s needs about %d bytes; retry later", e.What, e.Need)
}

// Reservation holds bytes of a budget until Release. Its methods are safe
// for concurrent use; a nil *Reservation reserves nothing.
type Reservation struct {
	b      *Budget
	what   string
	holder Holder // told of every change of n; nil: none
	caller string // whose share it counts in (LimitCallers); "": none
	// incoming: it holds its caller's request on its way in (Incoming)
	incoming bool
	mu       sync.Mutex
	n        int64
	inSmall  bool // n is held in the budget's small part
	closed   bool // Close was called: it may not grow again
}

// Holder is told what the reservations made for it hold: the work a
// context carries (an RPC an overload manager tracks), so that it can be
// judged by what it holds. Add gets each change, positive or negative.
type Holder interface{ Add(n int64) }

type holderKey struct{}

// WithHolder is ctx carrying h: a reservation made with it (Reserve,
// EmptyFor, or the first Resize of an Empty one) tells h of what it holds.
func WithHolder(ctx context.Context, h Holder) context.Context {
	return context.WithValue(ctx, holderKey{}, h)
}

func holderFrom(ctx context.Context) Holder {
	h, _ := ctx.Value(holderKey{}).(Holder)
	return h
}

type callerKey struct{}

// WithCaller is ctx naming the caller its work is for (a server's
// rate-limit key: a token's caller, or a client's address): a reservation
// made with it counts in that caller's share (LimitCallers), and the
// evaluator's programs take turns by it.
func WithCaller(ctx context.Context, caller string) context.Context {
	return context.WithValue(ctx, callerKey{}, caller)
}

type incomingKey struct{}

// Incoming is ctx marking its work as a caller's request on its way in
// (a large message the receive gate admits before its bytes arrive): a
// reservation made with it counts in its caller's share and fair share as
// any other, but not in what a restricted budget judges the caller to
// hold (Restrict): a caller whose only holding is the request it sends
// holds next to nothing, as a user sending its first state does.
func Incoming(ctx context.Context) context.Context {
	return context.WithValue(ctx, incomingKey{}, true)
}

func incomingFrom(ctx context.Context) bool {
	v, _ := ctx.Value(incomingKey{}).(bool)
	return v
}

// CallerOf is the caller ctx names (WithCaller), "" for none.
func CallerOf(ctx context.Context) string { return callerFrom(ctx) }

func callerFrom(ctx context.Context) string {
	c, _ := ctx.Value(callerKey{}).(string)
	return c
}

// EmptyFor is Empty for the work ctx carries: its Holder is told of what
// the reservation holds, however it is resized later (TryResize too).
func (b *Budget) EmptyFor(ctx context.Context, what string) *Reservation {
	r := b.Empty(what)
	if r != nil {
		r.holder, r.caller, r.incoming = holderFrom(ctx), callerFrom(ctx), incomingFrom(ctx)
	}
	return r
}

// count moves n bytes into (out of, when negative) what the reservation
// holds, for the budget and the holder.
func (r *Reservation) count(n int64) {
	r.b.inUse.Add(n)
	if r.holder != nil {
		r.holder.Add(n)
	}
}

// takeShare counts grow bytes more in the reservation's caller's share,
// or says why it cannot: the caller would hold more than its share. held
// is what the caller held before, own the part of it that is not its
// requests on their way in (Incoming).
func (r *Reservation) takeShare(grow int64) (held, own int64, err error) {
	b := r.b
	if r.caller == "" {
		return 0, 0, nil
	}
	b.callerMu.Lock()
	defer b.callerMu.Unlock()
	held = b.callers[r.caller]
	own = held - b.incoming[r.caller]
	if b.callerMax > 0 && held+grow > b.callerMax {
		b.refusals.Add(1)
		return held, own, &ExhaustedError{What: r.what, Need: grow, Limit: b.callerMax, InUse: held, CallerShare: true}
	}
	b.callers[r.caller] = held + grow
	if r.incoming {
		b.incoming[r.caller] += grow
	}
	return held, own, nil
}

// giveShare counts n bytes out of the reservation's caller's share.
func (r *Reservation) giveShare(n int64) {
	b := r.b
	if r.caller == "" || n == 0 {
		return
	}
	b.callerMu.Lock()
	defer b.callerMu.Unlock()
	if b.callers[r.caller] -= n; b.callers[r.caller] <= 0 {
		delete(b.callers, r.caller)
	}
	if r.incoming {
		if b.incoming[r.caller] -= n; b.incoming[r.caller] <= 0 {
			delete(b.incoming, r.caller)
		}
	}
}

// Reserve reserves n bytes for what, waiting at most the budget's wait
// (or until ctx ends) for room.
func (b *Budget) Reserve(ctx context.Context, what string, n int64) (*Reservation, error) {
	r := b.Empty(what)
	if err := r.Resize(ctx, n); err != nil {
		return nil, err
	}
	return r, nil
}

// Empty is a reservation of nothing yet, for what, to Resize later.
func (b *Budget) Empty(what string) *Reservation {
	if b == nil {
		return nil
	}
	return &Reservation{b: b, what: what}
}

// Size is the bytes the reservation holds.
func (r *Reservation) Size() int64 {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// Resize makes the reservation n bytes: growing waits as Reserve does and
// leaves it as it was on failure (an *ExhaustedError, or ctx's error);
// shrinking never fails.
func (r *Reservation) Resize(ctx context.Context, n int64) error {
	return r.resize(ctx, n, r.bWait())
}

// bWait is how long a growth may wait: the budget's wait.
func (r *Reservation) bWait() time.Duration {
	if r == nil {
		return 0
	}
	return r.b.wait
}

// resize is Resize waiting at most wait for room.
func (r *Reservation) resize(ctx context.Context, n int64, wait time.Duration) error {
	if r == nil {
		return nil
	}
	n = max(n, 0)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.holder == nil {
		r.holder = holderFrom(ctx)
	}
	if r.caller == "" && r.n == 0 {
		r.caller, r.incoming = callerFrom(ctx), incomingFrom(ctx)
	}
	b := r.b
	switch {
	case n == r.n:
		return nil
	case n < r.n:
		// Counted out before the pool frees it, so that InUse never
		// shows more than the pools hold.
		r.count(n - r.n)
		if !r.inSmall && r.caller == "" {
			b.noCaller.Add(n - r.n)
		}
		r.pool().release(r.n - n)
		r.giveShare(r.n - n)
		r.n = n
		r.inSmall = r.inSmall && n > 0
		return nil
	case n > r.most() && n > b.smallMax:
		b.refusals.Add(1)
		return &ExhaustedError{What: r.what, Need: n, Limit: r.most(), Unreachable: true}
	}
	if r.closed {
		return &ExhaustedError{What: r.what + " (its work has ended)", Need: n - r.n, Limit: b.limit, InUse: b.inUse.Load()}
	}
	grow := n - r.n
	held, own, err := r.takeShare(grow)
	if err != nil {
		return err
	}
	// A small reservation grows in the small part while it fits there.
	if (r.inSmall || r.n == 0) && n <= b.smallMax && b.small.try(grow) {
		r.inSmall = true
		r.count(grow)
		r.n = n
		return nil
	}
	// Else it is held in the large part, all of it: what it held in the
	// small part is given back once the large part has it all.
	if b.restrict.Load() && (r.caller == "" || own > b.smallMax || held+grow > b.fairShare()) {
		r.giveShare(grow)
		b.refusals.Add(1)
		return &ExhaustedError{What: r.what, Need: grow, Limit: b.limit, InUse: b.inUse.Load()}
	}
	need := grow
	if r.inSmall {
		need = n
	}
	var onWait func(again bool) bool
	if b.onWait != nil && r.caller != "" {
		onWait = func(again bool) bool {
			if again && !b.mayAskAgain(time.Now()) {
				return false
			}
			fair := b.fairShare()
			return held+grow <= fair && b.onWait(fair, need)
		}
	}
	if err := b.large.acquire(ctx, need, wait, held, onWait); err != nil {
		r.giveShare(grow)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		b.refusals.Add(1)
		return &ExhaustedError{What: r.what, Need: grow, Limit: b.limit, InUse: b.inUse.Load()}
	}
	if r.caller == "" {
		b.noCaller.Add(need)
	}
	if r.inSmall {
		b.small.release(r.n)
		r.inSmall = false
	}
	r.count(grow)
	r.n = n
	return nil
}

// most is what the reservation may ever hold: the budget less its small
// part, and no more than its caller's share.
func (r *Reservation) most() int64 {
	b := r.b
	most := b.limit - b.limit/16
	if b.callerMax > 0 && r.caller != "" {
		most = min(most, b.callerMax)
	}
	return most
}

// pool is the part of the budget the reservation holds its bytes in.
func (r *Reservation) pool() *pool {
	if r.inSmall {
		return r.b.small
	}
	return r.b.large
}

// TryResize is Resize without waiting: for a growth decided while a lock
// is held.
func (r *Reservation) TryResize(n int64) error {
	return r.resize(context.Background(), n, 0)
}

// Spare is another reservation of n bytes from the same budget, for
// memory that work needs for a while beside what r holds (decoding a
// state that will replace the one r holds); release it when done. For a
// nil r it is nil.
func (r *Reservation) Spare(ctx context.Context, n int64) (*Reservation, error) {
	if r == nil {
		return nil, nil
	}
	r.mu.Lock()
	caller := r.caller
	r.mu.Unlock()
	s := r.b.Empty(r.what)
	s.caller = caller // in the same caller's share, whatever ctx names
	if err := s.Resize(ctx, n); err != nil {
		return nil, err
	}
	return s, nil
}

// TryResizeFrom is TryResize with the room spare holds (a Spare of r)
// given to r first: r grows by what spare gives up, in the large part,
// and the budget is asked only for the rest, without waiting. The room
// passes from one to the other without going back to the budget, where
// a reservation waiting for room would take it between the two: the
// 16 MB a user's state was decoded in went to the hostile calls waiting,
// and the 15 MB the state then held was refused. What r does not need
// of spare stays in spare; on failure r is as it was.
func (r *Reservation) TryResizeFrom(spare *Reservation, n int64) error {
	if r == nil || spare == nil || spare == r {
		return r.TryResize(n)
	}
	r.mu.Lock()
	was := r.n
	spare.mu.Lock()
	r.takeLocked(spare, n)
	spare.mu.Unlock()
	r.mu.Unlock()
	if err := r.TryResize(n); err != nil {
		_ = r.TryResize(was) // a shrink, or no change: it cannot fail
		return err
	}
	return nil
}

// takeLocked moves to r what spare holds of the large part, up to what r
// needs there to be n bytes: both are of the same budget and caller, so
// that what the budget, the caller's share and the work of no caller
// count is unchanged. r.mu and spare.mu are held.
func (r *Reservation) takeLocked(spare *Reservation, n int64) {
	if r.closed || spare.inSmall || r.b != spare.b || r.caller != spare.caller || r.incoming != spare.incoming || n <= r.n {
		return
	}
	if r.inSmall { // its few bytes leave the small part for n in the large one
		if spare.n < n {
			return
		}
		r.count(-r.n)
		r.b.small.release(r.n)
		r.giveShare(r.n)
		r.n, r.inSmall = 0, false
	}
	k := min(spare.n, n-r.n)
	if k <= 0 {
		return
	}
	spare.count(-k)
	spare.n -= k
	r.count(k)
	r.n += k
}

// Close releases the reservation for good: it cannot grow again (a late
// change of the work it held for is refused), so nothing can be reserved
// that nobody will release.
func (r *Reservation) Close() {
	if r == nil {
		return
	}
	r.Release()
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
}

// Release gives the reservation's bytes back; it may be resized again.
func (r *Reservation) Release() {
	_ = r.Resize(context.Background(), 0)
}

// pool is a count of bytes up to a size. One that arrives takes room at
// once when it fits; room that frees goes to those that wait by rank
// (what their caller holds), the least first, first come among equals,
// each that fits.
type pool struct {
	mu      sync.Mutex
	size    int64
	used    int64
	waiting []*waiter // in the order they came
	kept    []*waiter // those of them room is kept for: few, and none most of the time
}

// waiter is an acquire waiting for room.
type waiter struct {
	n, rank int64
	ready   chan struct{} // closed once granted
	granted bool          // under the pool's mu
	kept    bool          // ... and this: room is kept for it (see grantLocked)
}

func newPool(size int64) *pool { return &pool{size: size} }

// try takes n bytes when they fit, without waiting.
func (p *pool) try(n int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.used+n > p.size {
		return false
	}
	p.used += n
	return true
}

// AskEvery is how often a reservation that waits calls the budget's
// OnWait function again: what it asks for may be refused at first (the
// overload manager preempts once every 50 ms at most, for whichever
// caller asked first) and granted later, or a caller may pass its share
// while it waits. In the hostile mix, a caller within its share that
// asked once waited its whole wait and was refused.
const AskEvery = 50 * time.Millisecond

// AskAgainEvery is how often at most, over the whole budget, a waiting
// reservation asks again (its first ask is never held back): each ask
// shares the large part among the callers (fairShare sorts what each
// holds: 71 µs for 1,000 callers), and a thousand waiters asking every
// AskEvery would spend more than a core on it.
const AskAgainEvery = 5 * time.Millisecond

// mayAskAgain reports whether a waiting reservation may ask again at
// now: AskAgainEvery since the last that did.
func (b *Budget) mayAskAgain(now time.Time) bool {
	last := b.askedAt.Load()
	return now.UnixNano()-last >= int64(AskAgainEvery) && b.askedAt.CompareAndSwap(last, now.UnixNano())
}

// acquire takes n bytes for a caller of rank rank, waiting at most wait
// (or until ctx ends) for room, and calling onWait (when not nil) as it
// starts to wait (again false) and each AskEvery after (again true: what
// one cancellation frees may not be enough, and what another caller
// holds may grow meanwhile); once
// it reports that work was cancelled to free room for this one, the room
// is kept for it. The error is ctx's, or errNoRoom.
func (p *pool) acquire(ctx context.Context, n int64, wait time.Duration, rank int64, onWait func(again bool) bool) error {
	p.mu.Lock()
	if p.used+n <= p.size && !p.keptBeforeLocked(rank) {
		p.used += n
		p.mu.Unlock()
		return nil
	}
	if wait <= 0 {
		p.mu.Unlock()
		return errNoRoom
	}
	if err := ctx.Err(); err != nil {
		p.mu.Unlock()
		return err
	}
	w := &waiter{n: n, rank: rank, ready: make(chan struct{})}
	p.waiting = append(p.waiting, w)
	p.mu.Unlock()
	var again <-chan time.Time
	ask := func(again bool) {
		if onWait(again) {
			p.mu.Lock()
			if !w.granted && !w.kept {
				w.kept = true
				p.kept = append(p.kept, w)
			}
			p.mu.Unlock()
		}
	}
	if onWait != nil {
		t := time.NewTicker(AskEvery)
		defer t.Stop()
		again = t.C
		ask(false)
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var err error
wait:
	for {
		select {
		case <-w.ready:
			return nil
		case <-again:
			ask(true)
		case <-timer.C:
			err = errNoRoom
			break wait
		case <-ctx.Done():
			err = ctx.Err()
			break wait
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if w.granted {
		return nil // granted as it gave up: it holds the room
	}
	p.waiting = slices.DeleteFunc(p.waiting, func(x *waiter) bool { return x == w })
	if w.kept {
		p.unkeepLocked(w)
		p.grantLocked() // what was kept for it goes to the others
	}
	return err
}

// keptBeforeLocked reports whether room is kept for a waiter that comes
// before a reservation of rank: one of that rank or less. p.mu is held.
func (p *pool) keptBeforeLocked(rank int64) bool {
	return slices.ContainsFunc(p.kept, func(w *waiter) bool { return w.rank <= rank })
}

// unkeepLocked forgets a waiter room was kept for. p.mu is held.
func (p *pool) unkeepLocked(w *waiter) {
	p.kept = slices.DeleteFunc(p.kept, func(x *waiter) bool { return x == w })
}

func (p *pool) release(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.used -= n
	p.grantLocked()
}

// grantLocked gives room to the waiters by rank, the least first, first
// come among equals, each that fits. Room is not kept for one that does
// not, unless work was cancelled to free it (OnWait's f said so): a
// caller that holds nothing and asks for more than is free would hold
// every other up. For one it was cancelled for, it is: no waiter after
// it, and no new reservation of its rank or more (acquire), takes what
// frees until it fits. Without that, the room that work cancelled for a
// caller's 16 MB state freed went a megabyte at a time to the calls that
// took the place of the work cancelled, and the state was refused.
func (p *pool) grantLocked() {
	if len(p.waiting) == 0 {
		return
	}
	order := slices.Clone(p.waiting)
	slices.SortStableFunc(order, func(a, b *waiter) int { return cmp.Compare(a.rank, b.rank) })
	for _, w := range order {
		if p.used+w.n > p.size {
			if w.kept {
				break
			}
			continue
		}
		p.used += w.n
		w.granted = true
		if w.kept {
			p.unkeepLocked(w)
		}
		close(w.ready)
	}
	p.waiting = slices.DeleteFunc(p.waiting, func(w *waiter) bool { return w.granted })
}

var errNoRoom = errors.New("no room in the memory budget")
