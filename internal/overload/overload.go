package overload

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/exprd/exprd/membudget"
)

// The defaults. The thresholds are fractions of the line.
const (
	// DefaultInterval is how often the heap is read: often enough that a
	// program allocating as fast as one can (about 50 MB in 100 ms) moves
	// the heap by a few percent of a line of hundreds of MiB between two
	// reads; a read costs microseconds.
	DefaultInterval = 100 * time.Millisecond
	// DefaultRefuse is the part of the line past which new work is
	// refused: what is in flight may still grow by the rest before the
	// line. (At 80%, the budget itself, the hostile run's clients that
	// never read kept the steady client refused for over half a second;
	// at 90%, all its cases at once still pass the line.)
	DefaultRefuse = 0.90
	// DefaultShed is the part of the line past which calls in flight are
	// cancelled, one each interval: refusing alone did not stop the heap.
	DefaultShed = 0.95
	// DefaultLineOverBudget is how far past the memory budget the line
	// is, as a part of the budget: the budget holds what is reserved, and
	// the quarter more is for what is not (the runtime, connections,
	// compiled programs, a program's working memory).
	DefaultLineOverBudget = 0.25
)

// DefaultSoftLimitShare is the most of the runtime's soft memory limit
// (GOMEMLIMIT) the line may be (LineUnder): the GC needs room above what
// is live, or it runs back to back and the heap passes the limit anyway.
// In the hostile mix with the line at the limit and the budget under it,
// 150 goroutines waited on the GC and the resident set passed the line by
// up to a third in two runs of three; with the line at 90% of the limit,
// it held in three of three and exprd spent a third less CPU.
const DefaultSoftLimitShare = 0.9

// LineUnder is line, or DefaultSoftLimitShare of the soft memory limit
// soft when that is lower (soft 0: none).
func LineUnder(line, soft int64) int64 {
	if soft <= 0 {
		return line
	}
	return min(line, int64(float64(soft)*DefaultSoftLimitShare))
}

// collectShare bounds the collections the Manager runs because a call
// ended (not one it cancelled) while the heap is past the refuse
// threshold: after one that took d, none for (collectShare-1)·d, so that
// they take at most 1/collectShare of the time however many calls end.
const collectShare = 10

// LineFor is the line for a memory budget of budget bytes: the budget and
// DefaultLineOverBudget of it more.
func LineFor(budget int64) int64 {
	return budget + int64(float64(budget)*DefaultLineOverBudget)
}

// ErrOverloaded is what every error of this package is (errors.Is): the
// process is short of memory.
var ErrOverloaded = errors.New("overload: the server is short of memory")

// RefusedError is Admit's refusal of new work.
type RefusedError struct {
	Heap     int64 // the measure at the last check
	RefuseAt int64 // the refuse threshold, in bytes
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("overload: new work refused: the heap holds %d bytes, past %d", e.Heap, e.RefuseAt)
}

// Is makes a RefusedError ErrOverloaded.
func (e *RefusedError) Is(target error) bool { return target == ErrOverloaded }

// ShedError is the cause a cancelled call's context is cancelled with.
type ShedError struct {
	Name   string // the call's name, as given to Track
	Held   int64  // what the call's counts said it held
	Heap   int64  // the measure when it was cancelled
	ShedAt int64  // the shed threshold, in bytes
	// Fair, when set, is the fair share of the memory budget past which
	// its caller held CallerHeld while a caller within it waited (the
	// Manager's preempt), rather than the heap past ShedAt.
	Fair, CallerHeld int64
}

func (e *ShedError) Error() string {
	if e.Fair > 0 {
		return fmt.Sprintf("overload: %s cancelled: its caller held %d bytes of the memory budget, past its fair share of %d, while a caller within it waited, and it held the most (%d counted)", e.Name, e.CallerHeld, e.Fair, e.Held)
	}
	return fmt.Sprintf("overload: %s cancelled: the heap holds %d bytes, past %d, and it held the most (%d counted)", e.Name, e.Heap, e.ShedAt, e.Held)
}

// Is makes a ShedError ErrOverloaded.
func (e *ShedError) Is(target error) bool { return target == ErrOverloaded }

// Reading is one look at the process's memory.
type Reading struct {
	// Heap is the measure, in bytes: what the last GC found live on the
	// heap plus goroutine stacks, or what the runtime holds resident when
	// that is past the soft memory limit (see RuntimeReader).
	Heap int64
	// GCs is the count of GC cycles completed.
	GCs uint64
}

// A Reader reads the process's memory. A Manager never calls it from two
// goroutines at once.
type Reader func() Reading

// RuntimeReader reads the runtime's metrics: /gc/heap/live:bytes plus
// /memory/classes/heap/stacks:bytes, and /gc/cycles/total:gc-cycles. When
// the memory the runtime holds from the system and has not given back
// (/memory/classes/total:bytes less /memory/classes/heap/released:bytes,
// what the kernel counts resident) is past the soft memory limit
// (GOMEMLIMIT, debug.SetMemoryLimit), the measure is that instead, if it
// is more: below the limit the GC frees garbage before the process grows,
// so only what is live counts; past it, the GC is not keeping up (it runs
// back to back, the heap's own overhead over the live objects is resident
// too), and that memory is what the OOM killer sees. Measured in the
// hostile mix with a 256 MiB limit: 290 MB live, 357 MiB resident.
func RuntimeReader() Reader {
	samples := []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/heap/stacks:bytes"},
		{Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
	}
	u := func(i int) uint64 {
		if samples[i].Value.Kind() != metrics.KindUint64 {
			return 0 // not supported by this runtime
		}
		return samples[i].Value.Uint64()
	}
	return func() Reading {
		metrics.Read(samples)
		r := Reading{Heap: int64(u(0) + u(1)), GCs: u(2)}
		return r.orResident(int64(u(3))-int64(u(4)), debug.SetMemoryLimit(-1))
	}
}

// orResident is r with resident bytes as its measure when they are past
// the soft memory limit and more than its own.
func (r Reading) orResident(resident, softLimit int64) Reading {
	if resident > softLimit && resident > r.Heap {
		r.Heap = resident
	}
	return r
}

// Config configures a Manager.
type Config struct {
	// Line is the most the measure should reach, in bytes (LineFor of the
	// memory budget); it must be positive.
	Line int64
	// Refuse and Shed are the thresholds, as parts of Line, each in
	// (0, 1], Refuse at most Shed (0: DefaultRefuse, DefaultShed).
	Refuse, Shed float64
	// Interval is how often Run checks (0: DefaultInterval).
	Interval time.Duration
	// Logger logs what the Manager does (nil: slog.Default()).
	Logger *slog.Logger
	// Read reads the process's memory (nil: RuntimeReader()).
	Read Reader
	// Collect runs a GC and returns once it is complete (nil: runtime.GC).
	Collect func()
	// Budget, when set, is restricted while the Manager refuses
	// (membudget.Budget.Restrict): the work in flight takes no more of it
	// but for callers that hold next to none. And a caller within its fair
	// share of it that waits for room has the Manager cancel calls of the
	// caller holding the most past its share (membudget.Budget.OnWait).
	Budget *membudget.Budget
}

// Manager watches the heap and acts on it. Its methods are safe for
// concurrent use.
type Manager struct {
	line, refuseAt, shedAt int64
	interval               time.Duration
	log                    *slog.Logger
	read                   Reader
	collect                func()
	budget                 *membudget.Budget

	refusing    atomic.Bool
	heap        atomic.Int64 // the measure at the last check
	refused     atomic.Int64
	shed        atomic.Int64 // calls cancelled
	preempted   atomic.Int64 // of those, the ones preempt cancelled
	shedEnded   atomic.Int64 // of those, the ones whose work has ended
	ended       atomic.Int64 // tracked calls ended, the cancelled ones too
	collections atomic.Int64
	seq         atomic.Uint64

	mu      sync.Mutex
	calls   map[*Call]struct{}
	callers map[string]int // calls in flight by caller (membudget.CallerOf), while it has any

	// Check's own, under checkMu.
	checkMu          sync.Mutex
	lastGCs          uint64
	atCollect        struct{ ended, shed, shedEnded int64 }
	nextCollect      time.Time // no collection for a call that ended before it
	saidNothingToCut bool
	now              func() time.Time

	nextPreempt time.Time // under mu
}

// New returns a Manager; it checks nothing until Run (or Check) is called.
func New(c Config) (*Manager, error) {
	if c.Refuse == 0 {
		c.Refuse = DefaultRefuse
	}
	if c.Shed == 0 {
		c.Shed = DefaultShed
	}
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	switch {
	case c.Line <= 0:
		return nil, fmt.Errorf("overload: line %d bytes: want a positive size", c.Line)
	case !(c.Refuse > 0 && c.Refuse <= 1) || !(c.Shed > 0 && c.Shed <= 1):
		return nil, fmt.Errorf("overload: refuse %v, shed %v: want each in (0, 1]", c.Refuse, c.Shed)
	case c.Refuse > c.Shed:
		return nil, fmt.Errorf("overload: refuse %v is past shed %v: want refuse at most shed", c.Refuse, c.Shed)
	case c.Interval < 0:
		return nil, fmt.Errorf("overload: interval %v: want a positive duration", c.Interval)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Read == nil {
		c.Read = RuntimeReader()
	}
	if c.Collect == nil {
		c.Collect = runtime.GC
	}
	m := &Manager{line: c.Line, refuseAt: int64(float64(c.Line) * c.Refuse), shedAt: int64(float64(c.Line) * c.Shed),
		interval: c.Interval, log: c.Logger, read: c.Read, collect: c.Collect, budget: c.Budget, calls: map[*Call]struct{}{}, callers: map[string]int{}, now: time.Now}
	c.Budget.OnWait(m.preempt)
	return m, nil
}

// Stats is what a Manager has seen and done.
type Stats struct {
	Line, RefuseAt, ShedAt int64 // the line and the thresholds, in bytes
	Heap                   int64 // the measure at the last check
	Refusing               bool  // Admit refuses
	InFlight               int   // calls tracked now
	Refused                int64 // Admit's refusals
	Shed                   int64 // calls cancelled
	Preempted              int64 // of those, the ones cancelled for a caller within its fair share of the budget
	Collections            int64 // GCs the Manager ran
}

// Stats returns the Manager's figures now.
func (m *Manager) Stats() Stats {
	m.mu.Lock()
	n := len(m.calls)
	m.mu.Unlock()
	return Stats{Line: m.line, RefuseAt: m.refuseAt, ShedAt: m.shedAt, Heap: m.heap.Load(), Refusing: m.refusing.Load(),
		InFlight: n, Refused: m.refused.Load(), Shed: m.shed.Load(), Preempted: m.preempted.Load(), Collections: m.collections.Load()}
}

// Admit says whether new work may start: nil, or a *RefusedError while
// the measure is past the refuse threshold. Enter admits by caller.
func (m *Manager) Admit() error {
	if !m.refusing.Load() {
		return nil
	}
	return m.refuse()
}

func (m *Manager) refuse() error {
	m.refused.Add(1)
	return &RefusedError{Heap: m.heap.Load(), RefuseAt: m.refuseAt}
}

// Enter admits a call named name and tracks it as Track does, or refuses
// it with a *RefusedError. While the measure is past the refuse
// threshold, a caller (membudget.CallerOf(ctx): a token's caller, or a
// client's address) is admitted only when it has no call in flight: the
// callers whose many calls fill the heap are refused, while one that
// sends a request at a time (a steady client, a user reading back its
// state) is still served, one call at a time. Work of no caller is
// refused, as Admit refuses it.
func (m *Manager) Enter(ctx context.Context, name string) (context.Context, *Call, func(), error) {
	caller := membudget.CallerOf(ctx)
	m.mu.Lock()
	if m.refusing.Load() && (caller == "" || m.callers[caller] > 0) {
		m.mu.Unlock()
		return nil, nil, nil, m.refuse()
	}
	ctx, c, done := m.trackLocked(ctx, name, caller)
	m.mu.Unlock()
	return ctx, c, done, nil
}

// Call is one call in flight, as Track registered it.
type Call struct {
	name   string
	caller string // membudget.CallerOf its context
	seq    uint64
	start  time.Time
	held   atomic.Int64
	cancel context.CancelCauseFunc
	shed   bool // under the Manager's mu
	m      *Manager
}

type callKey struct{}

// FromContext is the Call ctx was tracked as, or nil.
func FromContext(ctx context.Context) *Call {
	c, _ := ctx.Value(callKey{}).(*Call)
	return c
}

// Add counts n more bytes (less, when negative) as held by the call: a
// reservation made for it, bytes a meter counted. On nil it does nothing.
func (c *Call) Add(n int64) {
	if c != nil {
		c.held.Add(n)
	}
}

// Held is the bytes counted for the call (0 for nil).
func (c *Call) Held() int64 {
	if c == nil {
		return 0
	}
	return c.held.Load()
}

// Shed reports whether the Manager cancelled the call.
func (c *Call) Shed() bool {
	if c == nil {
		return false
	}
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	return c.shed
}

// Track registers a call named name (a method) until done is called, once,
// when its work has ended. The call's work runs in the returned context,
// which the Manager cancels with a *ShedError to shed it, and in which
// FromContext finds the Call.
func (m *Manager) Track(ctx context.Context, name string) (context.Context, *Call, func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.trackLocked(ctx, name, membudget.CallerOf(ctx))
}

// trackLocked is Track for caller; m.mu is held.
func (m *Manager) trackLocked(ctx context.Context, name, caller string) (context.Context, *Call, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	c := &Call{name: name, caller: caller, seq: m.seq.Add(1), start: time.Now(), cancel: cancel, m: m}
	// What the memory budget reserves for the call is counted as held by
	// it, as are the bytes a meter counts (Add).
	ctx = membudget.WithHolder(context.WithValue(ctx, callKey{}, c), c)
	m.calls[c] = struct{}{}
	if caller != "" {
		m.callers[caller]++
	}
	return ctx, c, func() {
		m.mu.Lock()
		delete(m.calls, c)
		if caller != "" {
			if m.callers[caller]--; m.callers[caller] <= 0 {
				delete(m.callers, caller)
			}
		}
		shed := c.shed
		m.mu.Unlock()
		if shed {
			m.shedEnded.Add(1)
		}
		m.ended.Add(1)
		cancel(context.Canceled)
	}
}

// Run checks every interval until ctx ends; then Admit admits again.
func (m *Manager) Run(ctx context.Context) {
	defer m.budget.Restrict(false)
	defer m.refusing.Store(false)
	t := time.NewTicker(m.interval)
	defer t.Stop()
	for {
		m.Check()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Check reads the heap once and acts: it refuses or admits from now on,
// and past the shed threshold cancels one call. Run calls it every
// interval; a test may call it instead.
func (m *Manager) Check() {
	m.checkMu.Lock()
	defer m.checkMu.Unlock()
	r := m.read()
	gcRan := r.GCs != m.lastGCs
	if start := m.now(); r.Heap > m.refuseAt && m.mayHaveFreed(gcRan, start) {
		m.atCollect.ended, m.atCollect.shed, m.atCollect.shedEnded = m.ended.Load(), m.shed.Load(), m.shedEnded.Load()
		m.collect()
		end := m.now()
		m.nextCollect = end.Add((collectShare - 1) * end.Sub(start))
		m.collections.Add(1)
		before := r.Heap
		r = m.read()
		m.log.Debug("overload: collected garbage to see what was freed", "heap_bytes_before", before, "heap_bytes", r.Heap, "took", end.Sub(start).String())
	}
	m.lastGCs = r.GCs
	m.heap.Store(r.Heap)
	refusing := r.Heap > m.refuseAt
	if refusing != m.refusing.Load() {
		m.refusing.Store(refusing)
		m.budget.Restrict(refusing)
		if refusing {
			m.log.Warn("overload: refusing new work", "heap_bytes", r.Heap, "refuse_at_bytes", m.refuseAt, "line_bytes", m.line)
		} else {
			m.log.Info("overload: admitting new work again", "heap_bytes", r.Heap, "refuse_at_bytes", m.refuseAt, "line_bytes", m.line)
		}
	}
	if r.Heap > m.shedAt {
		m.shedOne(r.Heap)
	} else {
		m.saidNothingToCut = false
	}
}

// mayHaveFreed says whether a GC of the Manager's own could show memory
// freed that the last reading does not: a cancelled call has ended since
// its last one (whatever GCs ran meanwhile: one may have started before
// the call let go), or, when no GC has completed since the last check, a
// call ended or was cancelled since its last one (and collectShare allows
// one now).
func (m *Manager) mayHaveFreed(gcRan bool, now time.Time) bool {
	if m.shedEnded.Load() != m.atCollect.shedEnded {
		return true
	}
	changed := m.ended.Load() != m.atCollect.ended || m.shed.Load() != m.atCollect.shed
	return changed && !gcRan && !now.Before(m.nextCollect)
}

// shedOne cancels one call not cancelled yet: of the caller whose calls
// hold the most in all (membudget.CallerOf; a call of no caller is a
// caller of its own), the call holding the most, the oldest among equals.
// By call alone, a user whose one state was large was cancelled before a
// caller whose 128 streams held 8 MB each.
func (m *Manager) shedOne(heap int64) {
	m.mu.Lock()
	victim, most, _ := m.pickLocked(m.heldLocked())
	if victim != nil {
		victim.shed = true
	}
	inFlight := len(m.calls)
	m.mu.Unlock()
	if victim == nil {
		if !m.saidNothingToCut {
			m.log.Warn("overload: past the shed threshold with no call left to cancel", "heap_bytes", heap, "shed_at_bytes", m.shedAt, "line_bytes", m.line)
			m.saidNothingToCut = true
		}
		return
	}
	m.shed.Add(1)
	victim.cancel(&ShedError{Name: victim.name, Held: most, Heap: heap, ShedAt: m.shedAt})
	m.log.Warn("overload: cancelled the call holding the most", "call", victim.name, "held_bytes", most,
		"age", time.Since(victim.start).String(), "heap_bytes", heap, "shed_at_bytes", m.shedAt, "line_bytes", m.line, "in_flight", inFlight)
}

// heldLocked is what the calls not cancelled yet hold, by caller (calls
// of no caller left out). m.mu is held.
func (m *Manager) heldLocked() map[string]int64 {
	byCaller := map[string]int64{}
	for c := range m.calls {
		if !c.shed && c.caller != "" {
			byCaller[c.caller] += c.held.Load()
		}
	}
	return byCaller
}

// callersLocked is what each caller with a call in flight holds: the
// budget's count (membudget.Budget.Callers) where it is more than its
// calls' (heldLocked's), as it is when the caller holds room outside
// them (its messages on their way in, a turn's history kept for a
// resume). Counting only its calls' left a caller holding 98 MB of the
// budget at 50, within a fair share of 70, while a caller within it
// waited and was refused. The budget's count still has what calls
// cancelled a moment ago hold, until they end (within milliseconds in
// the hostile mix); a later ask, PreemptEvery on, sees it given back.
// m.mu is held.
func (m *Manager) callersLocked() map[string]int64 {
	byCaller := m.heldLocked()
	budget := m.budget.Callers()
	for caller, calls := range byCaller {
		byCaller[caller] = max(calls, budget[caller])
	}
	return byCaller
}

// pickLocked is the call shedOne and preempt cancel: of the caller whose
// calls not cancelled yet hold the most in all (byCaller, heldLocked's; a
// call of no caller is a caller of its own), the call holding the most,
// the oldest among equals; with what it holds and what its caller holds.
// m.mu is held.
func (m *Manager) pickLocked(byCaller map[string]int64) (victim *Call, most, mostTotal int64) {
	total := func(c *Call) int64 {
		if c.caller == "" {
			return c.held.Load()
		}
		return byCaller[c.caller]
	}
	for c := range m.calls {
		if c.shed {
			continue
		}
		held, t := c.held.Load(), total(c)
		if victim == nil || t > mostTotal || (t == mostTotal && (held > most || (held == most && c.seq < victim.seq))) {
			victim, most, mostTotal = c, held, t
		}
	}
	return victim, most, mostTotal
}

// PreemptEvery is how often at most preempt cancels calls, and
// PreemptCalls how many at most each time: each is found by a pass over
// the calls in flight.
const (
	PreemptEvery = 50 * time.Millisecond
	PreemptCalls = 16
)

// preempt is the budget's OnWait: a caller's reservation of need bytes,
// within its fair share, waits for room in the spent budget. While the
// caller holding the most (callersLocked) holds more than fair, its call
// holding the most is cancelled (a *ShedError whose Fair is set), until
// the calls cancelled held need (PreemptCalls at most); it reports
// whether it cancelled any, and the budget keeps the room they free for
// the reservation. At most once every PreemptEvery. A caller holding its
// fair share or less is never cancelled for another: however many
// callers ask, what one can take from the others is what brings them
// down to the share.
func (m *Manager) preempt(fair, need int64) bool {
	now := m.now()
	m.mu.Lock()
	if now.Before(m.nextPreempt) {
		m.mu.Unlock()
		return false
	}
	type cut struct {
		c           *Call
		held, total int64
	}
	var cuts []cut
	byCaller := m.callersLocked()
	for freed := int64(0); freed < need && len(cuts) < PreemptCalls; {
		victim, most, total := m.pickLocked(byCaller)
		if victim == nil || total <= fair {
			break
		}
		victim.shed = true
		if victim.caller != "" {
			byCaller[victim.caller] -= most
		}
		cuts = append(cuts, cut{victim, most, total})
		freed += most
	}
	if len(cuts) > 0 {
		m.nextPreempt = now.Add(PreemptEvery)
	}
	m.mu.Unlock()
	for _, c := range cuts {
		m.shed.Add(1)
		m.preempted.Add(1)
		c.c.cancel(&ShedError{Name: c.c.name, Held: c.held, Heap: m.heap.Load(), ShedAt: m.shedAt, Fair: fair, CallerHeld: c.total})
		m.log.Warn("overload: cancelled the call holding the most of the caller holding the most of the memory budget, past its fair share, for a caller within it that waits",
			"call", c.c.name, "held_bytes", c.held, "caller_held_bytes", c.total, "fair_share_bytes", fair, "waits_for_bytes", need)
	}
	return len(cuts) > 0
}
