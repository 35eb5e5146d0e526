package stream

import (
	"context"

	"golang.org/x/sync/errgroup"
)

// Recover is what a stream does with a panic in one of its goroutines:
// the server logs and counts it and returns the status the stream ends
// with (INTERNAL, no stack or text for the client).
type Recover func(ctx context.Context, p any) error

// Group joins the goroutines a handler starts: Go recovers a panic
// (Recover), and Wait returns once every goroutine has returned, with the
// first error.
type Group struct {
	g       errgroup.Group
	recover Recover
	ctx     context.Context
}

// NewGroup is a group whose panics are recovered with ctx.
func NewGroup(ctx context.Context, recover Recover) *Group { return &Group{recover: recover, ctx: ctx} }

// Go runs f in a goroutine of the group.
func (g *Group) Go(f func() error) {
	g.g.Go(func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = g.recover(g.ctx, p)
			}
		}()
		return f()
	})
}

// Wait returns once every goroutine of the group has returned.
func (g *Group) Wait() error { return g.g.Wait() }

// recoveredSend is send for an outbox, whose sender goroutine is not in a
// group: a panic in it is recovered, and ends the stream with Recover's
// status.
func recoveredSend[M any](ctx context.Context, rec Recover, send func(M) error) func(M) error {
	return func(m M) (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = rec(ctx, p)
			}
		}()
		return send(m)
	}
}
