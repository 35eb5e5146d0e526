package turnstore

import (
	"context"
	"errors"
)

// Relay carries the messages of a stream that resumed a turn on one
// replica to the replica running it, and that replica's answers: a
// client's replies to the turn's requests, and the questions the resumed
// stream asks (which requests still wait). A store shared by replicas
// implements it (NATS); in one replica's memory every turn runs where it
// is resumed, and nothing needs carrying.
//
// What a message holds is the server's: the relay carries bytes, each
// message and answer at most MaxRelayBytes, one answer a message, with
// the owner's identity the resuming replica checked (the runner checks it
// again against its turn).
type Relay interface {
	// ServeTurn answers the messages sent to turn id with fn, one at a
	// time, until stop: the replica running the turn serves it for as long
	// as it runs. fn must not block: it runs on the relay's goroutine.
	ServeTurn(id string, fn func(owner string, data []byte) []byte) (stop func(), err error)
	// AskTurn sends data to the replica serving turn id and returns its
	// answer; ErrNotRunning when no replica serves it (the turn has ended,
	// or its replica stopped), ErrUnavailable when none answered in time.
	AskTurn(ctx context.Context, id, owner string, data []byte) ([]byte, error)
	// MaxRelayBytes is the most a message or an answer may hold.
	MaxRelayBytes() int
}

// ErrNotRunning is a turn no replica serves.
var ErrNotRunning = errors.New("no replica runs the turn")
