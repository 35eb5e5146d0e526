package stream

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/exprd/exprd/membudget"
)

// A client that sends without reading what it is sent fills its
// flow-control window; from then on every Send on its stream blocks until
// it reads. So no handler or worker sends itself: they queue, and a
// sender goroutine sends, started when there is something to send and
// gone when the queue is empty (an idle stream costs no goroutine for
// it). A full queue makes its producers wait, at most the slow-reader
// timeout; then the stream ends RESOURCE_EXHAUSTED and whatever waited on
// it is let go. What a queue holds past FreeBytes reserves from the
// server's memory budget before it is queued: a queue the budget cannot
// hold within its wait ends the stream RESOURCE_EXHAUSTED (memory_budget),
// so that clients that read slowly cannot together hold more than the
// budget.

// FreeBytes is what a stream's queue may hold without reserving it from
// the memory budget: what a client that reads keeps queued.
const FreeBytes = 256 << 10

// MemoryWhat is what an outbox's reservation is for, as the budget names it.
const MemoryWhat = "the messages queued for a stream"

// ErrSlowReader ends a stream whose client stopped reading.
var ErrSlowReader = errors.New("the client did not read what it was sent")

// ErrEnded refuses a put after close (the handler has returned),
// and a send once the overload interceptor has ended a shed stream.
var ErrEnded = errors.New("the stream has ended")

type queued[M any] struct {
	m M
	n int // its size, counted once
}

// Outbox is a stream's queue of messages to send, sent in the order they
// were put.
type Outbox[M any] struct {
	maxBytes int
	timeout  time.Duration
	size     func(M) int
	send     func(M) error
	onDead   func(error)            // nil, or told once why sending stopped
	mem      *membudget.Reservation // what bytes holds past FreeBytes; nil: none

	putMu   sync.Mutex // serialises puts: they queue in the order they came
	mu      sync.Mutex
	closed  bool        // no put is taken any more
	q       []queued[M] // q[head:] waits; its array is reused from the start once all is sent
	head    int
	bytes   int           // the size of q and of the message being sent
	sending bool          // a sender goroutine is running
	room    chan struct{} // nil, or made by a put that waits: closed when the sender frees room
	drained chan struct{} // nil, or made by close: closed when the sender stops

	dead     chan struct{} // closed when sending stops: ErrSlowReader or a failed Send
	deadOnce sync.Once
	err      error // why, set before dead is closed
}

// NewOutbox queues for send. onDead, when not nil, is called once sending
// stops (ErrSlowReader, or the error of a failed Send): a stream whose
// work must end with it cancels that work there.
func NewOutbox[M any](maxBytes int, timeout time.Duration, size func(M) int, send func(M) error, onDead func(error), mem *membudget.Reservation) *Outbox[M] {
	return &Outbox[M]{maxBytes: maxBytes, timeout: timeout, size: size, send: send, onDead: onDead, mem: mem, dead: make(chan struct{})}
}

// fit shrinks the reservation to what the queue holds past
// FreeBytes. Callers hold mu.
func (o *Outbox[M]) fit() {
	if want := int64(max(0, o.bytes-FreeBytes)); want < o.mem.Size() {
		_ = o.mem.TryResize(want)
	}
}

// run sends what is queued, then stops.
func (o *Outbox[M]) run() {
	for {
		o.mu.Lock()
		if o.head == len(o.q) {
			o.q, o.head = o.q[:0], 0
			o.stop()
			o.mu.Unlock()
			return
		}
		next := o.q[o.head]
		o.q[o.head] = queued[M]{}
		o.head++
		o.mu.Unlock()
		err := o.send(next.m)
		o.mu.Lock()
		o.bytes -= next.n
		if err != nil {
			o.q, o.head, o.bytes = nil, 0, 0 // nobody will read the rest
		}
		o.fit()
		if o.room != nil {
			close(o.room)
			o.room = nil
		}
		if err != nil {
			o.stop()
			o.mu.Unlock()
			o.kill(err)
			return
		}
		o.mu.Unlock()
	}
}

// stop marks the sender gone. Callers hold mu.
func (o *Outbox[M]) stop() {
	o.sending = false
	if o.drained != nil {
		close(o.drained)
		o.drained = nil
	}
}

func (o *Outbox[M]) kill(err error) {
	o.deadOnce.Do(func() {
		o.err = err
		close(o.dead)
		if o.onDead != nil {
			o.onDead(err)
		}
	})
}

// Put queues m, waiting while the queue is full for at most the timeout
// (then the client counts as not reading) or until ctx ends. Puts wait
// their turn: one that waits for room holds up the ones after it.
func (o *Outbox[M]) Put(ctx context.Context, m M) error {
	o.putMu.Lock()
	defer o.putMu.Unlock()
	n := o.size(m)
	var timer *time.Timer
	for {
		select {
		case <-o.dead:
			return o.err
		default:
		}
		o.mu.Lock()
		if o.closed {
			o.mu.Unlock()
			return ErrEnded
		}
		if o.bytes == 0 || o.bytes+n <= o.maxBytes {
			if need := int64(o.bytes + n - FreeBytes); need > o.mem.Size() && o.mem.TryResize(need) != nil {
				// Wait for room in the budget, then look again.
				o.mu.Unlock()
				if err := o.mem.Resize(ctx, need); err != nil {
					if ctx.Err() != nil {
						return ctx.Err()
					}
					o.kill(err)
					return err
				}
				continue
			}
			if o.head > 0 && len(o.q) == cap(o.q) { // move what waits to the front rather than grow
				k := copy(o.q, o.q[o.head:])
				clear(o.q[k:])
				o.q, o.head = o.q[:k], 0
			}
			o.q = append(o.q, queued[M]{m, n})
			o.bytes += n
			if !o.sending {
				o.sending = true
				go o.run()
			}
			o.mu.Unlock()
			return nil
		}
		if o.room == nil {
			o.room = make(chan struct{})
		}
		room := o.room
		o.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(o.timeout)
			defer timer.Stop()
		}
		select {
		case <-room:
		case <-o.dead:
			return o.err
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			o.kill(ErrSlowReader)
			return ErrSlowReader
		}
	}
}

// Dead is closed when the stream can no longer be sent on.
func (o *Outbox[M]) Dead() <-chan struct{} { return o.dead }

// Err says why sending stopped, once Dead is closed.
func (o *Outbox[M]) Err() error {
	select {
	case <-o.dead:
		return o.err // set before dead is closed
	default:
		return nil
	}
}

// Close refuses later puts (ErrEnded) and waits for what is queued
// to be sent, at most the timeout: a client that stops reading at the
// very end cannot hold the handler. A sender still inside Send then is let
// go when the handler returns and gRPC ends the stream.
func (o *Outbox[M]) Close() {
	o.mu.Lock()
	o.closed = true
	if !o.sending {
		o.mu.Unlock()
		return
	}
	if o.drained == nil {
		o.drained = make(chan struct{})
	}
	drained := o.drained
	o.mu.Unlock()
	t := time.NewTimer(o.timeout)
	defer t.Stop()
	select {
	case <-drained:
	case <-o.dead:
	case <-t.C:
		o.kill(ErrSlowReader)
	}
}
