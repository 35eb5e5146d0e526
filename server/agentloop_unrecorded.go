package server

// A turn whose store is out of reach goes on, not durable. What it could
// not record (its events, its journal entries, its end, its lease's
// release) is kept in the order it was written, within the turn's limits
// and the memory budget, and written when the store is back; the client
// hears of both changes (TurnDurability). A new turn is not started
// without its store: Create, Acquire and the journal's start are not
// kept.

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/membudget"
	"github.com/exprd/exprd/server/internal/stream"
	"github.com/exprd/exprd/turnstore"
)

// The flush of what a turn kept is tried again after a wait that doubles
// from unrecordedFirstWait to unrecordedMaxWait.
const (
	unrecordedFirstWait = 250 * time.Millisecond
	unrecordedMaxWait   = 5 * time.Second
)

// storeWrite is one write of a turn to its store.
type storeWrite struct {
	op  string // its name in the store's latency metric: append, journal, end, release
	n   int    // the bytes it holds
	end bool   // the turn's end: nothing is written after it but its lease's release
	do  func(ctx context.Context) error
}

// unrecorded is a turn's writes kept while its store is out of reach.
type unrecorded struct {
	// stopped is the server's stop: what is kept then is lost.
	stopped context.Context
	log     *slog.Logger
	limits  turnstore.Limits
	mem     *membudget.Reservation // holds bytes

	mu   sync.Mutex
	kept []storeWrite
	// events and bytes are what the turn wrote or kept, as its store
	// counts them for its limits; keptBytes are those kept.
	events           int
	bytes, keptBytes int64
	keeping          bool  // the store is out of reach: writes are kept, and flushed
	noticeDue        bool  // keeping began: the client is to hear of it (sendMu)
	ended            bool  // the turn's end is kept: no TurnDurability follows
	failed           error // a kept write the store refused: nothing more is written
	reason           string
}

// useStore makes the turn record in st, keeping what st cannot take while
// it is out of reach (in budget's memory) until the server stops.
func (t *turn) useStore(a *agentLoop) {
	st := a.s.opts.turnStore
	t.log = st
	if st.Kind() == "memory" {
		// A map's append: never out of reach, and no latency worth a
		// histogram's record an event. Its writes are done at once.
		return
	}
	t.m = a.s.metrics
	t.unrec = &unrecorded{stopped: a.stopped, log: a.s.opts.logger, limits: st.Limits(), events: int(t.seq), // a turn taken over has events
		mem: a.s.opts.memory.EmptyFor(t.ctx, "a turn's writes kept while its store is out of reach")}
}

// write does w, or keeps it when the store is out of reach (or writes
// before it are kept): the turn goes on, not durable, and its kept writes
// are flushed, in order, once the store is back. A write that cannot be
// kept (past the turn's limits or the memory budget) fails as a refused
// one does.
func (t *turn) write(w storeWrite) error {
	u := t.unrec
	if u == nil { // a store never out of reach
		return t.do(context.WithoutCancel(t.ctx), w)
	}
	u.mu.Lock()
	if u.keeping || u.failed != nil {
		defer u.mu.Unlock()
		return u.keep(w)
	}
	u.mu.Unlock()
	err := t.do(context.WithoutCancel(t.ctx), w)
	u.mu.Lock()
	defer u.mu.Unlock()
	if err == nil {
		u.count(w)
	}
	if !errors.Is(err, turnstore.ErrUnavailable) {
		return err
	}
	if kerr := u.keep(w); kerr != nil {
		return kerr
	}
	if !u.keeping {
		u.keeping, u.noticeDue = true, true
		// The store's own words (its addresses) are the operator's, in the
		// log; the client is told what it means for the turn.
		u.log.Warn("agentloop: the turn store is out of reach: the turn goes on, keeping what it cannot record", "turn", t.id, "err", err)
		u.reason = "the turn store is out of reach: the turn goes on, and what it could not record is kept on this replica until the store is back"
		go t.flush()
	}
	return nil
}

// count adds w to what the turn wrote. u.mu is held.
func (u *unrecorded) count(w storeWrite) {
	if w.op == "append" {
		u.events++
	}
	u.bytes += int64(w.n)
}

// do writes w now.
func (t *turn) do(ctx context.Context, w storeWrite) error {
	defer t.m.storeOp(ctx, w.op, time.Now())
	return w.do(ctx)
}

// keep adds w to the kept writes. u.mu is held.
func (u *unrecorded) keep(w storeWrite) error {
	if u.failed != nil {
		return u.failed
	}
	if w.op == "append" {
		if err := u.limits.Check(u.events, u.bytes, w.n); err != nil {
			return err
		}
	} else if err := u.limits.Check(0, u.bytes, w.n); err != nil {
		return err
	}
	if err := u.mem.TryResize(u.keptBytes + int64(w.n)); err != nil {
		return err
	}
	u.kept = append(u.kept, w)
	u.keptBytes += int64(w.n)
	u.count(w)
	u.ended = u.ended || w.end
	return nil
}

// flush writes the kept writes, in order, trying again while the store is
// out of reach, until none is left (the turn is durable again) or the
// server stops (they are lost, and the turn with them). A write the store
// refuses otherwise (the lease another replica took, a limit) ends the
// turn, as it does when written at once.
func (t *turn) flush() {
	u := t.unrec
	t.sendMu.Lock()
	t.noticeIfDue()
	t.sendMu.Unlock()
	ctx := context.WithoutCancel(t.ctx)
	wait := unrecordedFirstWait
	for {
		u.mu.Lock()
		if len(u.kept) == 0 {
			u.keeping = false
			ended := u.ended
			u.mu.Unlock()
			if !ended {
				t.notice(true, "")
			}
			return
		}
		w := u.kept[0]
		u.mu.Unlock()
		err := t.do(ctx, w)
		switch {
		case err == nil:
			u.mu.Lock()
			u.kept[0] = storeWrite{}
			u.kept = u.kept[1:]
			u.keptBytes -= int64(w.n)
			_ = u.mem.TryResize(u.keptBytes) // smaller: it does not fail
			u.mu.Unlock()
			wait = unrecordedFirstWait
			continue
		case errors.Is(err, turnstore.ErrUnavailable):
			select {
			case <-u.stopped.Done():
				err = errServerStopping
			case <-time.After(wait):
				wait = min(2*wait, unrecordedMaxWait)
				continue
			}
		}
		u.mu.Lock()
		u.failed, u.kept, u.keptBytes = err, nil, 0
		_ = u.mem.TryResize(0)
		u.mu.Unlock()
		var se *stream.Error
		switch {
		case errors.Is(err, turnstore.ErrLeaseLost):
			t.cancel(errLeaseLost)
		case errors.As(err, &se):
			t.cancel(err)
		default:
			t.cancel(&stream.Error{Status: turnStoreStatus(err)})
		}
		return
	}
}

// notice tells the client whether the turn is durable, unless Start
// omitted it; nothing after the turn's done.
func (t *turn) notice(durable bool, reason string) {
	if t.omit.has(exprdv1.AgentEvent_AGENT_EVENT_DURABILITY) {
		return
	}
	_ = t.send(durabilityEvent(durable, reason))
}

func durabilityEvent(durable bool, reason string) *exprdv1.AgentLoopRunResponse {
	return &exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_Durability{Durability: &exprdv1.TurnDurability{Durable: durable, Reason: reason}}}
}

// noticeIfDue tells the client the turn is not durable, once keeping
// began: right after the event whose write began it, or from the flush
// when a journal entry's did. t.sendMu is held.
func (t *turn) noticeIfDue() {
	u := t.unrec
	if u == nil {
		return
	}
	u.mu.Lock()
	due := u.noticeDue
	u.noticeDue = false
	reason := u.reason
	u.mu.Unlock()
	if due && !t.omit.has(exprdv1.AgentEvent_AGENT_EVENT_DURABILITY) {
		_ = t.emit(durabilityEvent(false, reason), false)
	}
}

// durable says whether the turn's writes reach its store (not kept).
func (t *turn) durable() bool {
	u := t.unrec
	if u == nil {
		return true
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return !u.keeping
}
