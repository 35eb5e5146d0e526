package server

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/exprd/exprd/evaluator"
	"github.com/exprd/exprd/internal/overload"
	"github.com/exprd/exprd/membudget"
	"github.com/exprd/exprd/server/limits"
	"github.com/exprd/exprd/toolstore"
	"github.com/exprd/exprd/utcp"
)

// meterName names exprd's instruments.
const meterName = "github.com/exprd/exprd/server"

// metrics are the server's instruments. Names follow OpenTelemetry's
// conventions; the Prometheus exporter renders them as exprd_calls_total,
// exprd_evaluation_duration_seconds, ...
type metrics struct {
	calls      metric.Int64Counter
	evalTime   metric.Float64Histogram
	budgetHits metric.Int64Counter
	sessions   metric.Int64UpDownCounter
	panics     metric.Int64Counter
	reg        metric.Registration
	// durable turns: takeovers by outcome, the turn store's latency by
	// operation; the turns running and detached are read from turns.
	takeovers metric.Int64Counter
	storeTime metric.Float64Histogram
	turnsReg  metric.Registration
}

// turnCounts reads how many turns run on this replica, how many of them
// run detached (no client attached), and how many not durable (their
// store out of reach).
type turnCounts func() (running, detached, notDurable int64)

// observeTurns reports the turns running and detached (AgentLoop's).
func (m *metrics) observeTurns(mp metric.MeterProvider, counts turnCounts) error {
	meter := mp.Meter(meterName)
	running, err := meter.Int64ObservableGauge("exprd.turns.running", metric.WithDescription("AgentLoop turns running on this replica."))
	if err != nil {
		return err
	}
	detached, err := meter.Int64ObservableGauge("exprd.turns.detached", metric.WithDescription("AgentLoop turns running on this replica with no client attached."))
	if err != nil {
		return err
	}
	notDurable, err := meter.Int64ObservableGauge("exprd.turns.not_durable", metric.WithDescription("AgentLoop turns running on this replica whose turn store is out of reach: what they could not record is held in this replica's memory."))
	if err != nil {
		return err
	}
	m.turnsReg, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		r, d, n := counts()
		o.ObserveInt64(running, r)
		o.ObserveInt64(detached, d)
		o.ObserveInt64(notDurable, n)
		return nil
	}, running, detached, notDurable)
	return err
}

// takeover counts a lapsed turn this replica adopted ("adopted"), and
// one of those it ended instead of running ("ended").
func (m *metrics) takeover(ctx context.Context, outcome string) {
	m.takeovers.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome)))
}

// storeOpSets are the attribute sets of the turn store's operations, made
// once: a set built at each record (its attributes hashed and sorted) was
// a third of what recording an event cost.
var storeOpSets sync.Map // op -> metric.MeasurementOption

func storeOpAttrs(op string) metric.MeasurementOption {
	if o, ok := storeOpSets.Load(op); ok {
		return o.(metric.MeasurementOption)
	}
	o, _ := storeOpSets.LoadOrStore(op, metric.WithAttributeSet(attribute.NewSet(attribute.String("op", op))))
	return o.(metric.MeasurementOption)
}

// storeOp records how long an operation of the turn store took.
func (m *metrics) storeOp(ctx context.Context, op string, since time.Time) {
	if m == nil {
		return
	}
	m.storeTime.Record(ctx, time.Since(since).Seconds(), storeOpAttrs(op))
}

func newMetrics(mp metric.MeterProvider, ev *evaluator.Evaluator, store toolstore.Store, mem *membudget.Budget, ovl *overload.Manager, conns *limits.Conns) (*metrics, error) {
	m := mp.Meter(meterName)
	var out metrics
	var err error
	if out.calls, err = m.Int64Counter("exprd.calls", metric.WithDescription("Tool calls answered, by service, outcome and reason.")); err != nil {
		return nil, err
	}
	if out.evalTime, err = m.Float64Histogram("exprd.evaluation.duration", metric.WithUnit("s"),
		metric.WithDescription("Evaluation time of a call, without waits on the user or on host functions."),
		metric.WithExplicitBucketBoundaries(0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5)); err != nil {
		return nil, err
	}
	if out.budgetHits, err = m.Int64Counter("exprd.budget.hits", metric.WithDescription("Calls stopped by a budget, by kind.")); err != nil {
		return nil, err
	}
	if out.sessions, err = m.Int64UpDownCounter("exprd.sessions.open", metric.WithDescription("Open Session streams.")); err != nil {
		return nil, err
	}
	if out.panics, err = m.Int64Counter("exprd.panics", metric.WithDescription("Panics recovered in handlers and in the goroutines they start.")); err != nil {
		return nil, err
	}
	if out.takeovers, err = m.Int64Counter("exprd.turns.takeovers", metric.WithDescription("AgentLoop turns whose replica stopped that this replica adopted (outcome adopted), and those of them it ended instead of running on (outcome ended).")); err != nil {
		return nil, err
	}
	if out.storeTime, err = m.Float64Histogram("exprd.turn_store.duration", metric.WithUnit("s"),
		metric.WithDescription("How long a turn store operation took, by op: create, append, journal, end, renew."),
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5)); err != nil {
		return nil, err
	}
	hits, err := m.Int64ObservableCounter("exprd.compile_cache.hits", metric.WithDescription("Compile-cache lookups that found the program."))
	if err != nil {
		return nil, err
	}
	misses, err := m.Int64ObservableCounter("exprd.compile_cache.misses", metric.WithDescription("Compile-cache lookups that compiled."))
	if err != nil {
		return nil, err
	}
	stale, err := m.Float64ObservableGauge("exprd.registry.staleness", metric.WithUnit("s"),
		metric.WithDescription("Seconds since this replica last knew it had every change to the shared tool registry (0 in memory)."))
	if err != nil {
		return nil, err
	}
	rev, err := m.Int64ObservableGauge("exprd.registry.revision", metric.WithDescription("The tool registry store's revision this replica has applied (0 in memory)."))
	if err != nil {
		return nil, err
	}
	memLimit, err := m.Int64ObservableGauge("exprd.memory_budget.limit", metric.WithUnit("By"), metric.WithDescription("The server's memory budget (0: none)."))
	if err != nil {
		return nil, err
	}
	memUsed, err := m.Int64ObservableGauge("exprd.memory_budget.reserved", metric.WithUnit("By"), metric.WithDescription("Bytes reserved from the memory budget: states and tools' answers being read."))
	if err != nil {
		return nil, err
	}
	memRefused, err := m.Int64ObservableCounter("exprd.memory_budget.refusals", metric.WithDescription("Reservations the memory budget could not make in time."))
	if err != nil {
		return nil, err
	}
	ovlHeap, err := m.Int64ObservableGauge("exprd.overload.heap", metric.WithUnit("By"),
		metric.WithDescription("The heap the overload manager last read: what the last GC found live, plus goroutine stacks."))
	if err != nil {
		return nil, err
	}
	ovlLine, err := m.Int64ObservableGauge("exprd.overload.line", metric.WithUnit("By"), metric.WithDescription("The line the overload manager keeps the heap under."))
	if err != nil {
		return nil, err
	}
	ovlRefused, err := m.Int64ObservableCounter("exprd.overload.refusals", metric.WithDescription("RPCs the overload manager refused while the heap was past its refuse threshold."))
	if err != nil {
		return nil, err
	}
	ovlShed, err := m.Int64ObservableCounter("exprd.overload.shed", metric.WithDescription("RPCs in flight the overload manager cancelled: while the heap was past its shed threshold, or (exprd.overload.preempted) for a caller within its fair share of the memory budget that waited."))
	if err != nil {
		return nil, err
	}
	ovlPreempted, err := m.Int64ObservableCounter("exprd.overload.preempted", metric.WithDescription("RPCs in flight the overload manager cancelled because their caller held the most of the memory budget, past its fair share, while a caller within its share waited for room."))
	if err != nil {
		return nil, err
	}
	ovlGCs, err := m.Int64ObservableCounter("exprd.overload.collections", metric.WithDescription("GCs the overload manager ran to see memory freed."))
	if err != nil {
		return nil, err
	}
	connsClosed, err := m.Int64ObservableCounter("exprd.connections.closed", metric.WithDescription("Connections the connection limits closed, by why: refused (past a limit when accepted), evicted (unproven, for a new one at --max-connections), shut (unproven, for refused calls past their peer's rate)."))
	if err != nil {
		return nil, err
	}
	out.reg, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		cs := conns.Stats()
		o.ObserveInt64(connsClosed, cs.Refused, metric.WithAttributes(attribute.String("why", "refused")))
		o.ObserveInt64(connsClosed, cs.Evicted, metric.WithAttributes(attribute.String("why", "evicted")))
		o.ObserveInt64(connsClosed, cs.Shut, metric.WithAttributes(attribute.String("why", "shut")))
		o.ObserveInt64(memLimit, mem.Limit())
		o.ObserveInt64(memUsed, mem.InUse())
		o.ObserveInt64(memRefused, mem.Refusals())
		if ovl != nil {
			st := ovl.Stats()
			o.ObserveInt64(ovlHeap, st.Heap)
			o.ObserveInt64(ovlLine, st.Line)
			o.ObserveInt64(ovlRefused, st.Refused)
			o.ObserveInt64(ovlShed, st.Shed)
			o.ObserveInt64(ovlPreempted, st.Preempted)
			o.ObserveInt64(ovlGCs, st.Collections)
		}
		s := ev.CacheStats()
		o.ObserveInt64(hits, int64(s.Hits))
		o.ObserveInt64(misses, int64(s.Misses))
		if store != nil {
			st := store.Status()
			o.ObserveFloat64(stale, st.Staleness(time.Now()).Seconds())
			o.ObserveInt64(rev, st.Revision)
		}
		return nil
	}, hits, misses, stale, rev, memLimit, memUsed, memRefused, ovlHeap, ovlLine, ovlRefused, ovlShed, ovlPreempted, ovlGCs, connsClosed)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// answered records one answered call.
func (m *metrics) answered(ctx context.Context, service string, a evaluator.Answer) {
	outcome := "ok"
	switch {
	case a.Cancelled:
		outcome = "cancelled"
	case a.Err != nil:
		outcome = "error"
	case a.Declined:
		outcome = "declined"
	}
	m.calls.Add(ctx, 1, metric.WithAttributes(
		attribute.String("service", service), attribute.String("outcome", outcome), attribute.String("reason", string(a.Reason()))))
	m.evalTime.Record(ctx, a.EvalTime.Seconds(), metric.WithAttributes(attribute.String("service", service)))
	if a.Err != nil && a.Err.Reason == evaluator.BudgetExceeded {
		m.budgetHits.Add(ctx, 1, metric.WithAttributes(attribute.String("kind", a.Err.Budget)))
	}
}

// ToolCallObserver measures every UTCP tool call at the registry, whoever
// makes it (ExprTool's server functions, CodeMode programs, AgentLoop's
// tools): a span "exprd.tool.call" and the histogram exprd.tool.duration by
// tool and outcome. cmd/exprd gives it to the registry
// (utcp.WithCallObserver).
func ToolCallObserver(mp metric.MeterProvider, tp trace.TracerProvider) (utcp.CallObserver, error) {
	hist, err := mp.Meter(meterName).Float64Histogram("exprd.tool.duration", metric.WithUnit("s"),
		metric.WithDescription("UTCP tool-call latency, by tool and outcome."),
		metric.WithExplicitBucketBoundaries(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10))
	if err != nil {
		return nil, err
	}
	tracer := tp.Tracer(meterName)
	return func(ctx context.Context, tool string) (context.Context, func(error)) {
		ctx, span := tracer.Start(ctx, "exprd.tool.call", trace.WithAttributes(attribute.String("exprd.tool", tool)))
		start := time.Now()
		return ctx, func(err error) {
			outcome := "ok"
			if err != nil {
				outcome = toolOutcome(err)
				span.SetStatus(otelcodes.Error, outcome)
			}
			hist.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(
				attribute.String("tool", tool), attribute.String("outcome", outcome)))
			span.End()
		}
	}, nil
}
