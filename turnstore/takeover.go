package turnstore

import (
	"context"
	"errors"
	"time"
)

// DefaultLease is how long a turn's lease lasts after its last renewal:
// a turn whose replica stopped is taken over by another within it (and
// the time the store takes to notice the lease lapsed).
const DefaultLease = 15 * time.Second

// DefaultMaxTakeovers bounds how many times a turn is taken over: one
// whose replicas keep stopping (a turn that takes its replica down) ends
// instead.
const DefaultMaxTakeovers = 3

// Takeover lets another replica go on with a turn whose replica stopped.
// A store shared by replicas implements it (NATS); in one replica's
// memory a turn stops with its replica.
//
// The replica running a turn holds a lease on it and renews it; it
// records in the turn's journal what it needs to go on from (the
// server's encoding: the turn's start, the model's replies, tool
// results, each step's history and state), each entry before what
// depends on it. When the lease lapses, a replica that sees it takes the
// lease, adopts the turn (Adopt) and goes on from its journal.
type Takeover interface {
	// Acquire takes the lease on turn id for holder; ErrLeaseHeld when
	// another holds it.
	Acquire(ctx context.Context, id, holder string) (*Lease, error)
	// WatchLapsed calls fn with the id of each turn whose lease lapsed,
	// and, as it starts, with each running turn that holds none (its
	// replica stopped while none watched), until ctx ends. fn runs on the
	// watch's goroutine: it must not block.
	WatchLapsed(ctx context.Context, fn func(id string)) error
	// Adopt makes this process the writer of a turn another created, as
	// Create does for a new one: its events and bytes so far counted, its
	// appends going on after its last event. It counts the takeover and
	// returns how many the turn has had, this one included.
	Adopt(ctx context.Context, id string) (takeovers int, err error)
	// Journal appends entry to the turn's journal. Over the turn's limits
	// (its journal and events together) it records nothing and returns a
	// *LimitError.
	Journal(ctx context.Context, id string, entry []byte) error
	// ReadJournal returns the turn's journal, in the order written.
	ReadJournal(ctx context.Context, id string) ([][]byte, error)
	// LeaseTTL is how long a lease lasts after its last renewal.
	LeaseTTL() time.Duration
}

// ErrLeaseHeld is a lease another holder has.
var ErrLeaseHeld = errors.New("another replica holds the turn's lease")

// ErrLeaseLost is a lease that lapsed and was taken by another: the turn
// runs elsewhere now, and its old holder must stop it, recording nothing.
var ErrLeaseLost = errors.New("the turn's lease lapsed and another replica took it")

// Lease is a turn's lease, held by one replica.
type Lease struct {
	renew    func(ctx context.Context) error
	release  func(ctx context.Context) error
	handOver func(ctx context.Context) error
}

// Renew renews the lease for another LeaseTTL; ErrLeaseLost when it
// lapsed and another took it.
func (l *Lease) Renew(ctx context.Context) error { return l.renew(ctx) }

// Release gives the lease up (the turn has ended): no replica takes the
// turn over.
func (l *Lease) Release(ctx context.Context) error { return l.release(ctx) }

// HandOver gives the lease up for another replica to take the turn over
// at once (this one stops): the watches see it as a lapsed lease.
func (l *Lease) HandOver(ctx context.Context) error { return l.handOver(ctx) }
