package evaltest

import (
	"context"
	"sync"

	"github.com/exprd/exprd/evaluator"
)

// Host is an [evaluator.Host] that records what a call asked: it replies
// to confirms from a list (accepting past its end) and answers client-run
// functions with [ClientReply], blocking until the context ends for a
// hang. It is safe for concurrent use.
type Host struct {
	mu       sync.Mutex
	replies  []bool
	writes   []evaluator.Write
	confirms []Confirm
	calls    []ClientCall
}

// Confirm is one confirm request.
type Confirm struct {
	Step int
	Text string
}

var _ evaluator.Host = (*Host)(nil)

// NewHost returns a Host replying to confirms with replies, in order.
func NewHost(replies []bool) *Host { return &Host{replies: replies} }

// Write records w.
func (h *Host) Write(_ context.Context, w evaluator.Write) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.writes = append(h.writes, w)
	return nil
}

// Confirm records the request and replies with the next reply.
func (h *Host) Confirm(_ context.Context, step int, text string) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(h.confirms)
	h.confirms = append(h.confirms, Confirm{Step: step, Text: text})
	if n < len(h.replies) {
		return h.replies[n], nil
	}
	return true, nil
}

// CallClient records the call and answers it with ClientReply.
func (h *Host) CallClient(ctx context.Context, name string, args map[string]any) (any, error) {
	h.mu.Lock()
	h.calls = append(h.calls, ClientCall{Name: name, Args: args})
	h.mu.Unlock()
	res, err, hang := ClientReply(name, args)
	if hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return res, err
}

// Writes returns the writes so far, in order.
func (h *Host) Writes() []evaluator.Write {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]evaluator.Write(nil), h.writes...)
}

// Confirms returns the confirm requests so far, in order.
func (h *Host) Confirms() []Confirm {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Confirm(nil), h.confirms...)
}

// ClientCalls returns the client-run calls so far, in order.
func (h *Host) ClientCalls() []ClientCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]ClientCall(nil), h.calls...)
}
