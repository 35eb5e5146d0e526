package evaluator_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/exprd/exprd/evaluator"
	"github.com/exprd/exprd/internal/turns"
	"github.com/exprd/exprd/membudget"
)

// TestStateReservesItsMemory: a state reserves what it holds from the
// memory budget before each change; a change the budget cannot hold is
// refused with the state unchanged, and what a state no longer holds is
// given back.
func TestStateReservesItsMemory(t *testing.T) {
	t.Parallel()
	small := `{"a": "` + strings.Repeat("x", 1000) + `"}`  // ~1.6 KB held (evaluator.Footprint)
	big := `{"a": "` + strings.Repeat("x", 100_000) + `"}` // ~125 KB
	for _, tt := range []struct {
		name    string
		budget  int64
		change  func(*evaluator.State) error
		refused bool
	}{
		{"a state within the budget", 1 << 20, func(st *evaluator.State) error { return st.Replace([]byte(small)) }, false},
		{"a state over the budget", 100_000, func(st *evaluator.State) error { return st.Replace([]byte(big)) }, true},
		{"a patch over the budget", 100_000, func(st *evaluator.State) error { return st.MergePatch([]byte(big)) }, true},
		{"a write over the budget", 4_000, write("scopes.root.b", `"`+strings.Repeat("y", 3_000)+`"`), true},
		{"a write within the budget", 1 << 20, write("scopes.root.b", `"`+strings.Repeat("y", 1_000)+`"`), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := membudget.New(tt.budget, time.Millisecond)
			st := evaluator.NewState()
			mem := b.Empty("state")
			st.UseMemory(mem)
			if err := st.Replace([]byte(`{"kept": 1}`)); err != nil {
				t.Fatal(err)
			}
			err := tt.change(st)
			if !tt.refused {
				if err != nil {
					t.Fatalf("got %v, want the change made", err)
				}
				if mem.Size() == 0 || b.InUse() != mem.Size() {
					t.Errorf("reserved %d, in use %d: want the state's memory reserved", mem.Size(), b.InUse())
				}
				return
			}
			var spent *membudget.ExhaustedError
			var e *evaluator.Error
			switch {
			case errors.As(err, &spent):
			case errors.As(err, &e) && e.Reason == evaluator.BudgetExceeded && strings.Contains(e.Message, "memory budget"):
			default:
				t.Fatalf("got %v, want the memory budget's refusal", err)
			}
			if got := st.Snapshot(); len(got) != 1 || got["kept"] == nil {
				t.Errorf("a refused change changed the state: %v", got)
			}
			if got, want := b.InUse(), mem.Size(); got != want || got > tt.budget {
				t.Errorf("in use %d, reserved %d: want the state's own only", got, want)
			}
		})
	}
}

// TestStateGivesBackWhatItNoLongerHolds: replacing a big state with a
// small one shrinks the reservation.
func TestStateGivesBackWhatItNoLongerHolds(t *testing.T) {
	t.Parallel()
	b := membudget.New(10<<20, time.Millisecond)
	st := evaluator.NewState()
	mem := b.Empty("state")
	st.UseMemory(mem)
	if err := st.Replace([]byte(`{"a": "` + strings.Repeat("x", 100_000) + `"}`)); err != nil {
		t.Fatal(err)
	}
	big := mem.Size()
	if err := st.Replace([]byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if small := mem.Size(); small >= big/100 {
		t.Errorf("reserved %d after the small state, %d before: want it given back", small, big)
	}
	mem.Release()
	if got := b.InUse(); got != 0 {
		t.Errorf("in use %d after Release, want 0", got)
	}
}

// TestStateMemoryUnderConcurrentChanges: a refused Replace running beside
// writes leaves the reservation covering what the state holds.
func TestStateMemoryUnderConcurrentChanges(t *testing.T) {
	t.Parallel()
	b := membudget.New(1<<30, time.Millisecond)
	st := evaluator.NewState()
	mem := b.Empty("state")
	st.UseMemory(mem)
	notAnObject := []byte("[" + strings.Repeat(`"x",`, 50_000) + `"x"]`)
	for i := range 20 {
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = st.Replace(notAnObject)
		}()
		if err := write(fmt.Sprintf("scopes.root.k%d", i), `"`+strings.Repeat("y", 5_000)+`"`)(st); err != nil {
			t.Fatal(err)
		}
		<-done
		if got, min := mem.Size(), evaluator.Footprint(st.Snapshot()); got < min {
			t.Fatalf("round %d: reserved %d for a state holding %d", i, got, min)
		}
	}
}

// TestStateReservesWhatItsValuesTake: decoding a state reserves,
// beforehand, what its values take (evaluator.DecodeReserves, from what
// the JSON holds), not the most its bytes could hold: a state of one 100
// KB string fits a budget whose large part is just that, about 125 KB,
// and is refused one byte under it. Counting 8 bytes a byte of JSON, it
// needed 800 KB; counting a container every two bytes, 4 MB.
func TestStateReservesWhatItsValuesTake(t *testing.T) {
	t.Parallel()
	data := []byte(`{"a": "` + strings.Repeat("x", 100_000) + `"}`)
	need := evaluator.DecodeReserves(data)
	if need > 130_000 {
		t.Fatalf("a 100 KB string reserves %d", need)
	}
	large := func(budget int64) int64 { return budget - budget/16 } // membudget keeps a sixteenth for small reservations
	budget := need
	for large(budget) < need {
		budget++
	}
	for _, tt := range []struct {
		name   string
		budget int64
		fits   bool
	}{
		{"at the estimate", budget, true},
		{"a byte under it", budget - 1, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := membudget.New(tt.budget, time.Millisecond)
			st := evaluator.NewState()
			st.UseMemory(b.Empty("state"))
			err := st.Replace(data)
			if tt.fits != (err == nil) {
				t.Fatalf("budget %d (large part %d, estimate %d): got %v, want fits=%v", tt.budget, large(tt.budget), need, err, tt.fits)
			}
		})
	}
}

// TestStateDecodesOnTheCallersTurn: a caller's state (ReplaceContext,
// MergePatchContext) is decoded on a turn of the Turns its context
// carries, so it waits while every turn is taken, and a request that
// ends meanwhile, or while it decodes, leaves the state and the budget as
// they were, with its context's error.
func TestStateDecodesOnTheCallersTurn(t *testing.T) {
	t.Parallel()
	big := `{"a": [` + strings.Repeat(`"`+strings.Repeat("x", 100)+`",`, 20_000) + `1]}`
	for _, tt := range []struct {
		name   string
		taken  bool // every turn taken by another caller
		cancel bool // the request ended before it began
		change func(*evaluator.State, context.Context) error
		want   error
	}{
		{"a state while every turn is taken", true, false, func(st *evaluator.State, ctx context.Context) error { return st.ReplaceContext(ctx, []byte(big)) }, context.DeadlineExceeded},
		{"a patch while every turn is taken", true, false, func(st *evaluator.State, ctx context.Context) error { return st.MergePatchContext(ctx, []byte(big)) }, context.DeadlineExceeded},
		{"a state of a request that ended", false, true, func(st *evaluator.State, ctx context.Context) error { return st.ReplaceContext(ctx, []byte(big)) }, context.Canceled},
		{"a state on a free turn", false, false, func(st *evaluator.State, ctx context.Context) error { return st.ReplaceContext(ctx, []byte(big)) }, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := membudget.New(1<<30, time.Millisecond)
			st := evaluator.NewState()
			mem := b.Empty("state")
			st.UseMemory(mem)
			if err := st.Replace([]byte(`{"kept": 1}`)); err != nil {
				t.Fatal(err)
			}
			before := b.InUse()
			tr := turns.NewTurns(1)
			if tt.taken {
				if err := tr.Acquire(context.Background(), "other"); err != nil {
					t.Fatal(err)
				}
			}
			wait := time.Minute
			if tt.taken {
				wait = 50 * time.Millisecond
			}
			ctx, cancel := context.WithTimeout(turns.With(membudget.WithCaller(context.Background(), "me"), tr), wait)
			defer cancel()
			if tt.cancel {
				cancel()
			}
			err := tt.change(st, ctx)
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if tt.want == nil {
				if got := st.Snapshot(); got["a"] == nil {
					t.Fatalf("the state was not set: %v", got)
				}
				return
			}
			if got := st.Snapshot(); len(got) != 1 || got["kept"] == nil {
				t.Errorf("the state changed: %v", got)
			}
			if got := b.InUse(); got != before {
				t.Errorf("in use %d after, %d before", got, before)
			}
		})
	}
}

// A state or patch keeps the room it was decoded in: what it holds is
// taken from what decoding reserved, never given back to the budget in
// between, where a reservation waiting for room would take it (a
// hostile caller's, in the hostile mix, and the user's state was then
// refused with its room spent on others).
func TestStateKeepsTheRoomItWasDecodedIn(t *testing.T) {
	t.Parallel()
	data := []byte(`{"items": [` + strings.Repeat(`{"name": "a product", "price": 12.5},`, 2_000) + `{}]}`)
	for _, tt := range []struct {
		name   string
		change func(*evaluator.State) error
	}{
		{"a state", func(st *evaluator.State) error { return st.Replace(data) }},
		{"a patch", func(st *evaluator.State) error { return st.MergePatch(data) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			const limit = 16 << 20
			const large = limit - limit/16
			b := membudget.New(limit, 5*time.Second)
			ctx := func(caller string) context.Context { return membudget.WithCaller(context.Background(), caller) }
			st := evaluator.NewState()
			st.UseMemory(b.EmptyFor(ctx("user"), "the state"))
			decode := evaluator.DecodeReserves(data)
			// The waiter's caller holds 100 KB, others the rest of the
			// large part but a kilobyte.
			if _, err := b.Reserve(ctx("waiter"), "the waiter's first", 100_000); err != nil {
				t.Fatal(err)
			}
			others, err := b.Reserve(ctx("others"), "others'", large-100_000-1<<10)
			if err != nil {
				t.Fatal(err)
			}
			// The waiter waits for nearly what decoding will reserve, and
			// decoding waits after it.
			waited := make(chan error, 1)
			go func() {
				r, err := b.Reserve(ctx("waiter"), "the waiter's more", decode-1<<10)
				r.Release()
				waited <- err
			}()
			waitUntil(t, func() bool { return b.Waiting() == 1 })
			changed := make(chan error, 1)
			go func() { changed <- tt.change(st) }()
			waitUntil(t, func() bool { return b.Waiting() == 2 })
			// The room decoding needs frees: it goes to the user, who holds
			// less, and the waiter waits on.
			if err := others.Resize(ctx("others"), large-100_000-1<<10-decode); err != nil {
				t.Fatal(err)
			}
			if err := <-changed; err != nil {
				t.Fatalf("the change, in the room decoding reserved: %v", err)
			}
			if b.Waiting() != 1 {
				t.Fatal("the waiting reservation was given the decoding's room")
			}
			others.Release()
			if err := <-waited; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// waitUntil waits until cond holds, for 10 s at most.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}
