package turnstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exprd/exprd/membudget"
	"github.com/exprd/exprd/turnstore"
)

const id1 = "0123456789abcdef0123456789abcdef"

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newMemory(t *testing.T, lim turnstore.Limits, total int64) (*turnstore.Memory, *clock) {
	t.Helper()
	c := &clock{now: time.Unix(1e9, 0)}
	m, err := turnstore.NewMemory(turnstore.MemoryConfig{Limits: lim, MaxTotalBytes: total, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	return m, c
}

// appendN appends n events of size bytes each to id; the first error.
func appendN(st turnstore.Store, id string, from uint64, n, size int) error {
	for i := range n {
		if err := st.Append(context.Background(), id, turnstore.Event{Seq: from + uint64(i), Data: make([]byte, size)}); err != nil {
			return err
		}
	}
	return nil
}

func limitSubject(err error) string {
	var le *turnstore.LimitError
	if errors.As(err, &le) {
		return le.Subject
	}
	return ""
}

// Each limit of a turn: at the limit the events are recorded, one past it
// the event is refused naming the limit, and what was recorded stays.
func TestMemoryLimits(t *testing.T) {
	t.Parallel()
	lim := turnstore.Limits{MaxEvents: 4, MaxBytes: 40, Retention: time.Minute, MaxAge: time.Hour}
	for _, tc := range []struct {
		name        string
		n, size     int
		total       int64
		wantSubject string
	}{
		{"events at the limit", 4, 1, 0, ""},
		{"events one past", 5, 1, 0, "turn_max_events"},
		{"bytes at the limit", 4, 10, 0, ""},
		{"bytes one past", 3, 14, 0, "turn_max_bytes"}, // 42 > 40
		{"store memory at the limit", 4, 10, 40, ""},
		{"store memory one past", 4, 10, 39, "turn_store_memory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, _ := newMemory(t, lim, tc.total)
			ctx := context.Background()
			if err := m.Create(ctx, id1, "alice"); err != nil {
				t.Fatal(err)
			}
			err := appendN(m, id1, 1, tc.n, tc.size)
			if got := limitSubject(err); got != tc.wantSubject || (tc.wantSubject == "" && err != nil) {
				t.Fatalf("got %v (subject %q), want subject %q", err, got, tc.wantSubject)
			}
			if err := m.End(ctx, id1, []byte("end")); err != nil { // the end always fits
				t.Fatal(err)
			}
			var n int
			end, err := m.Follow(ctx, id1, 0, func(turnstore.Event) error { n++; return nil })
			if err != nil || string(end) != "end" {
				t.Fatalf("Follow: %q, %v", end, err)
			}
			if want := min(tc.n, 4); tc.wantSubject == "" && n != want {
				t.Errorf("replayed %d events, want %d", n, want)
			}
		})
	}
}

// An ended turn is kept for its retention, any turn for its max age;
// then it is not found.
func TestMemoryRetention(t *testing.T) {
	t.Parallel()
	lim := turnstore.Limits{MaxEvents: 10, MaxBytes: 100, Retention: time.Minute, MaxAge: time.Hour}
	for _, tc := range []struct {
		name  string
		end   bool
		after time.Duration
		found bool
	}{
		{"ended, at the retention", true, time.Minute, true},
		{"ended, past the retention", true, time.Minute + time.Nanosecond, false},
		{"running, at the max age", false, time.Hour, true},
		{"running, past the max age", false, time.Hour + time.Nanosecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, c := newMemory(t, lim, 0)
			ctx := context.Background()
			if err := m.Create(ctx, id1, "alice"); err != nil {
				t.Fatal(err)
			}
			if tc.end {
				_ = m.End(ctx, id1, nil)
			}
			c.add(tc.after)
			_, err := m.Get(ctx, id1)
			if found := err == nil; found != tc.found || (!found && !errors.Is(err, turnstore.ErrNotFound)) {
				t.Fatalf("Get after %s: %v, want found %v", tc.after, err, tc.found)
			}
		})
	}
}

// Past the store's memory, the ended turns are dropped oldest first to
// make room for a running one's events.
func TestMemoryDropsEndedTurnsFirst(t *testing.T) {
	t.Parallel()
	lim := turnstore.Limits{MaxEvents: 10, MaxBytes: 100, Retention: time.Minute, MaxAge: time.Hour}
	m, c := newMemory(t, lim, 30)
	ctx := context.Background()
	ids := []string{strings.Repeat("a", 32), strings.Repeat("b", 32), strings.Repeat("c", 32)}
	for _, id := range ids[:2] {
		if err := m.Create(ctx, id, "alice"); err != nil {
			t.Fatal(err)
		}
		if err := appendN(m, id, 1, 1, 10); err != nil {
			t.Fatal(err)
		}
		_ = m.End(ctx, id, nil)
		c.add(time.Second)
	}
	_ = m.Create(ctx, ids[2], "alice")
	if err := appendN(m, ids[2], 1, 2, 10); err != nil { // 40 bytes: the oldest ended turn goes
		t.Fatal(err)
	}
	for i, want := range []bool{false, true, true} {
		if _, err := m.Get(ctx, ids[i]); (err == nil) != want {
			t.Errorf("turn %d: %v, want found %v", i, err, want)
		}
	}
}

// Follow replays what was recorded after a seq, then what comes, to the
// end: every event once, in order.
func TestMemoryFollow(t *testing.T) {
	t.Parallel()
	m, _ := newMemory(t, turnstore.DefaultLimits(), 0)
	ctx := context.Background()
	_ = m.Create(ctx, id1, "alice")
	if err := appendN(m, id1, 1, 5, 3); err != nil {
		t.Fatal(err)
	}
	for _, after := range []uint64{0, 2, 5, 7} {
		t.Run(fmt.Sprint("after ", after), func(t *testing.T) {
			got := make(chan uint64, 100)
			done := make(chan error, 1)
			fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			go func() {
				_, err := m.Follow(fctx, id1, after, func(ev turnstore.Event) error { got <- ev.Seq; return nil })
				done <- err
			}()
			next := after + 1
			for ; next <= 5; next++ {
				if s := <-got; s != next {
					t.Fatalf("got seq %d, want %d", s, next)
				}
			}
			select {
			case err := <-done:
				t.Fatalf("Follow ended before the turn: %v", err)
			case <-time.After(20 * time.Millisecond):
			}
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("Follow: %v, want it cancelled", err)
			}
		})
	}
	// New events reach a follower; the end ends it.
	got := make(chan uint64, 100)
	done := make(chan error, 1)
	go func() {
		_, err := m.Follow(ctx, id1, 4, func(ev turnstore.Event) error { got <- ev.Seq; return nil })
		done <- err
	}()
	if err := appendN(m, id1, 6, 3, 3); err != nil {
		t.Fatal(err)
	}
	_ = m.End(ctx, id1, nil)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	close(got)
	want := uint64(5)
	for s := range got {
		if s != want {
			t.Fatalf("got seq %d, want %d", s, want)
		}
		want++
	}
	if want != 9 {
		t.Fatalf("followed to seq %d, want 8", want-1)
	}
}

// Bad appends: out of order, to an unknown or ended turn; bad ids.
func TestMemoryRefuses(t *testing.T) {
	t.Parallel()
	m, _ := newMemory(t, turnstore.DefaultLimits(), 0)
	ctx := context.Background()
	if err := m.Create(ctx, "a.>", "alice"); err == nil {
		t.Error("Create took a subject wildcard as an id")
	}
	_ = m.Create(ctx, id1, "alice")
	if err := m.Create(ctx, id1, "bob"); err == nil {
		t.Error("Create took an id twice")
	}
	if err := m.Append(ctx, id1, turnstore.Event{Seq: 2}); err == nil {
		t.Error("Append took seq 2 first")
	}
	if err := m.Append(ctx, strings.Repeat("f", 32), turnstore.Event{Seq: 1}); !errors.Is(err, turnstore.ErrNotFound) {
		t.Errorf("Append to an unknown turn: %v", err)
	}
	_ = m.End(ctx, id1, nil)
	if err := m.Append(ctx, id1, turnstore.Event{Seq: 1}); !errors.Is(err, turnstore.ErrNotFound) {
		t.Errorf("Append after the end: %v", err)
	}
}

// With a memory budget the store's events and their overhead are held in
// it: at what the budget gives they are recorded; one past it an ended
// turn is dropped to make room, its reservation given back; with none to
// drop the event is refused with the budget's error, and nothing else
// changes.
func TestMemoryHoldsItsBytesInTheBudget(t *testing.T) {
	t.Parallel()
	lim := turnstore.Limits{MaxEvents: 100, MaxBytes: 1 << 20, Retention: time.Minute, MaxAge: time.Hour}
	const event = 1000
	perEvent := int64(event + turnstore.EventOverhead)
	budget := membudget.New(1<<20, time.Millisecond)
	// Others hold all of the budget's large part but four events (in two
	// reservations: one may hold at most most of it).
	large := budget.Limit() - budget.Limit()/16 // what the small part (a sixteenth) leaves
	half := (large - 4*perEvent) / 2
	o1, err := budget.Reserve(context.Background(), "others", half)
	if err != nil {
		t.Fatal(err)
	}
	defer o1.Release()
	o2, err := budget.Reserve(context.Background(), "others", large-4*perEvent-half)
	if err != nil {
		t.Fatal(err)
	}
	defer o2.Release()
	others := struct{ size int64 }{o1.Size() + o2.Size()}
	m, err := turnstore.NewMemory(turnstore.MemoryConfig{Limits: lim, Budget: budget})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, b, c := strings.Repeat("a", 32), strings.Repeat("b", 32), strings.Repeat("c", 32)
	_ = m.Create(ctx, a, "alice")
	if err := appendN(m, a, 1, 2, event); err != nil { // two of the budget's four
		t.Fatal(err)
	}
	_ = m.End(ctx, a, nil)
	_ = m.Create(ctx, b, "alice")
	if err := appendN(m, b, 1, 2, event); err != nil { // at what the budget gives
		t.Fatalf("at the budget: %v", err)
	}
	if got := budget.InUse() - others.size; got != 4*perEvent {
		t.Fatalf("the store holds %d of the budget, want %d", got, 4*perEvent)
	}
	_ = m.Create(ctx, c, "alice")
	if err := appendN(m, c, 1, 1, event); err != nil { // one past: a's ended turn goes
		t.Fatalf("one past the budget with an ended turn to drop: %v", err)
	}
	if _, err := m.Get(ctx, a); !errors.Is(err, turnstore.ErrNotFound) {
		t.Errorf("the ended turn: %v, want dropped", err)
	}
	if got := budget.InUse() - others.size; got != 3*perEvent {
		t.Errorf("the store holds %d of the budget after the drop, want %d", got, 3*perEvent)
	}
	_ = appendN(m, c, 2, 1, event) // at the budget again
	var spent *membudget.ExhaustedError
	if err := appendN(m, b, 3, 1, event); !errors.As(err, &spent) {
		t.Fatalf("one past the budget with nothing to drop: %v, want the budget's refusal", err)
	}
	if r, err := m.Get(ctx, b); err != nil || r.Last != 2 {
		t.Errorf("the refused turn: %+v, %v; want its two events kept", r, err)
	}
	_ = m.Close()
	if got := budget.InUse() - others.size; got != 0 {
		t.Errorf("after Close the store holds %d of the budget", got)
	}
}

// Cancel records a stop for a running turn and closes its watch; for an
// ended turn it changes nothing; for an unknown one it is ErrNotFound.
func TestMemoryCancel(t *testing.T) {
	t.Parallel()
	m, _ := newMemory(t, turnstore.DefaultLimits(), 0)
	ctx := context.Background()
	running, ended := strings.Repeat("a", 32), strings.Repeat("b", 32)
	for _, id := range []string{running, ended} {
		if err := m.Create(ctx, id, "alice"); err != nil {
			t.Fatal(err)
		}
	}
	_ = m.End(ctx, ended, nil)
	watch := m.WatchCancel(ctx, running)
	select {
	case <-watch:
		t.Fatal("the watch is closed before any Cancel")
	default:
	}
	for _, tc := range []struct {
		name, id  string
		err       error
		cancelled bool
	}{
		{"a running turn", running, nil, true},
		{"the same again", running, nil, true},
		{"an ended turn", ended, nil, false},
		{"an unknown turn", strings.Repeat("c", 32), turnstore.ErrNotFound, false},
	} {
		if err := m.Cancel(ctx, tc.id); !errors.Is(err, tc.err) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
		}
		if rec, err := m.Get(ctx, tc.id); err == nil && rec.Cancelled != tc.cancelled {
			t.Errorf("%s: cancelled %v, want %v", tc.name, rec.Cancelled, tc.cancelled)
		}
	}
	select {
	case <-watch:
	case <-time.After(5 * time.Second):
		t.Fatal("the running turn's watch was not closed by its Cancel")
	}
	select {
	case <-m.WatchCancel(ctx, ended):
		t.Error("the ended turn's watch is closed: it was not cancelled")
	default:
	}
}
