// Package toolstore keeps the manuals registered over the API where every
// replica of exprd serves them.
//
// A replica's utcp.Registry is what calls, lists and searches read; it
// never waits on a store. A Store sits in front of its writes: Local writes
// the registry alone (one process, the default), Etcd writes a shared etcd
// and applies what any replica wrote, from a consistent snapshot and a
// watch. Manuals the operator loaded before the store opened (the manuals
// directory, the demo) stay per replica and read-only.
package toolstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/exprd/exprd/utcp"
)

// Store registers and removes the manuals written over the API.
type Store interface {
	// Register resolves src (reads, fetches and checks it, as
	// utcp.Registry.Register does) and stores it under name: a manual of
	// that name is a *utcp.AlreadyExistsError unless replace. It returns
	// once the manual is served by this replica.
	Register(ctx context.Context, name string, src utcp.Source, replace bool) (*utcp.Registration, error)
	// Remove removes a manual; an unknown one is a *utcp.NotFoundError.
	// It returns once this replica no longer serves it.
	Remove(ctx context.Context, name string) (*utcp.Registration, error)
	// Operator reports whether the operator loaded the manual of that
	// (sanitised) name on this replica: such a manual is read-only.
	Operator(name string) bool
	// Status says what the replica has applied.
	Status() Status
	// Close stops following the store. The registry stays as it is.
	Close() error
}

// Status is how current a replica's registry is.
type Status struct {
	Store string // "memory" or "etcd"
	// Revision is the store's revision applied (etcd's; 0 in memory).
	Revision int64
	// Synced is when the replica last knew it had every change; the zero
	// time before its first snapshot. A Local store is always in sync.
	Synced time.Time
}

// Staleness is how long ago the replica last knew it was in sync (0 for a
// store that is always in sync).
func (s Status) Staleness(now time.Time) time.Duration {
	if s.Store == "memory" {
		return 0
	}
	return now.Sub(s.Synced)
}

// ErrUnavailable is what a write gets when the shared store cannot be
// reached: nothing was stored, and retrying later may help.
var ErrUnavailable = errors.New("toolstore: the registry store is unavailable")

// UnavailableError says which step could not reach the store.
type UnavailableError struct {
	Op  string
	Err error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("the tool registry's store is unavailable (%s): %v; the change may not have been made: list the manual, or retry", e.Op, e.Err)
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// Is reports whether target is ErrUnavailable.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// Local is a Store of one process: its writes are its registry's. It is
// the default, and what a single replica needs.
type Local struct {
	reg      *utcp.Registry
	operator map[string]bool
}

// NewLocal serves reg's writes; the manuals reg holds now are the
// operator's.
func NewLocal(reg *utcp.Registry) *Local {
	return &Local{reg: reg, operator: operatorManuals(reg)}
}

func operatorManuals(reg *utcp.Registry) map[string]bool {
	out := map[string]bool{}
	for _, m := range reg.Manuals() {
		out[m] = true
	}
	return out
}

// Register implements Store.
func (l *Local) Register(ctx context.Context, name string, src utcp.Source, replace bool) (*utcp.Registration, error) {
	if replace {
		return l.reg.Replace(ctx, name, src)
	}
	return l.reg.Register(ctx, name, src)
}

// Remove implements Store.
func (l *Local) Remove(_ context.Context, name string) (*utcp.Registration, error) {
	return l.reg.Remove(name)
}

// Operator implements Store.
func (l *Local) Operator(name string) bool { return l.operator[name] }

// Status implements Store.
func (l *Local) Status() Status { return Status{Store: "memory", Synced: time.Now()} }

// Close implements Store.
func (l *Local) Close() error { return nil }
