// Package turnstore keeps the events of AgentLoop turns, so that a client
// can resume a turn after its stream dropped: on the replica running the
// turn, or on any replica sharing the store. Two implementations: Memory
// (one replica: a turn can be resumed only where it runs, and a restart
// loses every turn) and NATS (a JetStream stream of events and a
// key-value bucket of turn records, shared by every replica).
//
// A turn is created by the replica that runs it, which then appends its
// events in seq order (1, 2, ...) and finally its end. Readers follow a
// turn: the events after a seq, then the new ones as they are appended,
// until the end.
package turnstore

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// Defaults of Limits.
const (
	DefaultMaxEvents = 65536
	DefaultMaxBytes  = 16 << 20
	// DefaultRetention is how long an ended turn can be replayed.
	DefaultRetention = 15 * time.Minute
	// DefaultMaxAge is how long any turn is kept from its start, ended or
	// not: more than the longest turn (--agent-max-turn-timeout, 30
	// minutes) plus its retention.
	DefaultMaxAge = 2 * time.Hour
)

// Limits bound what one turn stores.
type Limits struct {
	// MaxEvents is the most events a turn may record (its end record is
	// not an event: it always fits).
	MaxEvents int
	// MaxBytes is the most bytes its events may hold, in all.
	MaxBytes int64
	// Retention is how long an ended turn is kept after its end.
	Retention time.Duration
	// MaxAge is how long a turn is kept after its start, whatever its
	// state.
	MaxAge time.Duration
}

// DefaultLimits are the defaults above.
func DefaultLimits() Limits {
	return Limits{MaxEvents: DefaultMaxEvents, MaxBytes: DefaultMaxBytes, Retention: DefaultRetention, MaxAge: DefaultMaxAge}
}

// Validate says what is wrong with l, naming the flag of each field.
func (l Limits) Validate() error {
	switch {
	case l.MaxEvents <= 0:
		return fmt.Errorf("turn-max-events %d: want at least 1", l.MaxEvents)
	case l.MaxBytes <= 0:
		return fmt.Errorf("turn-max-bytes %d: want at least 1", l.MaxBytes)
	case l.Retention <= 0:
		return fmt.Errorf("turn-retention %s: want a positive duration", l.Retention)
	case l.MaxAge < l.Retention:
		return fmt.Errorf("turn-max-age %s: want at least turn-retention (%s)", l.MaxAge, l.Retention)
	}
	return nil
}

// Event is one recorded event of a turn: its seq and its bytes (the
// server's encoding of the event).
type Event struct {
	Seq  uint64
	Data []byte
}

// Record is what the store knows of a turn.
type Record struct {
	ID      string
	Owner   string // who may read it: the identity that started it
	Started time.Time
	Ended   time.Time // zero while it runs
	Last    uint64    // the seq of its last event (0: none yet)
	// Cancelled says a stop was asked for (Cancel), whichever replica
	// asked: the replica running the turn stops it (WatchCancel).
	Cancelled bool
}

// Store keeps turns. Its methods are safe for concurrent use.
type Store interface {
	// Create records a new turn, owned by owner.
	Create(ctx context.Context, id, owner string) error
	// Append records the turn's next event, whose Seq must be Last+1.
	// Over a limit it records nothing and returns a *LimitError.
	Append(ctx context.Context, id string, ev Event) error
	// End records the turn's end: end is the server's encoding of how it
	// ended (empty after its last event said so). Nothing is appended
	// after.
	End(ctx context.Context, id string, end []byte) error
	// Get returns the turn's record; ErrNotFound for an unknown turn, or
	// one past its retention or max age.
	Get(ctx context.Context, id string) (Record, error)
	// Follow calls fn with each event after the seq after, in order,
	// then with each new one as it is appended, until the turn's end,
	// which it returns; or until ctx ends or fn fails (their error).
	Follow(ctx context.Context, id string, after uint64, fn func(Event) error) (end []byte, err error)
	// Cancel records that the turn is to stop, before anything stops it:
	// the replica running it learns of it by WatchCancel. A turn that has
	// ended is left as it is; ErrNotFound for an unknown turn.
	Cancel(ctx context.Context, id string) error
	// WatchCancel is closed once a stop is recorded for the turn (at once
	// if one already is), or never, until ctx ends. The replica running
	// the turn watches it for as long as it runs.
	WatchCancel(ctx context.Context, id string) <-chan struct{}
	// Kind names the implementation: "memory" or "nats".
	Kind() string
	// Limits are what one turn may store.
	Limits() Limits
	Close() error
}

// ErrNotFound is a turn the store does not hold.
var ErrNotFound = errors.New("no such turn")

// ErrUnavailable wraps a failure to reach the store.
var ErrUnavailable = errors.New("the turn store is unavailable")

// LimitError is an event that would take a turn (or the store) over a
// limit.
type LimitError struct {
	Subject string // turn_max_events, turn_max_bytes, turn_store_memory
	Max     int64
	Desc    string
}

func (e *LimitError) Error() string { return e.Desc }

// idPattern is a turn id: 32 lowercase hex digits. Only such ids reach a
// store (a NATS subject or key must not hold wildcards or dots).
var idPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// ValidID says whether id can be a turn id.
func ValidID(id string) bool { return idPattern.MatchString(id) }

// expired says whether a turn of r is past its retention or max age at now.
func (l Limits) expired(r Record, now time.Time) bool {
	return now.Sub(r.Started) > l.MaxAge || (!r.Ended.IsZero() && now.Sub(r.Ended) > l.Retention)
}

// Check is the limit an event of n bytes would take a turn of events
// events and bytes bytes over, or nil.
func (l Limits) Check(events int, bytes int64, n int) error {
	if events+1 > l.MaxEvents {
		return &LimitError{Subject: "turn_max_events", Max: int64(l.MaxEvents),
			Desc: fmt.Sprintf("the turn has recorded %d events, its limit (--turn-max-events)", events)}
	}
	if bytes+int64(n) > l.MaxBytes {
		return &LimitError{Subject: "turn_max_bytes", Max: l.MaxBytes,
			Desc: fmt.Sprintf("the turn's events would hold %d bytes, over its limit of %d (--turn-max-bytes)", bytes+int64(n), l.MaxBytes)}
	}
	return nil
}
