package turnstore

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/exprd/exprd/membudget"
)

// DefaultMemoryBytes is the most a Memory store holds of all its turns'
// events.
const DefaultMemoryBytes = 256 << 20

// MemoryConfig configures a Memory store.
type MemoryConfig struct {
	Limits Limits
	// MaxTotalBytes bounds the events of every turn together; past it
	// the ended turns are dropped, oldest end first, and when none is
	// left the event is refused (turn_store_memory). 0: DefaultMemoryBytes.
	MaxTotalBytes int64
	// Budget, when set, holds what the store holds (its events, and
	// EventOverhead bytes each): past what it can give, the ended turns
	// are dropped as past MaxTotalBytes, and when none is left the event
	// is refused (memory_budget). The store's bytes compete with every
	// other request's, as everything the process holds does.
	Budget *membudget.Budget
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// EventOverhead is what an event holds besides its bytes: its slot and
// its slice's header, rounded up.
const EventOverhead = 64

// Memory is a Store in this process's memory: for one replica. A turn can
// be resumed only on the replica that runs it, and a restart loses every
// turn.
type Memory struct {
	cfg   MemoryConfig
	mu    sync.Mutex
	turns map[string]*memTurn
	bytes int64                  // of every turn's events
	held  int64                  // bytes and EventOverhead an event: what res holds
	res   *membudget.Reservation // held, in cfg.Budget
	swept time.Time              // the last sweep
}

type memTurn struct {
	rec     Record
	events  []Event
	bytes   int64
	ended   bool
	end     []byte
	changed chan struct{} // closed and replaced on each append and at the end
	stop    chan struct{} // closed by Cancel
}

// NewMemory returns an empty Memory store.
func NewMemory(cfg MemoryConfig) (*Memory, error) {
	if err := cfg.Limits.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxTotalBytes <= 0 {
		cfg.MaxTotalBytes = DefaultMemoryBytes
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Memory{cfg: cfg, turns: map[string]*memTurn{}, res: cfg.Budget.Empty("the turn store's events")}, nil
}

// Kind is "memory".
func (m *Memory) Kind() string { return "memory" }

// Limits are the store's limits of a turn.
func (m *Memory) Limits() Limits { return m.cfg.Limits }

// Close drops every turn.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.turns, m.bytes, m.held = map[string]*memTurn{}, 0, 0
	m.res.Release()
	return nil
}

// sweepEvery is how often Create looks for expired turns: a sweep reads
// every turn, and one at each Create made a flood of turns quadratic.
// Get refuses an expired turn meanwhile, and room sweeps when short.
const sweepEvery = time.Second

// sweep drops the turns past their retention or max age. m.mu is held.
func (m *Memory) sweep(now time.Time) {
	m.swept = now
	for id, t := range m.turns {
		if m.cfg.Limits.expired(t.rec, now) {
			m.drop(id, t)
		}
	}
}

func (m *Memory) drop(id string, t *memTurn) {
	m.bytes -= t.bytes
	m.held -= t.bytes + EventOverhead*int64(len(t.events))
	_ = m.res.TryResize(m.held) // a shrink always succeeds
	delete(m.turns, id)
	if !t.ended { // a follower of a dropped running turn must not wait forever
		t.ended = true
		close(t.changed)
	}
}

// Create records a new turn.
func (m *Memory) Create(_ context.Context, id, owner string) error {
	if !ValidID(id) {
		return fmt.Errorf("turn id %q: want 32 lowercase hex digits", id)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.cfg.Now()
	if now.Sub(m.swept) >= sweepEvery {
		m.sweep(now)
	}
	if _, ok := m.turns[id]; ok {
		return fmt.Errorf("turn %s exists", id)
	}
	m.turns[id] = &memTurn{rec: Record{ID: id, Owner: owner, Started: now}, changed: make(chan struct{}), stop: make(chan struct{})}
	return nil
}

// Append records the turn's next event.
func (m *Memory) Append(_ context.Context, id string, ev Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.turns[id]
	if !ok || t.ended {
		return ErrNotFound
	}
	if ev.Seq != t.rec.Last+1 {
		return fmt.Errorf("turn %s: event seq %d after %d", id, ev.Seq, t.rec.Last)
	}
	if err := m.cfg.Limits.Check(len(t.events), t.bytes, len(ev.Data)); err != nil {
		return err
	}
	n := int64(len(ev.Data))
	if err := m.room(n); err != nil {
		return err
	}
	t.events = append(t.events, Event{Seq: ev.Seq, Data: append([]byte(nil), ev.Data...)})
	t.bytes += n
	m.bytes += n
	m.held += n + EventOverhead
	t.rec.Last = ev.Seq
	close(t.changed)
	t.changed = make(chan struct{})
	return nil
}

// room makes room for an event of n bytes, within MaxTotalBytes and the
// budget (whose reservation it grows to hold it and its overhead),
// dropping ended turns oldest end first. m.mu is held.
func (m *Memory) room(n int64) error {
	fits := func() error {
		if m.bytes+n > m.cfg.MaxTotalBytes {
			return &LimitError{Subject: "turn_store_memory", Max: m.cfg.MaxTotalBytes,
				Desc: fmt.Sprintf("the turn store's memory is full of running turns' events, its limit %d bytes (--turn-store-memory-bytes)", m.cfg.MaxTotalBytes)}
		}
		return m.res.TryResize(m.held + n + EventOverhead)
	}
	if fits() == nil {
		return nil
	}
	m.sweep(m.cfg.Now())
	var ended []*memTurn
	for _, t := range m.turns {
		if t.ended {
			ended = append(ended, t)
		}
	}
	sort.Slice(ended, func(i, j int) bool { return ended[i].rec.Ended.Before(ended[j].rec.Ended) })
	err := fits()
	for _, t := range ended {
		if err == nil {
			break
		}
		m.drop(t.rec.ID, t)
		err = fits()
	}
	return err
}

// Cancel records that the turn is to stop.
func (m *Memory) Cancel(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.turns[id]
	if !ok || m.cfg.Limits.expired(t.rec, m.cfg.Now()) {
		return ErrNotFound
	}
	if t.ended || t.rec.Cancelled {
		return nil
	}
	t.rec.Cancelled = true
	close(t.stop)
	return nil
}

// WatchCancel is closed by Cancel.
func (m *Memory) WatchCancel(_ context.Context, id string) <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t, ok := m.turns[id]; ok {
		return t.stop
	}
	return nil // never
}

// End records the turn's end.
func (m *Memory) End(_ context.Context, id string, end []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.turns[id]
	if !ok || t.ended {
		return ErrNotFound
	}
	t.ended, t.end = true, append([]byte(nil), end...)
	t.rec.Ended = m.cfg.Now()
	close(t.changed)
	return nil
}

// Get returns the turn's record.
func (m *Memory) Get(_ context.Context, id string) (Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.turns[id]
	if !ok || m.cfg.Limits.expired(t.rec, m.cfg.Now()) {
		return Record{}, ErrNotFound
	}
	return t.rec, nil
}

// Follow replays the events after after, then follows the new ones.
func (m *Memory) Follow(ctx context.Context, id string, after uint64, fn func(Event) error) ([]byte, error) {
	for {
		m.mu.Lock()
		t, ok := m.turns[id]
		if !ok {
			m.mu.Unlock()
			return nil, ErrNotFound
		}
		var todo []Event
		if after < uint64(len(t.events)) {
			todo = t.events[after:] // events[i] has seq i+1; appends never change what is there
		}
		ended, end, changed := t.ended, t.end, t.changed
		m.mu.Unlock()
		for _, ev := range todo {
			if err := fn(ev); err != nil {
				return nil, err
			}
			after = ev.Seq
		}
		if ended && len(todo) == 0 {
			return end, nil
		}
		if len(todo) > 0 {
			continue // look again before waiting: more may have come
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
