package server

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Outbound limits of a Session stream. A client that sends without reading
// what it is sent fills its flow-control window; from then on every Send on
// its stream blocks until it reads. So a Session never sends from the
// goroutine that receives, nor from a call's: they queue, and one sender
// goroutine sends. A queue holding DefaultOutboxBytes makes its producers
// wait, at most the slow-reader timeout; then the stream ends
// RESOURCE_EXHAUSTED and whatever waited on it is let go.
const (
	// DefaultOutboxBytes bounds the bytes queued for a stream; one message
	// larger than it is queued alone.
	DefaultOutboxBytes = 1 << 20
	// DefaultSlowReaderTimeout is how long a stream's queue may stay full
	// before its client counts as not reading.
	DefaultSlowReaderTimeout = 10 * time.Second
	// outboxMessages bounds the messages queued, however small.
	outboxMessages = 1024
)

// errSlowReader ends a stream whose client stopped reading.
var errSlowReader = errors.New("the client did not read what it was sent")

// outbox is a stream's queue of messages to send and the goroutine that
// sends them, in the order they were put.
type outbox[M any] struct {
	q        chan M
	maxBytes int
	timeout  time.Duration
	size     func(M) int
	send     func(M) error

	mu     sync.Mutex
	queued int           // bytes in q
	room   chan struct{} // closed (and replaced) whenever the sender frees room

	dead     chan struct{} // closed when sending stops: errSlowReader or a failed Send
	deadOnce sync.Once
	err      error // why, set before dead is closed
	done     chan struct{}
}

func newOutbox[M any](maxBytes int, timeout time.Duration, size func(M) int, send func(M) error) *outbox[M] {
	o := &outbox[M]{q: make(chan M, outboxMessages), maxBytes: maxBytes, timeout: timeout, size: size, send: send,
		room: make(chan struct{}), dead: make(chan struct{}), done: make(chan struct{})}
	go o.run()
	return o
}

func (o *outbox[M]) run() {
	defer close(o.done)
	for m := range o.q {
		err := o.send(m)
		o.mu.Lock()
		o.queued -= o.size(m)
		close(o.room)
		o.room = make(chan struct{})
		o.mu.Unlock()
		if err != nil {
			o.kill(err)
			for range o.q { // drop the rest: nobody will read it
			}
			return
		}
	}
}

func (o *outbox[M]) kill(err error) {
	o.deadOnce.Do(func() {
		o.err = err
		close(o.dead)
	})
}

// put queues m, waiting while the queue is full for at most the timeout
// (then the client counts as not reading) or until ctx ends. Callers
// serialise their puts (the session's sendMu).
func (o *outbox[M]) put(ctx context.Context, m M) error {
	n := o.size(m)
	var timer *time.Timer
	for {
		select {
		case <-o.dead:
			return o.err
		default:
		}
		o.mu.Lock()
		if o.queued == 0 || (o.queued+n <= o.maxBytes && len(o.q) < cap(o.q)) {
			o.queued += n
			o.mu.Unlock()
			o.q <- m // there is room: only puts fill q, and they are serialised
			return nil
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

// close ends the queue once no one puts any more, and waits for what is
// queued to be sent, at most the timeout: a client that stops reading at
// the very end cannot hold the handler. A sender still inside Send then is
// let go when the handler returns and gRPC ends the stream.
func (o *outbox[M]) close() {
	close(o.q)
	t := time.NewTimer(o.timeout)
	defer t.Stop()
	select {
	case <-o.done:
	case <-o.dead:
	case <-t.C:
		o.kill(errSlowReader)
	}
}
