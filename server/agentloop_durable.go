package server

// Durable turns: what a turn records in the turn store (turnstore), the
// turns running on this replica, detaching from a client that went away,
// and resuming a turn from the store.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/membudget"
	"github.com/exprd/exprd/server/auth"
	"github.com/exprd/exprd/server/internal/rpcstatus"
	"github.com/exprd/exprd/server/internal/stream"
	"github.com/exprd/exprd/turnstore"
)

// DefaultTurnDetachedTimeout is how long a detached turn runs without a
// client (--turn-detached-timeout).
const DefaultTurnDetachedTimeout = 5 * time.Minute

// WithTurnStore sets where turns' events are kept (default: a
// turnstore.Memory with the default limits, this replica's only).
func WithTurnStore(st turnstore.Store) Option {
	return func(o *options) error {
		if st == nil {
			return errors.New("turn store: nil")
		}
		o.turnStore = st
		return nil
	}
}

// DefaultMaxTurnsPerCaller bounds the turns one caller has running on a
// replica at once, attached or detached (--turn-max-per-caller): a caller
// that starts turns and goes away keeps no more running than that.
const DefaultMaxTurnsPerCaller = 1000

// WithMaxTurnsPerCaller sets how many turns one caller may have running on
// this replica at once.
func WithMaxTurnsPerCaller(n int) Option {
	return func(o *options) error { return positive("max turns per caller", n, func() { o.maxTurnsPerCaller = n }) }
}

// WithTurnDetachedTimeout sets how long a turn started with detach runs
// without a client.
func WithTurnDetachedTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("turn detached timeout %s: want a positive duration", d)
		}
		o.detachedTimeout = d
		return nil
	}
}

// detached says whether start's turn goes on when its client goes away:
// unless it asked otherwise (detach: false).
func detached(start *exprdv1.AgentStart) bool { return start.Detach == nil || start.GetDetach() }

// turnOwner is who may resume a turn the caller of ctx starts: the token's
// caller name with auth on, else the peer's address without its port.
func turnOwner(ctx context.Context) string {
	if name := auth.CallerName(ctx); name != "" {
		return "token:" + name
	}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		host, _, err := net.SplitHostPort(p.Addr.String())
		if err != nil {
			host = p.Addr.String()
		}
		return "peer:" + host
	}
	return "peer:"
}

// liveTurns are the turns running on this replica, by id, and how many
// each caller has (from the turn's start to its end, its takeovers too).
type liveTurns struct {
	mu      sync.Mutex
	turns   map[string]*turn
	byOwner map[string]int
}

// admit counts a turn of owner's starting here: false, and nothing
// counted, when owner has max running already (max 0: no bound).
func (l *liveTurns) admit(owner string, max int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byOwner == nil {
		l.byOwner = map[string]int{}
	}
	if max > 0 && l.byOwner[owner] >= max {
		return false
	}
	l.byOwner[owner]++
	return true
}

// leave is the end of a turn admit counted.
func (l *liveTurns) leave(owner string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byOwner[owner]--; l.byOwner[owner] <= 0 {
		delete(l.byOwner, owner)
	}
}

func (l *liveTurns) add(t *turn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.turns == nil {
		l.turns = map[string]*turn{}
	}
	l.turns[t.id] = t
}

func (l *liveTurns) remove(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.turns, id)
}

// counts is how many turns run here, how many of them detached, and how
// many not durable (their store out of reach).
func (l *liveTurns) counts() (running, detached, notDurable int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, t := range l.turns {
		running++
		t.attachMu.Lock()
		if t.attached <= 0 {
			detached++
		}
		t.attachMu.Unlock()
		if !t.durable() {
			notDurable++
		}
	}
	return running, detached, notDurable
}

func (l *liveTurns) get(id string) *turn {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.turns[id]
}

// turnStoreStatus is the status of a turn store's error.
func turnStoreStatus(err error) error {
	var le *turnstore.LimitError
	var spent *membudget.ExhaustedError
	switch {
	case errors.As(err, &le):
		return rpcstatus.Exhausted(le.Subject, le.Desc)
	case errors.As(err, &spent): // the memory store's events, past the budget
		return rpcstatus.Memory(spent)
	case errors.Is(err, turnstore.ErrNotFound):
		return errTurnNotFound
	}
	return rpcstatus.New(codes.Unavailable, "the turn store is unavailable: the turn cannot be recorded or read; retry later", rpcstatus.Info(exprdv1.ErrorReason_TURN_STORE_UNAVAILABLE), rpcstatus.Retry(rpcstatus.DefaultRetryDelay))
}

// errTurnNotFound is an unknown or expired turn, or another caller's: the
// same words for all three, so that nobody learns which ids exist.
var errTurnNotFound = rpcstatus.New(codes.NotFound, "no turn with this id: it is unknown, has expired, or was started by another caller", rpcstatus.Info(exprdv1.ErrorReason_TURN_NOT_FOUND))

// errDetachedTimeout ends a turn that ran detached for too long.
func errDetachedTimeout(d time.Duration) error {
	return &stream.Error{Status: rpcstatus.New(codes.DeadlineExceeded, fmt.Sprintf("the turn ran without a client for %s (--turn-detached-timeout)", d), rpcstatus.Info(exprdv1.ErrorReason_TURN_DETACHED_TIMEOUT))}
}

// errServerStopping ends the detached turns of a server that stops.
var errServerStopping = &stream.Error{Status: rpcstatus.New(codes.Unavailable, "the server is stopping", rpcstatus.CodeInfo(codes.Unavailable))}

// record appends m, numbered, to the store; its failure fails the turn.
// t.sendMu is held.
func (t *turn) record(m *exprdv1.AgentLoopRunResponse) error {
	if t.log == nil {
		return nil
	}
	data, err := proto.Marshal(m)
	if err == nil {
		ev := turnstore.Event{Seq: m.GetSeq(), Data: data}
		err = t.write(storeWrite{op: "append", n: len(data), do: func(ctx context.Context) error { return t.log.Append(ctx, t.id, ev) }})
	}
	if err != nil {
		st := turnStoreStatus(err)
		t.cancel(&stream.Error{Status: st})
		return st
	}
	return nil
}

// endRecord records how the turn ended: nothing more after done, else
// its status.
func (t *turn) endRecord(err error) {
	if t.log == nil {
		return
	}
	var end []byte
	if err != nil {
		end, _ = proto.Marshal(rpcstatus.WithReason(status.Convert(err)).Proto())
	}
	_ = t.write(storeWrite{op: "end", end: true, do: func(ctx context.Context) error { return t.log.End(ctx, t.id, end) }})
}

// attach counts a client on the turn; while one is, it is not detached.
func (t *turn) attach() {
	t.attachMu.Lock()
	defer t.attachMu.Unlock()
	t.attached++
	if t.detachTimer != nil {
		t.detachTimer.Stop()
		t.detachTimer = nil
	}
}

// release is a client gone; a turn without any runs on for the detached
// timeout.
func (t *turn) release() {
	t.attachMu.Lock()
	defer t.attachMu.Unlock()
	t.attached--
	if t.attached == 0 && t.detach && t.detachTimer == nil {
		d := t.detachedTimeout
		t.detachTimer = time.AfterFunc(d, func() { t.cancel(errDetachedTimeout(d)) })
	}
}

// hold is a sign that a client follows the turn on another replica (a
// stream resumed there): a detached turn's timeout starts again.
func (t *turn) hold() {
	t.attachMu.Lock()
	defer t.attachMu.Unlock()
	if t.attached == 0 && t.detachTimer != nil {
		t.detachTimer.Reset(t.detachedTimeout)
	}
}

// stopDetachTimer is the turn's end.
func (t *turn) stopDetachTimer() {
	t.attachMu.Lock()
	defer t.attachMu.Unlock()
	if t.detachTimer != nil {
		t.detachTimer.Stop()
	}
	t.attached = -1 << 30 // nothing starts it again
}

// resume serves a stream whose first message is resume: the turn's events
// after after_seq from the store, up to the latest when it resumed; then
// the requests still waiting for the client, sent again (pending); then
// the new events, to the turn's end. The stream's replies reach the turn
// wherever it runs (turnLink): here directly, on another replica through
// the store's relay. Its other messages reach a turn running here as its
// first stream's do, and are Rejected for one running elsewhere.
func (a *agentLoop) resume(rpc agentStream, r *exprdv1.AgentResume) error {
	id := r.GetTurnId()
	if !turnstore.ValidID(id) {
		return rpcstatus.BadRequest("resume.turn_id", "a turn id is 32 lowercase hex digits, as the turn's first event named it")
	}
	ctx, cancel := context.WithCancelCause(rpc.Context())
	defer cancel(nil)
	st := a.s.opts.turnStore
	owner := turnOwner(ctx)
	rec, err := st.Get(ctx, id)
	if err == nil && rec.Owner != owner {
		err = turnstore.ErrNotFound // no oracle: another's turn is not there
	}
	if err != nil {
		return turnStoreStatus(err)
	}
	var from uint64
	switch after := r.GetAfterSeq(); {
	case after < 0:
		if back := uint64(-after); back < rec.Last {
			from = rec.Last - back
		}
	case uint64(after) > rec.Last:
		desc := fmt.Sprintf("the turn's latest event is seq %d; after_seq %d is past it", rec.Last, after)
		return rpcstatus.New(codes.OutOfRange, "resume.after_seq: "+desc, rpcstatus.Info(exprdv1.ErrorReason_SEQ_OUT_OF_RANGE, rpcstatus.MetaField, "resume.after_seq"),
			&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "resume.after_seq", Description: desc}}})
	default:
		from = uint64(after)
	}
	var sendMu sync.Mutex
	first := true
	send := func(m *exprdv1.AgentLoopRunResponse) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		if first {
			m.TurnId, first = id, false
		}
		return rpc.Send(m)
	}
	// reject answers a message of this stream on this stream only: not
	// an event of the turn (seq 0).
	reject := func(m *exprdv1.AgentLoopRunRequest, err error) {
		kind, callID := replyOf(m)
		if kind == "" {
			kind = requestKind(m)
		}
		_ = send(&exprdv1.AgentLoopRunResponse{Event: &exprdv1.AgentLoopRunResponse_Rejected{Rejected: rejected(kind, callID, err)}})
	}
	var link turnLink
	handle := func(m *exprdv1.AgentLoopRunRequest) bool {
		const desc = "the turn runs on another replica: this stream only follows it and carries its replies"
		reject(m, rpcstatus.FailedPrecondition(desc, rpcstatus.Info(exprdv1.ErrorReason_TURN_ON_ANOTHER_REPLICA), "TURN_REPLICA", id, desc))
		return false
	}
	live := a.turns.get(id)
	relay, relays := st.(turnstore.Relay)
	switch {
	case live != nil:
		live.attach()
		defer live.release()
		link = localLink{live}
		handle = func(m *exprdv1.AgentLoopRunRequest) bool {
			if kind, _ := replyOf(m); kind != "" {
				if err := live.deliver(m); err != nil {
					reject(m, err)
				}
				return false
			}
			return live.handle(m, live.cancel)
		}
	case relays && rec.Ended.IsZero():
		link = remoteLink{relay: relay, id: id, owner: owner}
		other := handle
		handle = func(m *exprdv1.AgentLoopRunRequest) bool {
			if kind, _ := replyOf(m); kind != "" {
				if err := link.deliver(ctx, m); err != nil {
					reject(m, err)
				}
				return false
			}
			return other(m)
		}
		// The replica running the turn learns that a client follows it:
		// its detached timeout starts again at each hold.
		go func() {
			tick := time.NewTicker(holdEvery(a.s.opts.detachedTimeout))
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
					link.hold(ctx)
				}
			}
		}()
	}
	go stream.Receive(ctx, a.s.recovered, rpc, cancel, handle)
	// resend sends the requests waiting for the client among the events
	// up to the latest when the stream resumed (those after it come as
	// new events), least seq first, one question at a time.
	resend := func() error {
		if link == nil {
			return nil
		}
		for after := uint64(0); ; {
			m, err := link.pendingAfter(ctx, after, rec.Last)
			if err != nil || m == nil {
				return err
			}
			if err := send(m); err != nil {
				return err
			}
			after = m.GetSeq()
		}
	}
	resent := from >= rec.Last
	if resent {
		err = resend()
	}
	var end []byte
	if err == nil {
		end, err = st.Follow(ctx, id, from, func(ev turnstore.Event) error {
			m := new(exprdv1.AgentLoopRunResponse)
			if err := proto.Unmarshal(ev.Data, m); err != nil {
				return err
			}
			if err := send(m); err != nil {
				return err
			}
			if !resent && ev.Seq >= rec.Last {
				resent = true
				return resend()
			}
			return nil
		})
	}
	if perr := stream.BrokenProtocol(ctx); perr != nil {
		return perr
	}
	if err != nil {
		if ctx.Err() != nil {
			return rpcstatus.FromContext(ctx.Err())
		}
		if _, ok := status.FromError(err); ok {
			return err // the stream's Send
		}
		return turnStoreStatus(err)
	}
	if len(end) == 0 {
		return nil // the turn's done was the last event
	}
	var sp spb.Status
	if err := proto.Unmarshal(end, &sp); err != nil {
		return rpcstatus.Internal()
	}
	return status.FromProto(&sp).Err()
}

// Cancel records a stop for the caller's running turn in the turn store,
// then stops it here if it runs here; the replica running it otherwise
// stops it when its watch sees the record (turnstore.WatchCancel).
func (a *agentLoop) Cancel(ctx context.Context, req *exprdv1.AgentLoopCancelRequest) (*exprdv1.AgentLoopCancelResponse, error) {
	id := req.GetTurnId()
	if !turnstore.ValidID(id) {
		return nil, rpcstatus.BadRequest("turn_id", "a turn id is 32 lowercase hex digits, as the turn's first event named it")
	}
	st := a.s.opts.turnStore
	rec, err := st.Get(ctx, id)
	if err == nil && rec.Owner != turnOwner(ctx) {
		err = turnstore.ErrNotFound // no oracle: another's turn is not there
	}
	if err != nil {
		return nil, turnStoreStatus(err)
	}
	if !rec.Ended.IsZero() {
		return &exprdv1.AgentLoopCancelResponse{Ended: true}, nil
	}
	if err := st.Cancel(ctx, id); err != nil {
		return nil, turnStoreStatus(err)
	}
	if live := a.turns.get(id); live != nil {
		live.cancel(errAborted)
	}
	return &exprdv1.AgentLoopCancelResponse{}, nil
}

// requestKind is the field name of a client message.
func requestKind(m *exprdv1.AgentLoopRunRequest) string {
	switch m.GetMsg().(type) {
	case *exprdv1.AgentLoopRunRequest_ToolOutput:
		return "tool_output"
	case *exprdv1.AgentLoopRunRequest_HookReply:
		return "hook_reply"
	case *exprdv1.AgentLoopRunRequest_ApprovalReply:
		return "approval_reply"
	case *exprdv1.AgentLoopRunRequest_InputReply:
		return "input_reply"
	case *exprdv1.AgentLoopRunRequest_State:
		return "state"
	case *exprdv1.AgentLoopRunRequest_StatePatch:
		return "state_patch"
	case *exprdv1.AgentLoopRunRequest_Cancel:
		return "cancel"
	case *exprdv1.AgentLoopRunRequest_Start:
		return "start"
	case *exprdv1.AgentLoopRunRequest_Resume:
		return "resume"
	}
	return ""
}
