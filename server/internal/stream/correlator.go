package stream

import (
	"context"
	"errors"
	"strconv"
	"sync"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/server/internal/rpcstatus"
	"google.golang.org/grpc/codes"
)

// ErrClientGone answers what waits for the client after its half-close:
// no reply can come.
var ErrClientGone = errors.New("the client closed its side of the stream")

// ErrAlreadyWaiting refuses a request whose key a request of the same kind
// already waits under (a model that gave two calls of one step the same
// id): the client could not tell their replies apart.
var ErrAlreadyWaiting = errors.New("another request with the same id is waiting for the client's reply")

// Correlator matches the replies a client sends on a bidi stream to the
// server's requests that wait for them, by a key the server chose: one
// correlator per kind of reply (Session's confirms and function results,
// CodeMode's approvals, AgentLoop's tool outputs, hooks and approvals).
// The rule is the API's (exprtool.proto):
//
//   - A reply nobody waits for — late, repeated, or for a key the server
//     never sent — changes nothing: deliver returns NOT_FOUND
//     (REPLY_NOT_AWAITED), which the stream answers with Rejected. A
//     request stops waiting the moment its context ends, so a reply that
//     comes after its timeout is not awaited, even if the waiting
//     goroutine has not yet run.
//   - A reply its request's check refuses is the check's error
//     (INVALID_ARGUMENT), and the request goes on waiting.
//   - The client's half-close (close) answers every request waiting with
//     ErrClientGone, and every later one at once, without sending it.
type Correlator[K comparable, V any] struct {
	notAwaited func(K) string // the NOT_FOUND text for key

	mu      sync.Mutex
	seq     uint64
	waiting map[K]*waiter[V]
	closed  bool
	gone    chan struct{} // closed with closed set
}

// waiter is one request waiting for its reply.
type waiter[V any] struct {
	ctx   context.Context
	reply chan V // buffered: deliver never blocks
	check func(V) error
}

func NewCorrelator[K comparable, V any](notAwaited func(K) string) *Correlator[K, V] {
	return &Correlator[K, V]{notAwaited: notAwaited, waiting: map[K]*waiter[V]{}, gone: make(chan struct{})}
}

// ID returns an id for a new request, unique on the stream: "1", "2", …
func (c *Correlator[K, V]) ID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	return strconv.FormatUint(c.seq, 10)
}

// Ask registers key, sends the request, and waits for its reply, the end
// of ctx, or the client's half-close (ErrClientGone). check, when not
// nil, refuses replies that do not fit. A reply delivered before the
// request stopped waiting is returned, whatever ended the wait after it.
func (c *Correlator[K, V]) Ask(ctx context.Context, key K, check func(V) error, send func() error) (V, error) {
	var zero V
	w := &waiter[V]{ctx: ctx, reply: make(chan V, 1), check: check}
	c.mu.Lock()
	switch {
	case c.closed:
		c.mu.Unlock()
		return zero, ErrClientGone
	case c.waiting[key] != nil:
		c.mu.Unlock()
		return zero, ErrAlreadyWaiting
	}
	c.waiting[key] = w
	c.mu.Unlock()
	if err := send(); err != nil {
		c.forget(key, w)
		return zero, err
	}
	var err error
	select {
	case v := <-w.reply:
		return v, nil
	case <-c.gone:
		err = ErrClientGone
	case <-ctx.Done():
		err = ctx.Err()
	}
	if !c.forget(key, w) {
		return <-w.reply, nil // delivered just before the wait ended
	}
	return zero, err
}

// forget removes w; false when deliver already had (and sent it a reply).
func (c *Correlator[K, V]) forget(key K, w *waiter[V]) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.waiting[key] != w {
		return false
	}
	delete(c.waiting, key)
	return true
}

// Deliver hands v to the request waiting under key: nil, the request's
// check's error, or NOT_FOUND when nobody waits for it.
func (c *Correlator[K, V]) Deliver(key K, v V) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.waiting[key]
	if w == nil || w.ctx.Err() != nil {
		// A request whose context ended waits no more; its goroutine
		// removes it (forget) when it runs.
		return rpcstatus.New(codes.NotFound, c.notAwaited(key), rpcstatus.Info(exprdv1.ErrorReason_REPLY_NOT_AWAITED))
	}
	if w.check != nil {
		if err := w.check(v); err != nil {
			return err
		}
	}
	delete(c.waiting, key)
	w.reply <- v
	return nil
}

// Close is the client's half-close: no reply can come any more. Only the
// stream's receiver calls it, once.
func (c *Correlator[K, V]) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	close(c.gone)
}
