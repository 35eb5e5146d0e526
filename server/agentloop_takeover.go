package server

// Takeover: a turn whose replica stopped goes on on another. The replica
// running a turn holds a lease on it in the turn store (when the store
// takes turns over: turnstore.Takeover, NATS) and records in the turn's
// journal what another needs to go on: the start, each model reply, each
// tool result, and each step's history and state, every entry before
// what depends on it (a result before the client hears of it, a step
// before the next model request). When the lease lapses, a replica that
// sees it takes the lease, reads the journal and runs the turn on from
// there (agent.Resume), detached, until a client resumes it.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/exprd/exprd/agent"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/membudget"
	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/server/auth"
	"github.com/exprd/exprd/server/internal/rpcstatus"
	"github.com/exprd/exprd/server/internal/stream"
	"github.com/exprd/exprd/turnstore"
	"github.com/exprd/exprd/utcp/toolscope"
	"github.com/exprd/exprd/utcp/userinput"
)

// DefaultMaxTakeovers bounds how many times one turn is taken over
// (--turn-max-takeovers): a turn whose replicas keep stopping ends.
const DefaultMaxTakeovers = turnstore.DefaultMaxTakeovers

// takeoverWorkers take lapsed turns over at once, a replica; the others
// wait in a queue of takeoverQueue, past which a lapsed turn is left to
// the other replicas (and to the next start's look for orphans).
const (
	takeoverWorkers = 4
	takeoverQueue   = 1 << 16
)

// WithMaxTakeovers sets how many times one turn may be taken over.
func WithMaxTakeovers(n int) Option {
	return func(o *options) error { return positive("max takeovers", n, func() { o.maxTakeovers = n }) }
}

// The kinds of journal entries.
const (
	entryStart   = "start"
	entryReplied = "replied"
	entryRunning = "running"
	entryResult  = "result"
	entryStep    = "step"
)

// journalEntry is one entry of a turn's journal, as JSON.
type journalEntry struct {
	Kind string `json:"k"`
	// start: the Start message (its protobuf encoding), who owns the
	// turn, the caller's name and tools: scopes.
	Start  []byte   `json:"start,omitempty"`
	Owner  string   `json:"owner,omitempty"`
	Caller string   `json:"caller,omitempty"`
	Scopes []string `json:"scopes,omitempty"`
	// replied, result, step
	Step   int           `json:"step,omitempty"`
	Reply  *agent.Reply  `json:"reply,omitempty"`
	CallID string        `json:"call,omitempty"`
	Result *agent.Result `json:"result,omitempty"`
	// step: the step, the messages it added to the history, and the
	// turn's state when it changed.
	Finished *agent.Step     `json:"finished,omitempty"`
	Grown    []model.Message `json:"grown,omitempty"`
	State    json.RawMessage `json:"state,omitempty"`
}

// durable is a running turn's lease and journal.
type durable struct {
	st    turnstore.Takeover
	lease *turnstore.Lease
	t     *turn
	lost  atomic.Bool // the lease lapsed and another replica took the turn
	// handingOver, set for a detached turn, ends as this replica begins
	// to stop: the turn is given to another (the lease handed over,
	// nothing ended), whichever cancel reached it first.
	handingOver context.Context

	mu    sync.Mutex
	grown []model.Message // the step's, journaled with its end
	state []byte          // the state last journaled
}

// errLeaseLost ends a turn another replica took over: nothing more is
// recorded by this one.
var errLeaseLost = &stream.Error{Status: rpcstatus.New(codes.Unavailable,
	"the turn runs on another replica now: this one stopped renewing its lease in time; resume it", rpcstatus.Info(exprdv1.ErrorReason_TURN_TAKEN_OVER))}

// hold takes the lease on a new turn and journals its start, when the
// store takes turns over; nil otherwise.
func (a *agentLoop) hold(ctx context.Context, t *turn, start *exprdv1.AgentStart) (*durable, error) {
	st, ok := a.s.opts.turnStore.(turnstore.Takeover)
	if !ok {
		return nil, nil
	}
	lease, err := st.Acquire(ctx, t.id, a.holder)
	if err != nil {
		return nil, turnStoreStatus(err)
	}
	d := &durable{st: st, lease: lease, t: t}
	data, err := proto.Marshal(start)
	var entry []byte
	if err == nil {
		entry, err = json.Marshal(journalEntry{Kind: entryStart, Start: data, Owner: t.owner, Caller: auth.CallerName(ctx), Scopes: toolscope.FromContext(ctx).Scopes()})
	}
	if err == nil { // written now: a turn does not start without its store
		err = t.do(ctx, storeWrite{op: "journal", do: func(ctx context.Context) error { return st.Journal(ctx, t.id, entry) }})
	}
	if err != nil {
		d.release()
		return nil, turnStoreStatus(err)
	}
	d.state = bytes.Clone([]byte(start.GetStateJson()))
	go d.renew(t.ctx)
	return d, nil
}

// renew renews the lease a third of its time apart until the turn ends;
// a lease another took stops the turn.
func (d *durable) renew(ctx context.Context) {
	tick := time.NewTicker(d.st.LeaseTTL() / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		renewed := time.Now()
		err := d.lease.Renew(ctx)
		d.t.m.storeOp(ctx, "renew", renewed)
		if errors.Is(err, turnstore.ErrLeaseLost) {
			d.lost.Store(true)
			d.t.cancel(errLeaseLost)
			return
		}
		// Another failure (NATS out of reach) is tried again: the lease
		// holds for LeaseTTL, and the turn's own records fail it sooner.
	}
}

// release gives the lease up at the turn's end, unless it was lost; a
// turn handed over has its lease handed over, for another to take it.
func (d *durable) release() {
	if d == nil || d.lost.Load() {
		return
	}
	give := d.lease.Release
	if d.handed() {
		give = d.lease.HandOver
	}
	_ = d.t.write(storeWrite{op: "release", do: give})
}

// ends says whether the turn's end is recorded by this replica: not when
// another took it (the lease lost), nor when this one handed it over.
func (d *durable) ends() bool { return d == nil || !d.lost.Load() && !d.handed() }

// handed says the turn is handed over: it is detached and this replica
// stops. Read at the end, not set by the stop's cancel, which may lose
// the race to the server's other cancels (its stopped turns).
func (d *durable) handed() bool { return d.handingOver != nil && d.handingOver.Err() != nil }

// errHandOver stops a turn on a replica that stops: another takes it
// over at once, its client resumes it there.
var errHandOver = &stream.Error{Status: rpcstatus.New(codes.Unavailable,
	"this replica is stopping: the turn goes on on another; resume it", rpcstatus.Info(exprdv1.ErrorReason_TURN_TAKEN_OVER))}

// handOverOnStop makes the server's stop hand the turn over rather than
// end it: a durable, detached turn.
func (a *agentLoop) handOverOnStop(d *durable, cancel context.CancelCauseFunc) (stop func() bool) {
	d.handingOver = a.handingOver
	return context.AfterFunc(a.handingOver, func() { cancel(errHandOver) })
}

// journal records e; its failure fails the turn, as an event's does.
func (d *durable) journal(e journalEntry) error {
	b, err := json.Marshal(e)
	if err == nil {
		err = d.t.write(storeWrite{op: "journal", n: len(b), do: func(ctx context.Context) error { return d.st.Journal(ctx, d.t.id, b) }})
	}
	if err != nil {
		if errors.Is(err, turnstore.ErrLeaseLost) {
			d.lost.Store(true)
			d.t.cancel(errLeaseLost)
			return err
		}
		st := turnStoreStatus(err)
		d.t.cancel(&stream.Error{Status: st})
		return st
	}
	return nil
}

// events journals what the loop tells before ev hears of it: the
// model's reply before its calls run, each result before the client
// sees it, each step (its history and the state, when it changed)
// before the next model request.
func (d *durable) events(ev agent.Events) agent.Events {
	replied, running, result, grew, finished := ev.Replied, ev.CallExecuting, ev.ToolResult, ev.HistoryGrew, ev.StepFinished
	ev.Replied = func(step int, r agent.Reply) {
		_ = d.journal(journalEntry{Kind: entryReplied, Step: step, Reply: &r})
		if replied != nil {
			replied(step, r)
		}
	}
	// A call about to run: one that had not when the turn is taken over
	// runs again from its start (its approval asked again).
	ev.CallExecuting = func(step int, call agent.ToolCall) {
		_ = d.journal(journalEntry{Kind: entryRunning, Step: step, CallID: call.ID})
		if running != nil {
			running(step, call)
		}
	}
	ev.ToolResult = func(step int, call agent.ToolCall, r agent.Result) {
		_ = d.journal(journalEntry{Kind: entryResult, Step: step, CallID: call.ID, Result: &r})
		if result != nil {
			result(step, call, r)
		}
	}
	ev.HistoryGrew = func(step int, msgs []model.Message) {
		d.mu.Lock()
		d.grown = msgs
		d.mu.Unlock()
		if grew != nil {
			grew(step, msgs)
		}
	}
	ev.StepFinished = func(s agent.Step) {
		e := journalEntry{Kind: entryStep, Step: s.Index, Finished: &s}
		state, _ := json.Marshal(d.t.state.Snapshot())
		d.mu.Lock()
		e.Grown, d.grown = d.grown, nil
		if !bytes.Equal(state, d.state) {
			e.State, d.state = state, state
		}
		d.mu.Unlock()
		_ = d.journal(e)
		if finished != nil {
			finished(s)
		}
	}
	return ev
}

// replay is a turn's journal, folded: what its start said, the steps it
// finished and the history they grew, the reply of the step under way
// with its results, and its state.
type replay struct {
	start                *exprdv1.AgentStart
	owner, caller        string
	scopes               []string
	steps                []agent.Step
	grown                []model.Message
	reply                *agent.Reply
	state                json.RawMessage
	entries, bytesOfThem int
}

func foldJournal(entries [][]byte) (*replay, error) {
	r := &replay{entries: len(entries)}
	for i, b := range entries {
		r.bytesOfThem += len(b)
		var e journalEntry
		if err := json.Unmarshal(b, &e); err != nil {
			return nil, fmt.Errorf("journal entry %d: %w", i, err)
		}
		switch e.Kind {
		case entryStart:
			r.start = &exprdv1.AgentStart{}
			if err := proto.Unmarshal(e.Start, r.start); err != nil {
				return nil, fmt.Errorf("journal entry %d: the start: %w", i, err)
			}
			r.owner, r.caller, r.scopes = e.Owner, e.Caller, e.Scopes
		case entryReplied:
			if e.Reply == nil {
				return nil, fmt.Errorf("journal entry %d: a reply without one", i)
			}
			r.reply = e.Reply
			r.reply.Results, r.reply.Executing = map[string]agent.Result{}, map[string]bool{}
		case entryRunning:
			if r.reply == nil {
				return nil, fmt.Errorf("journal entry %d: a call running without a reply", i)
			}
			r.reply.Executing[e.CallID] = true
		case entryResult:
			if r.reply == nil || e.Result == nil {
				return nil, fmt.Errorf("journal entry %d: a result without a reply", i)
			}
			r.reply.Results[e.CallID] = *e.Result
		case entryStep:
			if e.Finished == nil || e.Finished.Index != len(r.steps) {
				return nil, fmt.Errorf("journal entry %d: step %d out of order", i, e.Step)
			}
			r.steps = append(r.steps, *e.Finished)
			r.grown = append(r.grown, e.Grown...)
			r.reply = nil
			if e.State != nil {
				r.state = e.State
			}
		default:
			return nil, fmt.Errorf("journal entry %d: kind %q", i, e.Kind)
		}
	}
	if r.start == nil {
		return nil, errors.New("the journal has no start")
	}
	return r, nil
}

// newHolder names this replica to the leases it holds: the host, the
// process and 32 random bits (a restarted process is another holder).
func newHolder() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// watchTakeovers takes over the turns whose lease lapses, until the
// server stops, when the store takes turns over.
func (a *agentLoop) watchTakeovers() {
	st, ok := a.s.opts.turnStore.(turnstore.Takeover)
	if !ok {
		return
	}
	queue := make(chan string, takeoverQueue)
	for range takeoverWorkers {
		go func() {
			for {
				select {
				case <-a.stopped.Done():
					return
				case id := <-queue:
					a.takeOver(st, id)
				}
			}
		}()
	}
	err := st.WatchLapsed(a.stopped, func(id string) {
		select {
		case queue <- id:
		default:
			a.s.opts.logger.Warn("agentloop: a lapsed turn is left to other replicas: the takeover queue is full", "turn", id)
		}
	})
	if err != nil {
		a.s.opts.logger.Error("agentloop: turns whose replica stops will not be taken over by this one", "err", err)
	}
}

// takeOver goes on with turn id, whose lease lapsed: when this replica
// takes the lease, it adopts the turn and runs it on from its journal,
// detached; a turn that cannot go on (not started with detach, past its
// takeovers or its time, its journal unreadable) is ended instead.
func (a *agentLoop) takeOver(st turnstore.Takeover, id string) {
	log := a.s.opts.logger.With("turn", id)
	if a.handingOver.Err() != nil {
		return // this replica stops: the others take it
	}
	if a.turns.get(id) != nil {
		// It runs here: its lease lapsed while the store was out of
		// reach, and its own renewal takes it again if no other
		// replica does first.
		return
	}
	ctx := context.WithoutCancel(a.stopped)
	lease, err := st.Acquire(ctx, id, a.holder)
	if err != nil {
		if !errors.Is(err, turnstore.ErrLeaseHeld) {
			log.Warn("agentloop: a lapsed turn's lease could not be taken", "err", err)
		}
		return
	}
	store := a.s.opts.turnStore
	rec, err := store.Get(ctx, id)
	switch {
	case errors.Is(err, turnstore.ErrNotFound) || err == nil && !rec.Ended.IsZero():
		_ = lease.Release(ctx) // nothing to go on with
		return
	case err != nil:
		leaveToOthers(ctx, lease, log.With("err", err), "agentloop: a lapsed turn could not be read: left to another replica")
		return
	}
	n, err := st.Adopt(ctx, id)
	if err != nil {
		leaveToOthers(ctx, lease, log.With("err", err), "agentloop: a lapsed turn could not be adopted: left to another replica")
		return
	}
	a.s.metrics.takeover(ctx, "adopted")
	entries, err := st.ReadJournal(ctx, id)
	var r *replay
	if err == nil {
		// What the journal holds, read (at most --turn-max-bytes a turn,
		// takeoverWorkers at once) and decoded, is held in the memory
		// budget until the turn runs; a budget that cannot hold it hands
		// the turn to another replica, after a second.
		n := int64(0)
		for _, e := range entries {
			n += int64(len(e))
		}
		res, rerr := a.s.opts.memory.Reserve(ctx, "a journal taken over", historyMemoryFactor*n)
		if rerr != nil {
			leaveToOthers(ctx, lease, log.With("bytes", n), "agentloop: the memory budget cannot hold a lapsed turn's journal: left to another replica")
			return
		}
		defer res.Close()
		r, err = foldJournal(entries)
	}
	var why error
	switch {
	case err != nil:
		why = fmt.Errorf("its journal cannot be read: %w", err)
	case !detached(r.start):
		why = errors.New("it was not started with detach, and its client went with its replica")
	case n > a.s.opts.maxTakeovers:
		why = fmt.Errorf("it was taken over %d times, past the limit of %d (--turn-max-takeovers)", n-1, a.s.opts.maxTakeovers)
	case rec.Cancelled:
		why = errors.New("it was cancelled")
	}
	if why != nil {
		a.s.metrics.takeover(ctx, "ended")
		a.endTaken(ctx, lease, id, rec.Last, why, log)
		return
	}
	log.Info("agentloop: taking over a turn whose replica stopped", "takeover", n, "steps", len(r.steps), "journal_entries", r.entries)
	go a.runTaken(lease, st, rec, r)
}

// leaveToOthers hands a lapsed turn this replica took the lease of but
// cannot go on with to the others (their watches see it lapse again),
// after a second: a turn no replica can take is not passed around as
// fast as the store answers.
func leaveToOthers(ctx context.Context, lease *turnstore.Lease, log *slog.Logger, why string) {
	log.Warn(why)
	time.Sleep(time.Second)
	_ = lease.HandOver(ctx)
}

// endTaken ends a turn this replica adopted but cannot run on: its end
// says why, and the lease is given up.
func (a *agentLoop) endTaken(ctx context.Context, lease *turnstore.Lease, id string, last uint64, why error, log *slog.Logger) {
	st := rpcstatus.New(codes.Unavailable, "the replica running this turn stopped, and the turn could not go on: "+why.Error(), rpcstatus.Info(exprdv1.ErrorReason_TURN_TAKEOVER_FAILED))
	end, _ := proto.Marshal(rpcstatus.WithReason(status.Convert(st)).Proto())
	if err := a.s.opts.turnStore.End(ctx, id, end); err != nil {
		log.Warn("agentloop: a lapsed turn's end could not be recorded", "err", err, "last", last)
	}
	_ = lease.Release(ctx)
}

// runTaken runs a taken-over turn from its journal, detached: as Run
// runs a started one, with no stream (clients resume it), its events
// numbered on from the last recorded.
func (a *agentLoop) runTaken(lease *turnstore.Lease, st turnstore.Takeover, rec turnstore.Record, r *replay) {
	start := r.start
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	defer context.AfterFunc(a.stopped, func() { cancel(errServerStopping) })()
	ctx = toolscope.WithView(ctx, toolscope.Of(r.scopes))
	ctx = membudget.WithCaller(ctx, r.owner)
	t := newTurn(ctx, a.s.opts.initialState.Fork(a.s.opts.maxStateBytes))
	t.id, t.owner, t.seq = rec.ID, r.owner, rec.Last
	a.turns.admit(t.owner, 0) // counted, not refused: the turn runs already
	defer a.turns.leave(t.owner)
	t.cancel, t.detach, t.detachedTimeout = cancel, true, a.s.opts.detachedTimeout
	t.useStore(a)
	d := &durable{st: st, lease: lease, t: t}
	defer d.release()
	defer a.handOverOnStop(d, cancel)()
	var err error
	defer func() {
		if d.ends() {
			t.endRecord(err)
		}
		a.turns.remove(t.id)
		t.stopDetachTimer()
	}()
	fail := func(e error) { err = e }
	provider, perr := modelProvider(a.s.opts.models, start.GetProvider(), "start.provider")
	if perr != nil {
		fail(perr)
		return
	}
	t.input = newInputAsker(a.s.opts.inputTimeout, t.askInput)
	if start.GetRelayInputRequests() {
		ctx = userinput.WithAsker(ctx, t.input)
	}
	mem := a.s.opts.memory.EmptyFor(ctx, "the turn's state")
	defer mem.Close()
	t.state.UseMemory(mem)
	state := r.state
	if state == nil && start.GetStateJson() != "" {
		state = json.RawMessage(start.GetStateJson())
	}
	if len(state) > 0 {
		if serr := t.state.ReplaceContext(ctx, state); serr != nil {
			fail(stateStatus("start.state_json", serr))
			return
		}
	}
	d.state = bytes.Clone(state)
	cfg, cerr := a.config(ctx, start, provider, t)
	if cerr != nil {
		fail(cerr)
		return
	}
	history, reserve := historyReservation(a.s.opts.memory)
	defer history.Close()
	cfg.ReserveHistory = reserve
	cfg.Messages = append(cfg.Messages, r.grown...)
	cfg.Resume = &agent.Resume{Steps: r.steps, Reply: r.reply}
	cfg.Events = d.events(cfg.Events)
	// The turn's time runs from its start, not from this takeover.
	if cfg.TurnTimeout -= time.Since(rec.Started); cfg.TurnTimeout <= 0 {
		fail(a.status(ctx, agent.ErrTurnTimeout))
		return
	}
	stopAsked := t.log.WatchCancel(ctx, t.id)
	go func() {
		select {
		case <-stopAsked:
			cancel(errAborted)
		case <-ctx.Done():
		}
	}()
	a.turns.add(t)
	if relay, ok := t.log.(turnstore.Relay); ok {
		stop, rerr := relay.ServeTurn(t.id, t.serveRelay(relay.MaxRelayBytes()))
		if rerr != nil {
			fail(turnStoreStatus(rerr))
			return
		}
		defer stop()
	}
	go d.renew(ctx)
	t.attached = 1
	t.release() // detached from the start: its timeout runs until a client resumes it
	out, rerr := agent.Run(ctx, cfg)
	if rerr != nil {
		fail(a.status(ctx, rerr))
		return
	}
	done := &exprdv1.AgentDone{Text: out.Text, Usage: usageProto(out.Usage), StopReason: stopReasons[out.StopReason]}
	for _, s := range out.Steps {
		done.Steps = append(done.Steps, stepProto(s))
	}
	if serr := t.send(&exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_Done{Done: done}}); serr != nil {
		fail(stream.SendStatus(serr))
	}
}
