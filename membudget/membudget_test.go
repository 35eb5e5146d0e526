package membudget_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exprd/exprd/membudget"
)

// The budgets of the tests are 1600 bytes: 1500 for large reservations,
// 100 kept for small ones (at most 1 byte each: 1600/1024).
func TestReserve(t *testing.T) {
	for _, tt := range []struct {
		name        string
		held, ask   int64 // held by another reservation, then asked
		wantErr     bool
		unreachable bool
	}{
		{"within", 0, 600, false, false},
		{"at the limit", 400, 1100, false, false},
		{"one past what is left", 400, 1101, true, false},
		{"all one reservation may hold", 0, 1500, false, false},
		{"more than one reservation may hold", 0, 1501, true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := membudget.New(1600, 10*time.Millisecond)
			if _, err := b.Reserve(context.Background(), "other", tt.held); err != nil {
				t.Fatal(err)
			}
			r, err := b.Reserve(context.Background(), "a state", tt.ask)
			var ee *membudget.ExhaustedError
			if (err != nil) != tt.wantErr || (err != nil && (!errors.As(err, &ee) || ee.Unreachable != tt.unreachable || ee.What != "a state")) {
				t.Fatalf("got %v, want error %v (unreachable %v)", err, tt.wantErr, tt.unreachable)
			}
			want := tt.held
			if err == nil {
				want += tt.ask
				if got := r.Size(); got != tt.ask {
					t.Errorf("Size: got %d, want %d", got, tt.ask)
				}
			}
			if got := b.InUse(); got != want {
				t.Errorf("InUse: got %d, want %d", got, want)
			}
		})
	}
}

// TestSmallReservationsGoOn: with the large part spent, small
// reservations still get the part kept for them, at once, up to it.
func TestSmallReservationsGoOn(t *testing.T) {
	b := membudget.New(1<<20, time.Minute) // small ones: at most 1 KiB each, 64 KiB in all
	if _, err := b.Reserve(context.Background(), "big", 1<<20-1<<16); err != nil {
		t.Fatal(err)
	}
	// One byte past the small size is a large reservation: none is left.
	short, cancelShort := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancelShort()
	if _, err := b.Reserve(short, "just too large", 1<<10+1); err == nil {
		t.Fatal("a reservation one byte past the small size got the small part")
	}
	var small []*membudget.Reservation
	for i := range 64 {
		r, err := b.Reserve(context.Background(), "small", 1<<10)
		if err != nil {
			t.Fatalf("small reservation %d: %v", i, err)
		}
		small = append(small, r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := b.Reserve(ctx, "small", 1<<10); err == nil {
		t.Fatalf("a 65th small reservation got room; want none left")
	}
	// A small reservation that grows large moves to the large part: with
	// it spent, the growth fails and the reservation keeps what it had.
	if err := small[0].Resize(ctx, 2<<10); err == nil || small[0].Size() != 1<<10 {
		t.Fatalf("growth past the small size: got %v, size %d; want a refusal, 1024", err, small[0].Size())
	}
	for _, r := range small {
		r.Release()
	}
	if got := b.InUse(); got != 1<<20-1<<16 {
		t.Errorf("in use %d after the small ones were released, want the big one's %d", got, 1<<20-1<<16)
	}
}

func TestResize(t *testing.T) {
	b := membudget.New(1600, 10*time.Millisecond)
	r := b.Empty("x")
	ctx := context.Background()
	if err := r.Resize(ctx, 70); err != nil {
		t.Fatal(err)
	}
	if err := r.Resize(ctx, 1501); err == nil {
		t.Fatal("grew past the budget")
	}
	if got := r.Size(); got != 70 {
		t.Errorf("a failed growth changed the size: got %d, want 70", got)
	}
	if err := r.Resize(ctx, 20); err != nil || b.InUse() != 20 {
		t.Fatalf("shrink: got %v, in use %d; want nil, 20", err, b.InUse())
	}
	r.Release()
	if got := b.InUse(); got != 0 {
		t.Errorf("after Release: in use %d, want 0", got)
	}
	if got := b.Refusals(); got != 1 {
		t.Errorf("Refusals: got %d, want 1", got)
	}
}

// TestWaitsForRoom: a reservation that does not fit waits for one that
// is released within the wait.
func TestWaitsForRoom(t *testing.T) {
	b := membudget.New(1600, 5*time.Second)
	held, err := b.Reserve(context.Background(), "held", 1400)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		_, err := b.Reserve(context.Background(), "waiting", 500)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond) // let it wait (it fails the test only by passing early)
	select {
	case err := <-done:
		t.Fatalf("did not wait: %v", err)
	default:
	}
	held.Release()
	if err := <-done; err != nil {
		t.Fatalf("got %v after room was made, want nil", err)
	}
}

// TestCallerCancels: a cancelled caller gets its context's error, not a
// budget error.
func TestCallerCancels(t *testing.T) {
	b := membudget.New(1600, time.Minute)
	if _, err := b.Reserve(context.Background(), "held", 1500); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := b.Reserve(ctx, "x", 50); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the context's deadline", err)
	}
}

// TestNeverOver: many reservations at once never hold more than the
// limit between them.
func TestNeverOver(t *testing.T) {
	b := membudget.New(1000, time.Millisecond)
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			r := b.Empty("x")
			for j := range 200 {
				_ = r.Resize(context.Background(), int64((i*7+j*13)%300))
				if got := b.InUse(); got > 1000 {
					t.Errorf("in use %d, over the limit", got)
				}
			}
			r.Release()
		})
	}
	wg.Wait()
	if got := b.InUse(); got != 0 {
		t.Errorf("in use %d after every release, want 0", got)
	}
}

func TestNilBudget(t *testing.T) {
	var b *membudget.Budget
	r, err := b.Reserve(context.Background(), "x", 1<<40)
	if err != nil || r.Size() != 0 || r.Resize(context.Background(), 5) != nil {
		t.Fatalf("a nil budget must reserve nothing and never fail: %v", err)
	}
	r.Release()
}

// TestNoQueue: a reservation that fits is made at once while a larger one
// waits for room (a queue would hold every small one up behind it).
func TestNoQueue(t *testing.T) {
	b := membudget.New(1<<20, 2*time.Second)
	if _, err := b.Reserve(context.Background(), "held", 500_000); err != nil {
		t.Fatal(err)
	}
	waiting := make(chan error)
	go func() {
		_, err := b.Reserve(context.Background(), "large", 600_000)
		waiting <- err
	}()
	time.Sleep(20 * time.Millisecond) // let it wait
	r := b.Empty("small")
	if err := r.TryResize(20_000); err != nil {
		t.Fatalf("a reservation that fits was refused while another waited: %v", err)
	}
	r.Release()
	if err := <-waiting; err == nil {
		t.Fatalf("the large reservation got room that was never there")
	}
}

// TestClose: a closed reservation gives its bytes back and cannot grow
// again, so that a change arriving after its work ended reserves nothing
// nobody would release.
func TestClose(t *testing.T) {
	b := membudget.New(1<<20, time.Millisecond)
	r, err := b.Reserve(context.Background(), "turn's state", 1000)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if err := r.Resize(context.Background(), 2000); err == nil {
		t.Fatal("a closed reservation grew")
	}
	if got := b.InUse(); got != 0 {
		t.Errorf("in use %d after Close, want 0", got)
	}
}

// holderCount is a Holder that sums what it is told.
type holderCount struct{ n atomic.Int64 }

func (h *holderCount) Add(n int64) { h.n.Add(n) }

// A reservation made for the work a context carries tells its Holder of
// every change, however it is made: Reserve, the first Resize of an Empty
// one, EmptyFor then TryResize; shrinking and Close give it back.
func TestHolderIsToldWhatReservationsHold(t *testing.T) {
	t.Parallel()
	b := membudget.New(1<<20, time.Millisecond)
	h := &holderCount{}
	ctx := membudget.WithHolder(context.Background(), h)
	r1, err := b.Reserve(ctx, "a", 100)
	if err != nil {
		t.Fatal(err)
	}
	r2 := b.Empty("b")
	if err := r2.Resize(ctx, 2000); err != nil {
		t.Fatal(err)
	}
	r3 := b.EmptyFor(ctx, "c")
	if err := r3.TryResize(300_000); err != nil { // past the small part: held in the large one
		t.Fatal(err)
	}
	if got, want := h.n.Load(), int64(100+2000+300_000); got != want {
		t.Errorf("after growing: the holder has %d, want %d", got, want)
	}
	if err := r3.TryResize(1 << 30); err == nil {
		t.Fatal("a reservation past the budget was made")
	}
	if got, want := h.n.Load(), int64(100+2000+300_000); got != want {
		t.Errorf("after a refused growth: the holder has %d, want %d", got, want)
	}
	r1.Release()
	r2.Close()
	if err := r3.TryResize(1000); err != nil {
		t.Fatal(err)
	}
	if got := h.n.Load(); got != 1000 {
		t.Errorf("after shrinking: the holder has %d, want 1000", got)
	}
	r3.Close()
	if got := h.n.Load(); got != 0 {
		t.Errorf("after closing: the holder has %d, want 0", got)
	}
	// A reservation made without a holder tells nobody.
	r4, err := b.Reserve(context.Background(), "d", 10)
	if err != nil {
		t.Fatal(err)
	}
	r4.Close()
	if got := h.n.Load(); got != 0 {
		t.Errorf("a reservation of another context: the holder has %d, want 0", got)
	}
}

// A refusal tells what it was for and how many bytes, never the server's
// live figures: what others hold, or the budget (a request's own bound,
// a setting, is said when it can never fit).
func TestExhaustedErrorShowsNoLiveFigures(t *testing.T) {
	b := membudget.New(1000, time.Millisecond)
	held, err := b.Reserve(context.Background(), "others", 587)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	_, err = b.Reserve(context.Background(), "the state", 500)
	var spent *membudget.ExhaustedError
	if !errors.As(err, &spent) || spent.InUse != 587 {
		t.Fatalf("over the budget: %v, want an ExhaustedError with what others hold in its fields", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "the state needs about 500 bytes") || strings.Contains(msg, "587") || strings.Contains(msg, "1000") {
		t.Errorf("the refusal says %q: want what it was for and its bytes, not the server's figures", msg)
	}
}

// A caller holds at most its share (LimitCallers): 800 of a 1600-byte
// budget at 0.5. At the share and one past it, held by one reservation or
// two; another caller, or work that names no caller, still finds room;
// what a caller gives back it may take again.
func TestCallerShare(t *testing.T) {
	alice := membudget.WithCaller(context.Background(), "alice")
	bob := membudget.WithCaller(context.Background(), "bob")
	for _, tt := range []struct {
		name        string
		held        int64           // by alice's first reservation
		askCtx      context.Context // whose the second is
		ask         int64
		wantErr     bool
		callerShare bool
		unreachable bool
	}{
		{"at the share", 300, alice, 500, false, false, false},
		{"one past the share", 300, alice, 501, true, true, false},
		{"one reservation at the share", 0, alice, 800, false, false, false},
		{"one reservation past the share can never be made", 0, alice, 801, true, false, true},
		{"another caller", 800, bob, 700, false, false, false},
		{"work of no caller", 800, context.Background(), 700, false, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := membudget.New(1600, 10*time.Millisecond).LimitCallers(0.5)
			if b.CallerMax() != 800 {
				t.Fatalf("CallerMax %d, want 800", b.CallerMax())
			}
			first, err := b.Reserve(alice, "a state", tt.held)
			if err != nil {
				t.Fatal(err)
			}
			second, err := b.Reserve(tt.askCtx, "an answer", tt.ask)
			var ee *membudget.ExhaustedError
			if (err != nil) != tt.wantErr || (err != nil && (!errors.As(err, &ee) || ee.CallerShare != tt.callerShare || ee.Unreachable != tt.unreachable)) {
				t.Fatalf("got %v, want error %v (caller share %v, unreachable %v)", err, tt.wantErr, tt.callerShare, tt.unreachable)
			}
			if tt.callerShare && !strings.Contains(err.Error(), "its share") {
				t.Fatalf("the error %q does not say the caller holds its share", err)
			}
			// What its reservations give back, the caller may take again.
			first.Release()
			second.Release()
			if _, err := b.Reserve(alice, "a state", 800); err != nil {
				t.Fatalf("after a release: %v", err)
			}
		})
	}
}

// Many reservations of one caller at once never hold more than its share
// between them, and a share of 1 (or 0) bounds nothing but the budget.
func TestCallerShareNeverOver(t *testing.T) {
	b := membudget.New(1<<20, time.Millisecond).LimitCallers(0.25)
	ctx := membudget.WithCaller(context.Background(), "one")
	var wg sync.WaitGroup
	var held, peak atomic.Int64
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				r, err := b.Reserve(ctx, "x", 20<<10)
				if err != nil {
					continue
				}
				for h := held.Add(20 << 10); ; {
					p := peak.Load()
					if h <= p || peak.CompareAndSwap(p, h) {
						break
					}
				}
				held.Add(-20 << 10)
				r.Release()
			}
		}()
	}
	wg.Wait()
	if p := peak.Load(); p > b.CallerMax() {
		t.Fatalf("the caller held %d at once, its share is %d", p, b.CallerMax())
	}
	for _, share := range []float64{0, 1} {
		whole := membudget.New(1600, time.Millisecond).LimitCallers(share)
		if whole.CallerMax() != 0 {
			t.Fatalf("share %v: CallerMax %d, want 0 (no bound)", share, whole.CallerMax())
		}
		if _, err := whole.Reserve(ctx, "x", 1500); err != nil {
			t.Fatalf("share %v: %v", share, err)
		}
	}
}

// A reservation that fits is made at once while another waits, whoever
// holds more: a caller that holds nothing and asks for more than is free
// holds no one up (were room kept for it, it could keep every caller that
// holds some from growing, asking again as each wait ends).
func TestAWaitingCallerHoldsNoOneUp(t *testing.T) {
	const large = 1<<20 - 1<<20/16 // the budget less its small part
	b := membudget.New(1<<20, 2*time.Second)
	rich := membudget.WithCaller(context.Background(), "rich")
	if _, err := b.Reserve(rich, "rich's", large-100_000); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		_, err := b.Reserve(membudget.WithCaller(context.Background(), "poor"), "more than is free", 200_000)
		waited <- err
	}()
	waitFor(t, b, 1)
	for _, tt := range []struct {
		name string
		n    int64
		ok   bool
	}{
		{"all that is free", 100_000, true},
		{"one byte past it", 100_001, false},
	} {
		r := b.EmptyFor(rich, tt.name)
		if err := r.TryResize(tt.n); (err == nil) != tt.ok {
			t.Fatalf("%s while one holding nothing waits: %v, want made %v", tt.name, err, tt.ok)
		}
		r.Release()
	}
	if err := <-waited; err == nil {
		t.Fatal("the reservation of more than was ever free was made")
	}
}

// Room that frees goes to the waiting caller that holds the least, not
// to the one that came first.
func TestRoomGoesToTheCallerHoldingTheLeast(t *testing.T) {
	const large = 1<<20 - 1<<20/16
	b := membudget.New(1<<20, 2*time.Second)
	ctxA := membudget.WithCaller(context.Background(), "a") // holds nothing
	ctxB := membudget.WithCaller(context.Background(), "b")
	bHeld, err := b.Reserve(ctxB, "b's", 200_000)
	if err != nil {
		t.Fatal(err)
	}
	c, err := b.Reserve(membudget.WithCaller(context.Background(), "c"), "c's", large-200_000)
	if err != nil {
		t.Fatal(err)
	}
	bDone, aDone := make(chan error, 1), make(chan error, 1)
	go func() { _, err := b.Reserve(ctxB, "b's more", 100_000); bDone <- err }()
	waitFor(t, b, 1) // b waits first
	go func() { _, err := b.Reserve(ctxA, "a's", 300_000); aDone <- err }()
	waitFor(t, b, 2)
	if err := c.Resize(context.Background(), large-200_000-300_000); err != nil {
		t.Fatal(err)
	}
	if err := <-aDone; err != nil {
		t.Fatalf("a, holding nothing, once room for it freed: %v", err)
	}
	if n := b.Waiting(); n != 1 {
		t.Fatalf("%d waiting once a got its room, want b", n)
	}
	if err := bHeld.Resize(context.Background(), 100_000); err != nil { // b gives back what it waits for
		t.Fatal(err)
	}
	if err := <-bDone; err != nil {
		t.Fatalf("b once room freed: %v", err)
	}
}

// waitFor waits until n reservations of b wait for room.
func waitFor(t *testing.T, b *membudget.Budget, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for b.Waiting() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d reservations waiting, want %d", b.Waiting(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// While restricted, the budget refuses at once a large reservation of
// work of no caller, of a caller holding more than a small reservation
// (a thousandth of the budget), or of one it would take past its fair
// share (the large part shared max-min among the callers holding some):
// a caller holding a byte, or nothing, still waits for room within its
// share; a small reservation is made as before.
func TestRestrict(t *testing.T) {
	const wait = 200 * time.Millisecond
	const large = 1<<20 - 1<<20/16
	b := membudget.New(1<<20, wait)
	holder := membudget.WithCaller(context.Background(), "holder")
	if _, err := b.Reserve(holder, "a byte", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Reserve(membudget.WithCaller(context.Background(), "big"), "big's", 600_000); err != nil {
		t.Fatal(err)
	}
	const smallMax = 1 << 20 / 1024
	small, more := membudget.WithCaller(context.Background(), "small"), membudget.WithCaller(context.Background(), "more")
	if _, err := b.Reserve(small, "a small reservation's worth", smallMax); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Reserve(more, "a byte more", smallMax+1); err != nil {
		t.Fatal(err)
	}
	// A sender holds only a message on its way in, as large as more's.
	sender := membudget.WithCaller(context.Background(), "sender")
	if _, err := b.Reserve(membudget.Incoming(sender), "its message", smallMax+1); err != nil {
		t.Fatal(err)
	}
	b.Restrict(true)
	// With big's 600,000 bytes, holder's fair share is half of the large
	// part less what the three small callers hold: big holds more than the
	// half left.
	const share = (large - 3*smallMax - 2) / 2
	for _, tt := range []struct {
		name       string
		ctx        context.Context
		n          int64
		ok, waited bool
	}{
		{"a caller holding nothing, what is free", membudget.WithCaller(context.Background(), "fresh"), 100_000, true, false},
		{"a caller holding a byte, what is free", holder, 100_000, true, false},
		{"a caller holding a small reservation's worth", small, 100_000, true, false},
		{"a caller holding a byte more", more, 100_000, false, false},
		{"a caller holding as much, its request on its way in", sender, 100_000, true, false},
		{"a caller holding a byte, up to its share", holder, share - 1, false, true},
		{"a caller holding a byte, a byte past its share", holder, share, false, false},
		{"work of no caller", context.Background(), 100_000, false, false},
		{"a small reservation of a caller holding a byte", holder, 1 << 20 / 1024, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			r, err := b.Reserve(tt.ctx, tt.name, tt.n)
			if (err == nil) != tt.ok {
				t.Fatalf("got %v, want made %v", err, tt.ok)
			}
			if waited := time.Since(start) >= wait; err != nil && waited != tt.waited {
				t.Errorf("refused after %v, want after the budget's wait %v", time.Since(start), tt.waited)
			}
			r.Release()
		})
	}
	b.Restrict(false)
	if r, err := b.Reserve(holder, "after", 300_000); err != nil {
		t.Fatalf("no longer restricted: %v", err)
	} else {
		r.Release()
	}
}

// A state decoded in a spare reservation takes its room from the spare,
// never through the budget: a reservation waiting for room meanwhile
// does not get it between the two. What the state does not need stays in
// the spare; a growth past what the spare and the budget have leaves
// both as they were.
func TestTryResizeFromSpare(t *testing.T) {
	const large = 1<<20 - 1<<20/16
	for _, tt := range []struct {
		name             string
		n                int64
		ok               bool
		state, spareLeft int64
	}{
		{"less than the spare holds", 250_000, true, 250_000, 50_000},
		{"all the spare holds", 300_000, true, 300_000, 0},
		{"a byte past it, with no room free", 300_001, false, 1000, 300_000},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := membudget.New(1<<20, 2*time.Second)
			user := membudget.WithCaller(context.Background(), "user")
			state := b.EmptyFor(user, "the state")
			if err := state.Resize(user, 1000); err != nil { // in the small part
				t.Fatal(err)
			}
			spare, err := state.Spare(user, 300_000)
			if err != nil {
				t.Fatal(err)
			}
			other, err := b.Reserve(membudget.WithCaller(context.Background(), "other"), "the rest", large-300_000)
			if err != nil {
				t.Fatal(err)
			}
			waited := make(chan error, 1)
			go func() {
				r, err := b.Reserve(membudget.WithCaller(context.Background(), "waiter"), "more than is free", 50_000)
				r.Release()
				waited <- err
			}()
			waitFor(t, b, 1)
			inUse := b.InUse()
			err = state.TryResizeFrom(spare, tt.n)
			if (err == nil) != tt.ok {
				t.Fatalf("got %v, want made %v", err, tt.ok)
			}
			if state.Size() != tt.state || spare.Size() != tt.spareLeft {
				t.Fatalf("the state holds %d and the spare %d, want %d and %d", state.Size(), spare.Size(), tt.state, tt.spareLeft)
			}
			if want := inUse - 1000*btoi(tt.ok); b.InUse() != want {
				t.Errorf("in use %d, want %d: the state's small bytes given back, nothing else", b.InUse(), want)
			}
			if b.Waiting() != 1 {
				t.Fatal("the waiting reservation was given the spare's room")
			}
			spare.Release()
			if tt.spareLeft < 50_000 {
				other.Release()
			}
			if err := <-waited; err != nil {
				t.Fatalf("the waiting reservation once room freed: %v", err)
			}
		})
	}
}

func btoi(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// The room that work cancelled for a waiting reservation frees (OnWait's
// f reported it cancelled some) is kept for it: a reservation of a
// caller holding more, new or waiting, does not take it first, though it
// fits and the one waiting does not yet. Without f's word, room is kept
// for no one.
func TestRoomKeptForTheOneWorkWasCancelledFor(t *testing.T) {
	const large = 1<<20 - 1<<20/16
	for _, cancelled := range []bool{false, true} {
		t.Run(map[bool]string{false: "nothing cancelled", true: "work cancelled"}[cancelled], func(t *testing.T) {
			b := membudget.New(1<<20, 300*time.Millisecond)
			b.OnWait(func(fair, need int64) bool { return cancelled })
			rich := membudget.WithCaller(context.Background(), "rich")
			first, err := b.Reserve(rich, "rich's first", 100_000)
			if err != nil {
				t.Fatal(err)
			}
			rest, err := b.Reserve(rich, "rich's rest", large-200_000)
			if err != nil {
				t.Fatal(err)
			}
			poor := make(chan error, 1)
			go func() {
				_, err := b.Reserve(membudget.WithCaller(context.Background(), "poor"), "poor's", 250_000)
				poor <- err
			}()
			waitFor(t, b, 1)
			first.Release() // 200,000 free: not enough for poor yet
			r := b.EmptyFor(rich, "rich's more")
			err = r.TryResize(150_000)
			if kept := err != nil; kept != cancelled {
				t.Fatalf("rich asking for 150,000 of the 200,000 free while poor waits: %v, want kept for poor %v", err, cancelled)
			}
			if err := rest.Resize(rich, large-300_000); err != nil { // 100,000 more free
				t.Fatal(err)
			}
			if err := <-poor; (err == nil) != cancelled {
				t.Fatalf("poor once 300,000 were free, of which rich took %d: %v", r.Size(), err)
			}
			r.Release()
		})
	}
}

// However many reservations wait, they ask again at most once every
// AskAgainEvery between them: 50 waiting 300 ms ask 50 times at first and
// then about 60 times, not 50 every AskEvery (350 in all).
func TestWaitersAskAgainAtABoundedRate(t *testing.T) {
	const wait, waiters = 300 * time.Millisecond, 50
	b := membudget.New(1<<20, wait)
	var asks atomic.Int64
	b.OnWait(func(fair, need int64) bool { asks.Add(1); return false })
	if _, err := b.Reserve(membudget.WithCaller(context.Background(), "rich"), "all", 1<<20-1<<20/16); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range waiters {
		wg.Go(func() {
			ctx := membudget.WithCaller(context.Background(), "waiter"+strconv.Itoa(i))
			if _, err := b.Reserve(ctx, "more than is free", 10_000); err == nil {
				t.Error("a reservation past a full budget was made")
			}
		})
	}
	wg.Wait()
	if most := int64(waiters + wait/membudget.AskAgainEvery + 2); asks.Load() > most {
		t.Fatalf("%d asks, want at most %d", asks.Load(), most)
	}
	if asks.Load() < waiters+1 {
		t.Fatalf("%d asks, want each waiter's first and some again", asks.Load())
	}
}
