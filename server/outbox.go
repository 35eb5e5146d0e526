package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/exprd/exprd/membudget"
)

// Outbound limits of a stream (Session, CodeMode.Run, AgentLoop.Run). A client that sends without reading
// what it is sent fills its flow-control window; from then on every Send on
// its stream blocks until it reads. So a Session never sends from the
// goroutine that receives, nor from a call's: they queue, and a sender
// goroutine sends, started when there is something to send and gone when
// the queue is empty (an idle session costs no goroutine for it). A queue
// holding DefaultOutboxBytes makes its producers wait, at most the
// slow-reader timeout; then the stream ends RESOURCE_EXHAUSTED and whatever
// waited on it is let go. What a queue holds past OutboxFreeBytes reserves
// from the server's memory budget before it is queued: a queue the budget
// cannot hold within its wait ends the stream RESOURCE_EXHAUSTED
// (memory_budget), so that clients that read slowly cannot together hold
// more than the budget.
const (
	// OutboxFreeBytes is what a stream's queue may hold without
	// reserving it from the memory budget: what a client that reads
	// keeps queued.
	OutboxFreeBytes = 256 << 10
	// DefaultOutboxBytes bounds the bytes queued for a stream; one message
	// larger than it is queued alone.
	DefaultOutboxBytes = 1 << 20
	// DefaultSlowReaderTimeout is how long a stream's queue may stay full
	// before its client counts as not reading.
	DefaultSlowReaderTimeout = 10 * time.Second
)

// outboxWhat is what an outbox's reservation is for, as the budget names it.
const outboxWhat = "the messages queued for a stream"

// errSlowReader ends a stream whose client stopped reading.
var errSlowReader = errors.New("the client did not read what it was sent")

// errStreamEnded refuses a put after close (the handler has returned),
// and a send once the overload interceptor has ended a shed stream.
var errStreamEnded = errors.New("the stream has ended")

type queued[M any] struct {
	m M
	n int // its size, counted once
}

// outbox is a stream's queue of messages to send, sent in the order they
// were put.
type outbox[M any] struct {
	maxBytes int
	timeout  time.Duration
	size     func(M) int
	send     func(M) error
	onDead   func(error)            // nil, or told once why sending stopped
	mem      *membudget.Reservation // what bytes holds past OutboxFreeBytes; nil: none

	putMu   sync.Mutex // serialises puts: they queue in the order they came
	mu      sync.Mutex
	closed  bool        // no put is taken any more
	q       []queued[M] // q[head:] waits; its array is reused from the start once all is sent
	head    int
	bytes   int           // the size of q and of the message being sent
	sending bool          // a sender goroutine is running
	room    chan struct{} // nil, or made by a put that waits: closed when the sender frees room
	drained chan struct{} // nil, or made by close: closed when the sender stops

	dead     chan struct{} // closed when sending stops: errSlowReader or a failed Send
	deadOnce sync.Once
	err      error // why, set before dead is closed
}

// newOutbox queues for send. onDead, when not nil, is called once sending
// stops (errSlowReader, or the error of a failed Send): a stream whose
// work must end with it cancels that work there.
func newOutbox[M any](maxBytes int, timeout time.Duration, size func(M) int, send func(M) error, onDead func(error), mem *membudget.Reservation) *outbox[M] {
	return &outbox[M]{maxBytes: maxBytes, timeout: timeout, size: size, send: send, onDead: onDead, mem: mem, dead: make(chan struct{})}
}

// fit shrinks the reservation to what the queue holds past
// OutboxFreeBytes. Callers hold mu.
func (o *outbox[M]) fit() {
	if want := int64(max(0, o.bytes-OutboxFreeBytes)); want < o.mem.Size() {
		_ = o.mem.TryResize(want)
	}
}

// run sends what is queued, then stops.
func (o *outbox[M]) run() {
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
func (o *outbox[M]) stop() {
	o.sending = false
	if o.drained != nil {
		close(o.drained)
		o.drained = nil
	}
}

func (o *outbox[M]) kill(err error) {
	o.deadOnce.Do(func() {
		o.err = err
		close(o.dead)
		if o.onDead != nil {
			o.onDead(err)
		}
	})
}

// put queues m, waiting while the queue is full for at most the timeout
// (then the client counts as not reading) or until ctx ends. Puts wait
// their turn: one that waits for room holds up the ones after it.
func (o *outbox[M]) put(ctx context.Context, m M) error {
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
			return errStreamEnded
		}
		if o.bytes == 0 || o.bytes+n <= o.maxBytes {
			if need := int64(o.bytes + n - OutboxFreeBytes); need > o.mem.Size() && o.mem.TryResize(need) != nil {
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
			o.kill(errSlowReader)
			return errSlowReader
		}
	}
}

// Dead is closed when the stream can no longer be sent on.
func (o *outbox[M]) Dead() <-chan struct{} { return o.dead }

// close refuses later puts (errStreamEnded) and waits for what is queued
// to be sent, at most the timeout: a client that stops reading at the
// very end cannot hold the handler. A sender still inside Send then is let
// go when the handler returns and gRPC ends the stream.
func (o *outbox[M]) close() {
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
		o.kill(errSlowReader)
	}
}
