package server

// What a resumed stream reaches of its running turn: the requests that
// still wait for the client (sent again after the replay) and the
// turn's correlators (the client's replies). On the replica running the
// turn it reaches them directly; on another, through the turn store's
// relay (turnstore.Relay: with NATS, request-reply on a subject per
// turn), one message at a time, each answered by the running replica.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/server/internal/rpcstatus"
	"github.com/exprd/exprd/turnstore"
)

// turnLink is what a resumed stream reaches of the turn it follows.
type turnLink interface {
	// pendingAfter is the request waiting for the client with the least
	// seq in (after, upTo], marked pending; nil when none waits.
	pendingAfter(ctx context.Context, after, upTo uint64) (*exprdv1.AgentLoopRunResponse, error)
	// deliver hands a reply to the request waiting for it: nil, or why
	// it is refused (a status, for Rejected).
	deliver(ctx context.Context, m *exprdv1.AgentLoopRunRequest) error
	// hold says a client follows the turn: a detached turn's timeout
	// starts again.
	hold(ctx context.Context)
}

// localLink is a turn running on this replica.
type localLink struct{ t *turn }

func (l localLink) pendingAfter(_ context.Context, after, upTo uint64) (*exprdv1.AgentLoopRunResponse, error) {
	return l.t.pendingAfter(after, upTo), nil
}

func (l localLink) deliver(_ context.Context, m *exprdv1.AgentLoopRunRequest) error {
	return l.t.deliver(m)
}

func (l localLink) hold(context.Context) { l.t.hold() }

// The relay's messages: their first byte says what they are.
const (
	relayReply   = 'r' // then an AgentLoopRunRequest holding a reply
	relayPending = 'p' // then after and upTo, uvarints
	relayHold    = 'h' // nothing more
)

// The relay's answers: their first byte says what follows.
const (
	relayOK      = 0 // then what was asked: a pending request, or nothing
	relayRefused = 1 // then a google.rpc.Status
)

// remoteLink is a turn running on another replica, reached through the
// store's relay with the owner's identity the resume checked.
type remoteLink struct {
	relay     turnstore.Relay
	id, owner string
}

// ask sends msg to the replica running the turn: its answer after
// relayOK, or the status it refused msg with.
func (l remoteLink) ask(ctx context.Context, msg []byte) ([]byte, error) {
	ans, err := l.relay.AskTurn(ctx, l.id, l.owner, msg)
	if err != nil {
		return nil, err
	}
	if len(ans) == 0 {
		return nil, fmt.Errorf("turn relay: an empty answer")
	}
	switch ans[0] {
	case relayOK:
		return ans[1:], nil
	case relayRefused:
		var sp spb.Status
		if err := proto.Unmarshal(ans[1:], &sp); err != nil {
			return nil, fmt.Errorf("turn relay: a refusal: %w", err)
		}
		return nil, status.FromProto(&sp).Err()
	}
	return nil, fmt.Errorf("turn relay: an answer of kind %d", ans[0])
}

func (l remoteLink) pendingAfter(ctx context.Context, after, upTo uint64) (*exprdv1.AgentLoopRunResponse, error) {
	msg := binary.AppendUvarint(binary.AppendUvarint([]byte{relayPending}, after), upTo)
	ans, err := l.ask(ctx, msg)
	if errors.Is(err, turnstore.ErrNotRunning) {
		return nil, nil // it has ended, or its replica stopped: nothing waits
	}
	if err != nil || len(ans) == 0 {
		return nil, err
	}
	m := new(exprdv1.AgentLoopRunResponse)
	if err := proto.Unmarshal(ans, m); err != nil {
		return nil, fmt.Errorf("turn relay: a pending request: %w", err)
	}
	m.TurnId, m.Pending = "", true
	return m, nil
}

func (l remoteLink) deliver(ctx context.Context, m *exprdv1.AgentLoopRunRequest) error {
	kind, id := replyOf(m)
	msg, err := proto.MarshalOptions{}.MarshalAppend([]byte{relayReply}, m)
	if err != nil {
		return rpcstatus.Internal()
	}
	if max := l.relay.MaxRelayBytes(); len(msg) > max {
		return rpcstatus.Exhausted(quotaRelayBytes, fmt.Sprintf("the %s is %d bytes: a reply on a stream resumed on another replica than the turn's is carried to it in at most %d (the NATS server's max_payload); send it on a stream resumed on the replica running the turn, or raise max_payload", kind, len(msg), max))
	}
	_, err = l.ask(ctx, msg)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, turnstore.ErrNotRunning):
		return rpcstatus.New(codes.NotFound, fmt.Sprintf("no request waits for %q: the turn runs on no replica (it has ended, or its replica stopped)", id), rpcstatus.Info(exprdv1.ErrorReason_REPLY_NOT_AWAITED))
	case status.Code(err) != codes.Unknown:
		return err // the running replica's refusal
	}
	return rpcstatus.New(codes.Unavailable, "the replica running the turn did not answer: send the reply again (the first reply to a request wins, a repeated one is Rejected NOT_FOUND)",
		rpcstatus.Info(exprdv1.ErrorReason_TURN_STORE_UNAVAILABLE), rpcstatus.Retry(rpcstatus.DefaultRetryDelay))
}

func (l remoteLink) hold(ctx context.Context) {
	_, _ = l.ask(ctx, []byte{relayHold})
}

// quotaRelayBytes is the limit of a reply carried between replicas.
const quotaRelayBytes = "turn_relay_bytes"

// holdEvery is how often a stream following a turn on another replica
// tells it a client follows: four times in its detached timeout.
func holdEvery(detached time.Duration) time.Duration {
	return max(detached/4, 100*time.Millisecond)
}

// serveRelay answers what streams resumed on other replicas send the
// turn (turnstore.Relay's ServeTurn): only the identity that started the
// turn is answered; anyone else is told it is not found, as a resume is.
// It never blocks.
func (t *turn) serveRelay(maxBytes int) func(owner string, data []byte) []byte {
	refuse := func(err error) []byte {
		b, _ := proto.MarshalOptions{}.MarshalAppend([]byte{relayRefused}, rpcstatus.WithReason(status.Convert(err)).Proto())
		return b
	}
	return func(owner string, data []byte) []byte {
		if owner != t.owner || len(data) == 0 {
			return refuse(errTurnNotFound)
		}
		t.hold()
		switch data[0] {
		case relayHold:
			return []byte{relayOK}
		case relayPending:
			after, n := binary.Uvarint(data[1:])
			upTo, k := binary.Uvarint(data[1+max(n, 0):])
			if n <= 0 || k <= 0 {
				return refuse(rpcstatus.BadRequest("relay", "a malformed question"))
			}
			m := t.pendingAfter(after, upTo)
			if m == nil {
				return []byte{relayOK}
			}
			m.Pending = false // the asking replica marks it
			b, _ := proto.MarshalOptions{}.MarshalAppend([]byte{relayOK}, m)
			if len(b) > maxBytes {
				return refuse(rpcstatus.Exhausted(quotaRelayBytes, "a pending request is larger than the relay carries"))
			}
			return b
		case relayReply:
			m := new(exprdv1.AgentLoopRunRequest)
			if err := proto.Unmarshal(data[1:], m); err != nil {
				return refuse(rpcstatus.BadRequest("relay", "a malformed reply"))
			}
			if kind, _ := replyOf(m); kind == "" {
				return refuse(rpcstatus.BadRequest("msg", "only replies are carried to the replica running the turn"))
			}
			if err := t.deliver(m); err != nil {
				return refuse(err)
			}
			return []byte{relayOK}
		}
		return refuse(rpcstatus.BadRequest("relay", "an unknown message"))
	}
}
