package server_test

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/exprd/exprd/evaluator"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/internal/overload"
	"github.com/exprd/exprd/membudget"
	"github.com/exprd/exprd/server"
	"github.com/exprd/exprd/server/auth"
)

// heldHeap stands in for the runtime's reading in the tests that need it
// exact (the package's other tests allocate in parallel): the bytes the
// test's functions hold, shown as a GC would show them, only once one has
// run, the runtime's (gc) or the manager's (collect).
type heldHeap struct {
	mu         sync.Mutex
	held, live int64
	gcs        uint64
	collects   int
}

func (h *heldHeap) add(n int64) {
	h.mu.Lock()
	h.held += n
	h.mu.Unlock()
}

func (h *heldHeap) gc() {
	h.mu.Lock()
	h.live = h.held
	h.gcs++
	h.mu.Unlock()
}

func (h *heldHeap) collect() {
	h.gc()
	h.mu.Lock()
	h.collects++
	h.mu.Unlock()
}

func (h *heldHeap) read() overload.Reading {
	h.mu.Lock()
	defer h.mu.Unlock()
	return overload.Reading{Heap: h.live, GCs: h.gcs}
}

func (h *heldHeap) collected() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.collects
}

// holder is a server function that allocates size bytes no memory budget
// knows of and holds them until its call's context ends (or release is
// closed, if it is not nil), telling heap (when not nil) what it holds and,
// with count, its call too, as a per-call byte meter would
// (overload.FromContext). Each call sends on started once it holds them.
func holder(name string, size int, heap *heldHeap, count bool, release <-chan struct{}, started chan<- string) evaluator.Function {
	return evaluator.Function{Name: name, Impl: func(ctx context.Context, _ map[string]any) (any, error) {
		b := make([]byte, size)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1 // resident, not just reserved
		}
		if heap != nil {
			heap.add(int64(size))
			defer heap.add(-int64(size))
		}
		if count {
			overload.FromContext(ctx).Add(int64(size))
		}
		started <- name
		defer runtime.KeepAlive(b)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-release:
			return map[string]any{"held": len(b)}, nil
		}
	}}
}

// callOf is a unary ExprTool call of the server function fn.
func callOf(fn string) *exprdv1.CallRequest {
	return &exprdv1.CallRequest{
		Settings:  &exprdv1.Settings{Functions: []*exprdv1.Function{{Name: fn, Runner: exprdv1.Function_RUNNER_SERVER}}},
		InputJson: `{"steps": [{"set": "scopes.root.r", "expr": "` + fn + `({})"}]}`,
	}
}

// overloaded fails unless err is RESOURCE_EXHAUSTED, OVERLOADED, with
// action and a RetryInfo exactly when action is "refused".
func overloaded(t *testing.T, err error, action string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("got %v, want RESOURCE_EXHAUSTED", err)
	}
	var info *errdetails.ErrorInfo
	var retry *errdetails.RetryInfo
	var quota *errdetails.QuotaFailure
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			info = d
		case *errdetails.RetryInfo:
			retry = d
		case *errdetails.QuotaFailure:
			quota = d
		}
	}
	if info.GetReason() != "OVERLOADED" || info.GetDomain() != "exprd" || info.GetMetadata()["action"] != action {
		t.Errorf("ErrorInfo %v, want reason OVERLOADED, action %s", info, action)
	}
	if len(quota.GetViolations()) != 1 || quota.GetViolations()[0].GetSubject() != "overload" {
		t.Errorf("QuotaFailure %v, want the subject overload", quota)
	}
	if want := action == "refused"; (retry != nil) != want || (want && retry.GetRetryDelay().AsDuration() <= 0) {
		t.Errorf("RetryInfo %v with action %s", retry, action)
	}
}

// With a memory budget of 800 KiB (a line of 1,000 KiB: refusing past
// 900, cancelling past 950), an older call holding 16 KiB and a newer one
// holding 960 KiB that no budget knows of, counted by its meter: the
// manager cancels the larger (OVERLOADED, cancelled), not the older;
// refuses new calls and streams meanwhile (OVERLOADED with a RetryInfo,
// their functions never reached) but not health checks; collects once the
// cancelled call has ended, although the runtime ran no GC since; and then
// admits calls again. The small call ends as it would have.
func TestOverloadShedsTheCallHoldingTheMost(t *testing.T) {
	t.Parallel()
	heap := &heldHeap{}
	budget := membudget.New(800<<10, time.Second)
	m, err := overload.New(overload.Config{Line: overload.LineFor(budget.Limit()), Logger: quietLog, Read: heap.read, Collect: heap.collect})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan string, 3)
	release := make(chan struct{})
	reached := make(chan string, 1)
	reader := metric.NewManualReader()
	conn := serve(t, newServer(t, server.WithMeterProvider(metric.NewMeterProvider(metric.WithReader(reader))),
		server.WithMemoryBudget(budget), server.WithOverload(m), server.WithFunctions(
			holder("small", 16<<10, heap, true, release, started),
			holder("hog", 960<<10, heap, true, nil, started),
			evaluator.Function{Name: "later", Impl: func(context.Context, map[string]any) (any, error) { reached <- "later"; return 1, nil }},
		)))
	c := exprdv1.NewExprToolClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	done := map[string]chan error{"small": make(chan error, 1), "hog": make(chan error, 1)}
	for _, fn := range []string{"small", "hog"} {
		go func() {
			_, err := c.Call(ctx, callOf(fn))
			done[fn] <- err
		}()
		if got := <-started; got != fn {
			t.Fatalf("%s started, want %s", got, fn)
		}
	}
	heap.gc()
	m.Check() // 976 KiB, past 950
	overloaded(t, <-done["hog"], "cancelled")
	if st := m.Stats(); st.Shed != 1 || !st.Refusing {
		t.Fatalf("stats %+v, want one shed and refusing", st)
	}

	_, err = c.Call(ctx, callOf("later"))
	overloaded(t, err, "refused")
	stream, err := c.Session(ctx)
	if err == nil {
		_, err = stream.Recv()
	}
	overloaded(t, err, "refused")
	if hc, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || hc.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health while refusing: %v, %v; want SERVING", hc, err)
	}
	select {
	case fn := <-reached:
		t.Fatalf("%s ran while the server refused", fn)
	default:
	}

	m.Check() // the hog has ended: collect, 16 KiB
	if heap.collected() != 1 || m.Admit() != nil {
		t.Fatalf("collected %d times, Admit %v; want once, admitted", heap.collected(), m.Admit())
	}
	if _, err := c.Call(ctx, callOf("later")); err != nil {
		t.Fatalf("after the heap fell: %v", err)
	}
	close(release)
	if err := <-done["small"]; err != nil {
		t.Errorf("the small call: %v, want its answer", err)
	}
	for name, want := range map[string]int64{"exprd.overload.shed": 1, "exprd.overload.refusals": 2, "exprd.overload.collections": 1} {
		if got := counterSum(t, reader, name); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
	for name, want := range map[string]int64{"exprd.overload.heap": 16 << 10, "exprd.overload.line": 1000 << 10} {
		if got := gaugeValue(t, reader, name); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
}

// gaugeValue is the value of the int64 gauge name, or -1.
func gaugeValue(t *testing.T, r *metric.ManualReader, name string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if d, ok := m.Data.(metricdata.Gauge[int64]); ok && m.Name == name && len(d.DataPoints) == 1 {
				return d.DataPoints[0].Value
			}
		}
	}
	return -1
}

// A Session the manager cancels: its call's function sees its context
// end at once, and the stream ends RESOURCE_EXHAUSTED, OVERLOADED at
// once, without waiting for the client's next message (the state it
// holds is let go with it).
func TestOverloadShedsASession(t *testing.T) {
	t.Parallel()
	heap := &heldHeap{}
	m, err := overload.New(overload.Config{Line: 1000, Logger: quietLog, Read: heap.read, Collect: heap.collect})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan string, 1)
	c := startServer(t, server.WithOverload(m), server.WithFunctions(holder("hog", 1000, heap, false, nil, started)))
	s := openSession(t, c, &exprdv1.Open{Settings: &exprdv1.Settings{Functions: []*exprdv1.Function{{Name: "hog", Runner: exprdv1.Function_RUNNER_SERVER}}}})
	s.call("c", `{"steps": [{"expr": "hog({})"}]}`)
	<-started
	heap.gc()
	m.Check()
	if m.Stats().Shed != 1 {
		t.Fatal("the session was not cancelled")
	}
	for {
		_, err := s.stream.Recv()
		if err != nil {
			overloaded(t, err, "cancelled")
			break
		}
	}
}

// On the real runtime, a server function that allocates 256 MiB no budget
// knows of and counts nowhere, over a small budget (a line 64 MiB over the
// process's heap): the manager's reading sees it, its call is cancelled
// (OVERLOADED, cancelled); the caller, with no call in flight, is served
// one call (a waiter), and while that one is in flight its new calls are
// refused until the heap falls, then admitted again. Not parallel: the
// reading is the whole process's.
func TestOverloadRealHeap(t *testing.T) {
	runtime.GC()
	base := overload.RuntimeReader()().Heap
	budget := membudget.New(int64(float64(base+64<<20)/(1+overload.DefaultLineOverBudget)), time.Second)
	m, err := overload.New(overload.Config{Line: overload.LineFor(budget.Limit()), Interval: 10 * time.Millisecond, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { m.Run(runCtx); close(ran) }()
	defer func() { stop(); <-ran }()
	started := make(chan string, 1)
	release := make(chan struct{})
	c := startServer(t, server.WithMemoryBudget(budget), server.WithOverload(m), server.WithFunctions(
		holder("hog", 256<<20, nil, false, nil, started), holder("waiter", 0, nil, false, release, started), echoFunction))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	hog := make(chan error, 1)
	go func() {
		_, err := c.Call(ctx, callOf("hog"))
		hog <- err
	}()
	<-started
	select {
	case err := <-hog:
		overloaded(t, err, "cancelled")
	case <-ctx.Done():
		t.Fatalf("the hog was not cancelled: %+v", m.Stats())
	}
	// The waiter starts once the hog's memory is seen to be let go of
	// (past the shed threshold it could be the next call cancelled).
	for st := m.Stats(); st.Heap > st.ShedAt; st = m.Stats() {
		select {
		case <-time.After(time.Millisecond):
		case <-ctx.Done():
			t.Fatalf("the hog's memory was never let go of: %+v", st)
		}
	}
	waiter := make(chan error, 1)
	go func() {
		_, err := c.Call(ctx, callOf("waiter"))
		waiter <- err
	}()
	select {
	case <-started:
	case err := <-waiter:
		t.Fatalf("the caller's one call was not served: %v (%+v)", err, m.Stats())
	}
	defer func() {
		close(release)
		if err := <-waiter; err != nil {
			t.Errorf("the waiter: %v", err)
		}
	}()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	refused := 0
	for {
		_, err := c.Call(ctx, callOf("echo"))
		if err == nil {
			break
		}
		overloaded(t, err, "refused")
		refused++
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("never admitted again: %+v", m.Stats())
		}
	}
	t.Logf("refused %d calls while the waiter was in flight", refused)
	if st := m.Stats(); st.Shed != 1 || st.Heap > st.RefuseAt || st.Refused != int64(refused) {
		t.Errorf("stats %+v, want one shed, the heap under the refuse threshold, %d refused", st, refused)
	}
}

// Bob, within his fair share of the memory budget, waits for room while
// alice holds most of it: the manager cancels her Session (OVERLOADED,
// cancelled, saying she held more than her fair share), whose state is
// let go, and bob's state takes the room.
func TestOverloadPreemptsForACallerWithinItsShare(t *testing.T) {
	t.Parallel()
	budget := membudget.New(1<<20, 5*time.Second)
	m, err := overload.New(overload.Config{Line: 1 << 40, Logger: quietLog, Read: (&heldHeap{}).read, Collect: func() {}, Budget: budget})
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.ParseTokens(strings.NewReader("alice " + aliceToken + " *\nbob " + bobToken + " *"))
	if err != nil {
		t.Fatal(err)
	}
	c := startServer(t, server.WithMemoryBudget(budget), server.WithOverload(m), server.WithAuth(tokens))
	open := &exprdv1.Open{Settings: &exprdv1.Settings{Read: true}}
	alice := openSessionCtx(t, bearerCtx(aliceToken), c, open)
	alice.state(`{"a": "` + strings.Repeat("x", 576_000) + `"}`) // 720 KB of the large part's 960 KiB
	if got := alice.read("len(scopes.root.a)"); got != `{"value":576000}` {
		t.Fatalf("alice's state: %s", got)
	}
	bob := openSessionCtx(t, bearerCtx(bobToken), c, open)
	bob.state(`{"b": "` + strings.Repeat("y", 224_000) + `"}`) // 280 KB: more than is free, within his share
	if got := bob.read("len(scopes.root.b)"); got != `{"value":224000}` {
		t.Fatalf("bob's state while alice held most of the budget: %s", got)
	}
	_, err = alice.stream.Recv()
	overloaded(t, err, "cancelled")
	if msg := status.Convert(err).Message(); !strings.Contains(msg, "fair share") {
		t.Errorf("alice's end says %q, want her fair share named", msg)
	}
	if st := m.Stats(); st.Preempted != 1 {
		t.Errorf("preempted %d, want 1", st.Preempted)
	}
}
