package mcptransport

import (
	"context"
	"sync"
	"sync/atomic"
)

// callState is one call in flight: what its answer's readers and its
// notifications found wrong (the first failure, which cancels the call
// so that the SDK stops waiting and tells the server), its progress
// notifications for a stream, and whether the server asked for user input
// meanwhile.
type callState struct {
	cancel context.CancelFunc
	ctx    context.Context // the call's: its user to ask, if any (userinput.AskerOf)
	tool   string          // its full name

	mu  sync.Mutex
	err error

	progress chan any // nil for Call: no progress token is sent
	count    atomic.Int64
	dropped  atomic.Int64
	asked    atomic.Value // string: what the server asked for
}

type callStateKey struct{}

func withCallState(ctx context.Context, st *callState) context.Context {
	return context.WithValue(ctx, callStateKey{}, st)
}

// callStateOf is the call a request is made for; nil for the session's
// own requests (its set-up, tools/list, its GET stream).
func callStateOf(ctx context.Context) *callState {
	st, _ := ctx.Value(callStateKey{}).(*callState)
	return st
}

// fail records the call's first failure and cancels it.
func (s *callState) fail(err error) {
	if s == nil {
		return
	}
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
	s.cancel()
}

func (s *callState) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// askedFor is what the server asked the user for while the call ran ("":
// nothing).
func (s *callState) askedFor() string {
	v, _ := s.asked.Load().(string)
	return v
}
