package overload

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exprd/exprd/membudget"
)

var quiet = slog.New(slog.DiscardHandler)

// gcHeap is a heap as a GC sees it: what is held now (held) shows in a
// reading only after a GC, natural (gc) or the Manager's (collect).
type gcHeap struct {
	mu       sync.Mutex
	held     int64 // bytes held now
	live     int64 // what the last GC found
	gcs      uint64
	collects int
}

func (h *gcHeap) read() Reading {
	h.mu.Lock()
	defer h.mu.Unlock()
	return Reading{Heap: h.live, GCs: h.gcs}
}

func (h *gcHeap) set(held int64) {
	h.mu.Lock()
	h.held = held
	h.mu.Unlock()
}

// gc is a GC of the runtime's own.
func (h *gcHeap) gc() {
	h.mu.Lock()
	h.live = h.held
	h.gcs++
	h.mu.Unlock()
}

func (h *gcHeap) collect() {
	h.gc()
	h.mu.Lock()
	h.collects++
	h.mu.Unlock()
}

func (h *gcHeap) collected() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.collects
}

// newManager is a Manager of a 1000-byte line over h: refusing past 900,
// cancelling past 950.
func newManager(t *testing.T, h *gcHeap) *Manager {
	t.Helper()
	m, err := New(Config{Line: 1000, Logger: quiet, Read: h.read, Collect: h.collect})
	if err != nil {
		t.Fatal(err)
	}
	if s := m.Stats(); s.RefuseAt != 900 || s.ShedAt != 950 {
		t.Fatalf("thresholds %d, %d; want 900, 950", s.RefuseAt, s.ShedAt)
	}
	return m
}

// at makes the heap read n at the next check, as after a GC.
func (h *gcHeap) at(n int64) { h.set(n); h.gc() }

func TestLineFor(t *testing.T) {
	for _, tc := range []struct{ budget, want int64 }{{0, 0}, {4, 5}, {1000, 1250}, {512 << 20, 640 << 20}} {
		if got := LineFor(tc.budget); got != tc.want {
			t.Errorf("LineFor(%d) = %d, want %d", tc.budget, got, tc.want)
		}
	}
}

func TestNewChecksItsConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Config
		want string // "" for none
	}{
		{"the defaults", Config{Line: 1}, ""},
		{"no line", Config{Line: 0}, "line 0 bytes"},
		{"a negative line", Config{Line: -1}, "line -1 bytes"},
		{"thresholds at the line", Config{Line: 1, Refuse: 1, Shed: 1}, ""},
		{"shed past the line", Config{Line: 1, Refuse: 0.9, Shed: 1.01}, "want each in (0, 1]"},
		{"refuse past the line", Config{Line: 1, Refuse: 1.01, Shed: 1}, "want each in (0, 1]"},
		{"a negative threshold", Config{Line: 1, Refuse: -0.1}, "want each in (0, 1]"},
		{"refuse at shed", Config{Line: 1, Refuse: 0.5, Shed: 0.5}, ""},
		{"refuse past shed", Config{Line: 1, Refuse: 0.51, Shed: 0.5}, "refuse 0.51 is past shed 0.5"},
		{"a negative interval", Config{Line: 1, Interval: -time.Millisecond}, "want a positive duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.c)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("New: %v, want no error", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("New: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// At the refuse threshold work is admitted; one byte past it, refused;
// back at it, admitted again.
func TestRefusesPastTheRefuseThreshold(t *testing.T) {
	h := &gcHeap{}
	m := newManager(t, h)
	for _, tc := range []struct {
		heap   int64
		refuse bool
	}{{0, false}, {900, false}, {901, true}, {950, true}, {900, false}} {
		h.at(tc.heap)
		m.Check()
		err := m.Admit()
		if got := err != nil; got != tc.refuse {
			t.Fatalf("heap %d: Admit %v, want refused %v", tc.heap, err, tc.refuse)
		}
		var re *RefusedError
		if tc.refuse && (!errors.Is(err, ErrOverloaded) || !errors.As(err, &re) || re.Heap != tc.heap || re.RefuseAt != 900) {
			t.Errorf("heap %d: refused with %#v, want a *RefusedError of heap %d past 900 that is ErrOverloaded", tc.heap, err, tc.heap)
		}
	}
	if got := m.Stats().Refused; got != 2 {
		t.Errorf("Stats.Refused = %d, want 2", got)
	}
}

// Past the refuse threshold a caller with a call in flight is refused,
// one with none is admitted (one call at a time: its second is refused
// until the first ends), and work of no caller is refused; under the
// threshold every caller is admitted whatever it has in flight.
func TestEnterAdmitsByCaller(t *testing.T) {
	h := &gcHeap{}
	m := newManager(t, h)
	busy := membudget.WithCaller(context.Background(), "busy")
	quiet := membudget.WithCaller(context.Background(), "quiet")
	_, _, doneBusy, err := m.Enter(busy, "busy's first")
	if err != nil {
		t.Fatal(err)
	}
	h.at(901)
	m.Check()
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		refuse bool
	}{
		{"a caller with a call in flight", busy, true},
		{"a caller with none", quiet, false},
		{"the same caller's second call", quiet, true},
		{"work of no caller", context.Background(), true},
	} {
		_, _, done, err := m.Enter(tc.ctx, tc.name)
		if got := err != nil; got != tc.refuse {
			t.Fatalf("%s: Enter %v, want refused %v", tc.name, err, tc.refuse)
		}
		if tc.refuse && !errors.Is(err, ErrOverloaded) {
			t.Fatalf("%s: refused with %v, want ErrOverloaded", tc.name, err)
		}
		if !tc.refuse {
			defer done()
		}
	}
	doneBusy()
	if _, _, done, err := m.Enter(busy, "busy once its call ended"); err != nil {
		t.Fatalf("a caller whose call ended: %v, want admitted", err)
	} else {
		defer done()
	}
	h.at(900)
	m.Check()
	for range 3 {
		_, _, done, err := m.Enter(busy, "under the threshold")
		if err != nil {
			t.Fatalf("under the threshold: %v, want admitted", err)
		}
		defer done()
	}
	if got := m.Stats().InFlight; got != 5 {
		t.Fatalf("in flight %d, want 5", got)
	}
}

// At the shed threshold nothing is cancelled; one byte past it, one call
// is, with a *ShedError as its context's cause.
func TestShedsPastTheShedThreshold(t *testing.T) {
	h := &gcHeap{}
	m := newManager(t, h)
	ctx, c, done := m.Track(context.Background(), "/svc/M")
	defer done()
	c.Add(700)
	h.at(950)
	m.Check()
	if ctx.Err() != nil || c.Shed() {
		t.Fatalf("at the shed threshold the call was cancelled: %v", context.Cause(ctx))
	}
	h.at(951)
	m.Check()
	if ctx.Err() == nil || !c.Shed() {
		t.Fatal("one byte past the shed threshold no call was cancelled")
	}
	var se *ShedError
	if cause := context.Cause(ctx); !errors.Is(cause, ErrOverloaded) || !errors.As(cause, &se) || *se != (ShedError{Name: "/svc/M", Held: 700, Heap: 951, ShedAt: 950}) {
		t.Errorf("cancelled with %#v, want a *ShedError naming the call, what it held and the heap", cause)
	}
	if s := m.Stats(); s.Shed != 1 || s.InFlight != 1 {
		t.Errorf("Stats: %d shed, %d in flight; want 1, 1", s.Shed, s.InFlight)
	}
}

// One call a check: the one holding the most, the oldest among equal
// counts; with nothing counted at all, the oldest.
func TestShedsTheCallHoldingTheMostFirst(t *testing.T) {
	for _, tc := range []struct {
		name  string
		holds []int64 // by age, oldest first
		order string  // the calls cancelled, check by check
	}{
		{"the largest count first", []int64{10, 500, 20}, "bca"},
		{"the oldest of equal counts", []int64{10, 500, 500}, "bca"},
		{"nothing counted: the oldest", []int64{0, 0, 0}, "abc"},
		{"a negative count is less than none", []int64{-5, 0}, "ba"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &gcHeap{}
			m := newManager(t, h)
			var ctxs []context.Context
			for _, n := range tc.holds {
				ctx, c, done := m.Track(context.Background(), "call")
				defer done()
				c.Add(n)
				ctxs = append(ctxs, ctx)
			}
			h.at(1000)
			var got strings.Builder
			for range tc.holds {
				m.Check()
				cancelled := 0
				for i, ctx := range ctxs {
					if ctx.Err() != nil {
						cancelled++
						if !strings.ContainsRune(got.String(), rune('a'+i)) {
							got.WriteRune(rune('a' + i))
						}
					}
				}
				if cancelled != got.Len() {
					t.Fatalf("a check cancelled more than one call (%d after %q)", cancelled, got.String())
				}
			}
			if got.String() != tc.order {
				t.Errorf("cancelled %q, want %q", got.String(), tc.order)
			}
			m.Check() // nothing left to cancel: nothing happens
		})
	}
}

// FromContext finds the tracked call in the work's context; elsewhere it
// is nil, and Add on nil does nothing.
func TestFromContext(t *testing.T) {
	m := newManager(t, &gcHeap{})
	ctx, c, done := m.Track(context.Background(), "call")
	FromContext(ctx).Add(40)
	FromContext(context.WithoutCancel(ctx)).Add(2)
	if c.Held() != 42 || FromContext(ctx) != c {
		t.Errorf("held %d, want 42 counted through the context", c.Held())
	}
	none := FromContext(context.Background())
	none.Add(1)
	if none != nil || none.Held() != 0 || none.Shed() {
		t.Errorf("FromContext of an untracked context: %v", none)
	}
	if m.Stats().InFlight != 1 {
		t.Errorf("in flight %d, want 1", m.Stats().InFlight)
	}
	done()
	if ctx.Err() == nil || m.Stats().InFlight != 0 {
		t.Errorf("after done: context %v, %d in flight; want cancelled, none", ctx.Err(), m.Stats().InFlight)
	}
}

// What the memory budget reserves with a tracked context counts as held
// by its call, and is given back with the reservation.
func TestReservationsCountAsHeld(t *testing.T) {
	m := newManager(t, &gcHeap{})
	ctx, c, done := m.Track(context.Background(), "call")
	defer done()
	b := membudget.New(1<<20, time.Millisecond)
	r, err := b.Reserve(ctx, "a state", 5000)
	if err != nil {
		t.Fatal(err)
	}
	c.Add(7) // and what a meter counts besides
	if c.Held() != 5007 {
		t.Errorf("held %d, want 5007", c.Held())
	}
	r.Close()
	if c.Held() != 7 {
		t.Errorf("after the reservation's release: held %d, want 7", c.Held())
	}
}

// A reading is as of the last GC. After a cancelled call ends, the
// Manager collects before it judges again, so it cancels no second call
// for memory the first let go of, and admits again once the heap is
// down, although the runtime runs no GC of its own.
func TestCollectsOnceACancelledCallHasEnded(t *testing.T) {
	h := &gcHeap{}
	m := newManager(t, h)
	_, hog, hogDone := m.Track(context.Background(), "hog")
	hog.Add(900)
	smallCtx, small, smallDone := m.Track(context.Background(), "small")
	defer smallDone()
	small.Add(10)
	h.at(1000)
	m.Check()
	if !hog.Shed() || m.Admit() == nil {
		t.Fatal("the hog was not cancelled, or new work was admitted")
	}
	// The hog lets go; no GC has run since: the heap still reads 1000.
	h.set(100)
	hogDone()
	m.Check()
	if h.collected() != 1 {
		t.Fatalf("the Manager collected %d times, want once", h.collected())
	}
	if smallCtx.Err() != nil {
		t.Error("the small call was cancelled for memory the hog had let go of")
	}
	if err := m.Admit(); err != nil {
		t.Errorf("the heap is down to 100 and work is still refused: %v", err)
	}
	m.Check()
	if h.collected() != 1 {
		t.Errorf("collected again under the refuse threshold (%d)", h.collected())
	}
}

// A natural GC since a cancelled call ended may have started before it
// let go: the Manager collects anyway.
func TestCollectsAfterACancelledCallEndsDespiteANaturalGC(t *testing.T) {
	h := &gcHeap{}
	m := newManager(t, h)
	_, hog, hogDone := m.Track(context.Background(), "hog")
	hog.Add(900)
	h.at(1000)
	m.Check()
	hogDone()
	h.gc() // marked before the hog let go: still 1000
	h.set(100)
	m.Check()
	if h.collected() != 1 || m.Admit() != nil {
		t.Errorf("collected %d times, Admit %v; want once, admitted", h.collected(), m.Admit())
	}
}

// While refusing with nothing shed: a call that ends may have freed
// memory, and an idle process runs no GC, so the Manager collects; while
// nothing ended, or a GC ran on its own since the last check, it does not.
func TestCollectsWhenRefusingOnlyIfSomethingEndedAndNoGCRan(t *testing.T) {
	h := &gcHeap{}
	m := newManager(t, h)
	_, _, done := m.Track(context.Background(), "call")
	h.at(920)
	m.Check()
	m.Check()
	if h.collected() != 0 || m.Admit() == nil {
		t.Fatalf("collected %d times with nothing freed, or admitted at 920", h.collected())
	}
	done()
	h.gc() // the runtime's: something else still holds the 920
	m.Check()
	if h.collected() != 0 || m.Admit() == nil {
		t.Fatalf("collected %d times although a GC had just run", h.collected())
	}
	h.set(300) // now let go, and no GC runs
	m.Check()
	if h.collected() != 1 || m.Admit() != nil {
		t.Errorf("collected %d times, Admit %v; want once, admitted", h.collected(), m.Admit())
	}
}

// Collections for calls that ended take at most a tenth of the time:
// after one that took 50 ms, none for 450 ms; for a cancelled call that
// ended, at once.
func TestCollectionsForEndedCallsTakeATenthOfTheTime(t *testing.T) {
	h := &gcHeap{}
	m := newManager(t, h)
	now := time.Unix(0, 0)
	m.now = func() time.Time { return now }
	m.collect = func() { h.collect(); now = now.Add(50 * time.Millisecond) }
	end := func() {
		_, _, done := m.Track(context.Background(), "call")
		done()
	}
	h.at(920)
	m.Check()
	end()
	m.Check()
	if h.collected() != 1 {
		t.Fatalf("collected %d times, want once", h.collected())
	}
	end()
	now = now.Add(450*time.Millisecond - time.Nanosecond)
	m.Check()
	if h.collected() != 1 {
		t.Fatalf("collected again 1 ns before 9 times the last collection's time")
	}
	now = now.Add(time.Nanosecond)
	m.Check()
	if h.collected() != 2 {
		t.Fatalf("collected %d times at 9 times the last collection's time, want 2", h.collected())
	}
	_, hog, done := m.Track(context.Background(), "hog")
	hog.Add(1)
	h.at(960)
	m.Check()
	if !hog.Shed() {
		t.Fatal("the hog was not cancelled")
	}
	done()
	m.Check()
	if h.collected() != 3 {
		t.Errorf("collected %d times, want 3: a cancelled call's end is not rationed", h.collected())
	}
}

// Run checks at once and then every interval, and admits again when it
// ends.
func TestRunChecksEveryIntervalUntilItsContextEnds(t *testing.T) {
	reads := make(chan struct{})
	m, err := New(Config{Line: 1000, Interval: time.Millisecond, Logger: quiet, Collect: func() {},
		Read: func() Reading { reads <- struct{}{}; return Reading{Heap: 999} }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { m.Run(ctx); close(ran) }()
	for range 3 {
		<-reads
	}
	for m.Admit() == nil { // the third read's check may not have stored its result yet
		<-reads
	}
	cancel()
	for {
		select {
		case <-reads:
			continue
		case <-ran:
		}
		break
	}
	if err := m.Admit(); err != nil {
		t.Errorf("after Run: %v, want admitted", err)
	}
}

// The runtime's reader counts what is held, not garbage.
func TestRuntimeReaderCountsLiveMemory(t *testing.T) {
	read := RuntimeReader()
	runtime.GC()
	base := read()
	if base.Heap <= 0 || base.GCs == 0 {
		t.Fatalf("reading %+v after a GC, want a heap and a GC", base)
	}
	const size = 64 << 20
	held := make([]byte, size)
	for i := 0; i < len(held); i += 4096 {
		held[i] = 1
	}
	runtime.GC()
	withHeld := read()
	if withHeld.Heap < base.Heap+size*9/10 || withHeld.GCs <= base.GCs {
		t.Errorf("holding %d bytes: %+v, base %+v", size, withHeld, base)
	}
	runtime.KeepAlive(held)
	held = nil
	garbage := make([]byte, size)
	garbage[0] = 1
	garbage = nil
	runtime.GC()
	if after := read(); after.Heap > base.Heap+size/4 {
		t.Errorf("after dropping %d bytes: %+v, base %+v: garbage counted", 2*size, after, base)
	}
	_ = held
	_ = garbage
}

// Past the soft memory limit, what the runtime holds resident is the
// measure when it is more than what is live: the GC is not keeping up.
// At the limit, and under it, what is live is.
func TestReadingOrResident(t *testing.T) {
	for _, tt := range []struct {
		name                 string
		live, resident, soft int64
		want                 int64
	}{
		{"under the limit", 200, 250, 256, 200},
		{"at the limit", 200, 256, 256, 200},
		{"one past the limit", 200, 257, 256, 257},
		{"past the limit, less resident than live", 300, 280, 256, 300},
		{"no limit", 200, 900, math.MaxInt64, 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := (Reading{Heap: tt.live}).orResident(tt.resident, tt.soft).Heap; got != tt.want {
				t.Errorf("measure %d, want %d", got, tt.want)
			}
		})
	}
}

// With a soft memory limit under what the process holds, the runtime's
// reader counts what is resident, not only what is live.
func TestRuntimeReaderPastTheSoftLimit(t *testing.T) {
	read := RuntimeReader()
	runtime.GC()
	live := read().Heap
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	resident := int64(ms.Sys - ms.HeapReleased)
	if resident <= live {
		t.Skipf("resident %d is not over live %d here", resident, live)
	}
	old := debug.SetMemoryLimit(live / 2)
	defer debug.SetMemoryLimit(old)
	if got := read().Heap; got <= live {
		t.Errorf("past the soft limit: measure %d, want more than live %d (resident about %d)", got, live, resident)
	}
}

// Calls are cancelled by caller: of the caller whose calls hold the most
// in all, the call holding the most. At equal totals, the call holding
// the most of either; a call of no caller is a caller of its own.
func TestShedsTheCallerHoldingTheMostFirst(t *testing.T) {
	type call struct {
		caller string
		held   int64
	}
	for _, tc := range []struct {
		name  string
		calls []call // by age, oldest first
		order string // the calls cancelled, check by check
	}{
		{"many calls of one caller before one larger call", []call{{"bulk", 400}, {"bulk", 400}, {"bulk", 400}, {"user", 1000}}, "adbc"},
		{"at equal totals, the larger call", []call{{"bulk", 500}, {"bulk", 500}, {"user", 1000}}, "cab"},
		{"one byte more in all, the caller first", []call{{"bulk", 500}, {"bulk", 501}, {"user", 1000}}, "bca"},
		{"calls of no caller each alone", []call{{"", 400}, {"", 400}, {"user", 500}}, "cab"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &gcHeap{}
			m := newManager(t, h)
			var ctxs []context.Context
			for _, c := range tc.calls {
				ctx, call, done := m.Track(membudget.WithCaller(context.Background(), c.caller), "call")
				defer done()
				call.Add(c.held)
				ctxs = append(ctxs, ctx)
			}
			h.at(1000)
			var got strings.Builder
			for range tc.calls {
				m.Check()
				for i, ctx := range ctxs {
					if ctx.Err() != nil && !strings.ContainsRune(got.String(), rune('a'+i)) {
						got.WriteRune(rune('a' + i))
					}
				}
			}
			if got.String() != tc.order {
				t.Errorf("cancelled %q, want %q", got.String(), tc.order)
			}
		})
	}
}

// While it refuses, the Manager restricts the memory budget it was given:
// a caller holding some of it gets no more; once it admits again, it does.
func TestRestrictsTheBudgetWhileRefusing(t *testing.T) {
	h := &gcHeap{}
	budget := membudget.New(1<<20, time.Millisecond)
	m, err := New(Config{Line: 1000, Logger: quiet, Read: h.read, Collect: h.collect, Budget: budget})
	if err != nil {
		t.Fatal(err)
	}
	ctx := membudget.WithCaller(context.Background(), "bulk")
	held, err := budget.Reserve(ctx, "held", 100_000)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	grow := func() error { r, err := budget.Reserve(ctx, "more", 100_000); r.Release(); return err }
	h.at(901)
	m.Check()
	if grow() == nil {
		t.Fatal("past the refuse threshold, a caller holding some of the budget got more")
	}
	h.at(900)
	m.Check()
	if err := grow(); err != nil {
		t.Fatalf("back at the threshold: %v", err)
	}
}

// The line is at most 90% of the soft memory limit: at it, and one byte
// past it.
func TestLineUnder(t *testing.T) {
	for _, tt := range []struct{ line, soft, want int64 }{
		{1000, 0, 1000},
		{900, 1000, 900},
		{901, 1000, 900},
		{500, 1000, 500},
	} {
		if got := LineUnder(tt.line, tt.soft); got != tt.want {
			t.Errorf("LineUnder(%d, %d) = %d, want %d", tt.line, tt.soft, got, tt.want)
		}
	}
}

// A caller within its fair share of the memory budget (the large part
// divided among the callers holding some or waiting) that waits for room
// has the Manager cancel the call holding the most of the caller holding
// the most, when that caller is past the share; the room it frees goes to
// the waiting caller. One asking a byte past its share cancels nothing.
func TestPreemptsForACallerWithinItsShare(t *testing.T) {
	const large = 1<<20 - 1<<20/16 // membudget keeps a sixteenth for small reservations
	const fair = large / 2         // rich and poor
	// Beside 50 callers holding a kilobyte each (in the small part), the
	// share is still rich's and poor's halves of what is left: the share
	// is max-min, not the large part over the 52 callers.
	const tinyFair = (large - 50<<10) / 2
	// Beside work of no caller holding 300,000 bytes of the large part,
	// the share is rich's and poor's halves of the rest: that work's room
	// is not theirs to share. Counted as theirs, the share was the large
	// part's half, which rich held less than the rest of: rich was never
	// past it, and poor waited out its wait.
	const nobody = 300_000
	const nobodyFair = (large - nobody) / 2
	for _, tc := range []struct {
		name      string
		tiny      int
		nobody    int64
		ask, fair int64
		preempt   bool
	}{
		{"the fair share", 0, 0, fair, fair, true},
		{"a byte past it", 0, 0, fair + 1, fair, false},
		{"the fair share beside 50 callers holding a kilobyte", 50, 0, tinyFair, tinyFair, true},
		{"the fair share beside work of no caller", 0, nobody, nobodyFair, nobodyFair, true},
		{"a byte past it beside work of no caller", 0, nobody, nobodyFair + 1, nobodyFair, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			budget := membudget.New(1<<20, 300*time.Millisecond)
			m, err := New(Config{Line: 1 << 30, Logger: quiet, Read: (&gcHeap{}).read, Collect: func() {}, Budget: budget})
			if err != nil {
				t.Fatal(err)
			}
			for i := range tc.tiny {
				if _, err := budget.Reserve(membudget.WithCaller(context.Background(), fmt.Sprint("tiny", i)), "a kilobyte", 1<<10); err != nil {
					t.Fatal(err)
				}
			}
			if tc.nobody > 0 {
				if _, err := budget.Reserve(context.Background(), "work of no caller", tc.nobody); err != nil {
					t.Fatal(err)
				}
			}
			ctx, _, done := m.Track(membudget.WithCaller(context.Background(), "rich"), "rich's call")
			defer done()
			held, err := budget.Reserve(ctx, "rich's", large-100_000-tc.nobody)
			if err != nil {
				t.Fatal(err)
			}
			// Rich's handler gives back what it held once it is cancelled.
			stop := context.AfterFunc(ctx, held.Release)
			defer stop()
			_, err = budget.Reserve(membudget.WithCaller(context.Background(), "poor"), "poor's", tc.ask)
			if !tc.preempt {
				if err == nil || ctx.Err() != nil {
					t.Fatalf("asking past the fair share: reserved %v, rich cancelled %v; want neither", err == nil, ctx.Err() != nil)
				}
				return
			}
			if err != nil {
				t.Fatalf("poor, within its share: %v", err)
			}
			var se *ShedError
			if !errors.As(context.Cause(ctx), &se) || se.Fair != tc.fair || se.CallerHeld != large-100_000-tc.nobody {
				t.Fatalf("rich's call ended with %v, want a *ShedError of the fair share %d", context.Cause(ctx), tc.fair)
			}
			if s := m.Stats(); s.Shed != 1 || s.Preempted != 1 {
				t.Errorf("stats: shed %d, preempted %d; want 1, 1", s.Shed, s.Preempted)
			}
		})
	}
}

// preempt cancels a caller's call only when the caller holds more than the
// fair share, not when it holds the share itself, and once every
// PreemptEvery at most.
func TestPreemptAtTheShare(t *testing.T) {
	m := newManager(t, &gcHeap{})
	clock := time.Unix(1e9, 0)
	m.now = func() time.Time { return clock }
	ctxs := tracked(t, m, "rich", 300, 500)
	m.preempt(800, 1)
	if n := cancelled(ctxs); n != 0 {
		t.Fatalf("a caller holding its fair share: %d calls cancelled", n)
	}
	m.preempt(799, 1)
	if n := cancelled(ctxs); n != 1 || ctxs[1].Err() == nil {
		t.Fatalf("a caller a byte past its share: %d cancelled (the larger: %v), want its larger call", n, ctxs[1].Err() != nil)
	}
	clock = clock.Add(PreemptEvery - time.Nanosecond)
	m.preempt(1, 1)
	if n := cancelled(ctxs); n != 1 {
		t.Fatalf("within PreemptEvery of the last: %d cancelled, want still 1", n)
	}
	clock = clock.Add(time.Nanosecond)
	m.preempt(1, 1)
	if n := cancelled(ctxs); n != 2 {
		t.Fatalf("PreemptEvery after the last: %d cancelled, want 2", n)
	}
}

// preempt cancels until the calls cancelled held what the waiting
// reservation needs: one call when the largest held it, two when it
// takes both.
func TestPreemptFreesWhatIsNeeded(t *testing.T) {
	for _, tc := range []struct {
		need      int64
		cancelled int
	}{{500, 1}, {501, 2}} {
		m := newManager(t, &gcHeap{})
		ctxs := tracked(t, m, "rich", 300, 500)
		m.preempt(100, tc.need)
		if n := cancelled(ctxs); n != tc.cancelled {
			t.Errorf("need %d: %d calls cancelled, want %d", tc.need, n, tc.cancelled)
		}
	}
}

// preempt cancels PreemptCalls calls at most at once, however many it
// would take to free what the waiting reservation needs.
func TestPreemptCallsAtMost(t *testing.T) {
	m := newManager(t, &gcHeap{})
	ctxs := tracked(t, m, "rich", slices.Repeat([]int64{10}, PreemptCalls+1)...)
	m.preempt(1, 1000)
	if n := cancelled(ctxs); n != PreemptCalls {
		t.Fatalf("%d calls cancelled, want %d", n, PreemptCalls)
	}
}

// tracked tracks a call of caller for each of held, each holding it, and
// returns their contexts; the calls end with the test.
func tracked(t *testing.T, m *Manager, caller string, held ...int64) []context.Context {
	t.Helper()
	var ctxs []context.Context
	for _, h := range held {
		ctx, call, done := m.Track(membudget.WithCaller(context.Background(), caller), "call")
		t.Cleanup(done)
		call.Add(h)
		ctxs = append(ctxs, ctx)
	}
	return ctxs
}

// cancelled counts the contexts that ended.
func cancelled(ctxs []context.Context) (n int) {
	for _, ctx := range ctxs {
		if ctx.Err() != nil {
			n++
		}
	}
	return n
}

// A caller within its share whose wait begins within PreemptEvery of
// another preemption is served by a later ask (membudget.AskEvery): it
// asked once and waited its whole wait before.
func TestPreemptOnALaterAsk(t *testing.T) {
	const large = 1<<20 - 1<<20/16
	budget := membudget.New(1<<20, time.Second)
	m, err := New(Config{Line: 1 << 30, Logger: quiet, Read: (&gcHeap{}).read, Collect: func() {}, Budget: budget})
	if err != nil {
		t.Fatal(err)
	}
	ctx, _, done := m.Track(membudget.WithCaller(context.Background(), "rich"), "rich's call")
	defer done()
	held, err := budget.Reserve(ctx, "rich's", large-100_000)
	if err != nil {
		t.Fatal(err)
	}
	stop := context.AfterFunc(ctx, held.Release)
	defer stop()
	m.mu.Lock()
	m.nextPreempt = time.Now().Add(3 * membudget.AskEvery) // as if another caller's ask had just cancelled a call
	m.mu.Unlock()
	t0 := time.Now()
	r, err := budget.Reserve(membudget.WithCaller(context.Background(), "poor"), "poor's", large/2)
	if err != nil {
		t.Fatalf("poor, within its share, asking again while it waited: %v", err)
	}
	r.Release()
	if ctx.Err() == nil {
		t.Fatal("rich's call was not cancelled")
	}
	if waited := time.Since(t0); waited < 2*membudget.AskEvery {
		t.Fatalf("served after %v, before the preemption was allowed again", waited)
	}
}

// What a caller holds of the budget outside its calls (a reservation in
// its name that no tracked call holds) counts in what preempt weighs it
// at: rich's call holds less than the fair share, rich more, and its call
// is cancelled for poor. Weighed by its calls alone, rich was within the
// share and poor waited out its wait.
func TestPreemptCountsWhatACallerHoldsOutsideItsCalls(t *testing.T) {
	const large = 1<<20 - 1<<20/16
	budget := membudget.New(1<<20, 300*time.Millisecond)
	m, err := New(Config{Line: 1 << 30, Logger: quiet, Read: (&gcHeap{}).read, Collect: func() {}, Budget: budget})
	if err != nil {
		t.Fatal(err)
	}
	rich := membudget.WithCaller(context.Background(), "rich")
	if _, err := budget.Reserve(rich, "rich's, outside its call", 400_000); err != nil {
		t.Fatal(err)
	}
	ctx, _, done := m.Track(rich, "rich's call")
	defer done()
	held, err := budget.Reserve(ctx, "rich's call's", large-500_000)
	if err != nil {
		t.Fatal(err)
	}
	stop := context.AfterFunc(ctx, held.Release)
	defer stop()
	r, err := budget.Reserve(membudget.WithCaller(context.Background(), "poor"), "poor's", large/2)
	if err != nil {
		t.Fatalf("poor, within its share: %v", err)
	}
	r.Release()
	var se *ShedError
	if !errors.As(context.Cause(ctx), &se) || se.CallerHeld != large-100_000 {
		t.Fatalf("rich's call ended with %v, want a *ShedError of rich holding %d", context.Cause(ctx), large-100_000)
	}
}
