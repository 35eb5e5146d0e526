package server

import (
	"context"

	"golang.org/x/sync/errgroup"
)

// group joins the goroutines a handler starts: Go recovers a panic (logged
// and counted as the recovery interceptor does, errInternal for the rest),
// and Wait returns once every goroutine has returned, with the first
// error.
type group struct {
	g   errgroup.Group
	s   *Server
	ctx context.Context
}

func (s *Server) group(ctx context.Context) *group { return &group{s: s, ctx: ctx} }

func (g *group) Go(f func() error) {
	g.g.Go(func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = g.s.recovered(g.ctx, p)
			}
		}()
		return f()
	})
}

func (g *group) Wait() error { return g.g.Wait() }

// recoveredSend is send for an outbox, whose sender goroutine is not in a
// group: a panic in it is logged and counted, and ends the stream
// INTERNAL.
func recoveredSend[M any](ctx context.Context, s *Server, send func(M) error) func(M) error {
	return func(m M) (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = s.recovered(ctx, p)
			}
		}()
		return send(m)
	}
}
