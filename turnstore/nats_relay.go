package turnstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
)

// DefaultNATSRelaySubject is where a resumed stream's messages reach the
// replica running the turn: core NATS request-reply on
// exprd.turnrelay.<id>, not a JetStream subject (nothing is stored).
const DefaultNATSRelaySubject = "exprd.turnrelay"

// Relay bounds: what the subscription of a running turn may hold unread.
// Its handler does not block (a reply is handed to a waiting request or
// refused), so the queue is short; one past either bound is dropped by
// the NATS client (a slow consumer), and the resumed stream that sent it
// hears nothing: its client is told to send again.
const (
	relayPendingMsgs  = 64
	relayPendingBytes = 8 << 20
)

// hdrOwner carries the identity the resuming replica checked.
const hdrOwner = "Exprd-Owner"

func (s *NATS) relaySubject(id string) string { return s.cfg.RelaySubject + "." + id }

// MaxRelayBytes is the NATS server's max_payload (1 MiB by default).
func (s *NATS) MaxRelayBytes() int {
	if n := s.nc.MaxPayload(); n > 0 {
		return int(n)
	}
	return 1 << 20
}

// ServeTurn subscribes to the turn's relay subject.
func (s *NATS) ServeTurn(id string, fn func(owner string, data []byte) []byte) (func(), error) {
	if !ValidID(id) {
		return nil, fmt.Errorf("turn id %q: want 32 lowercase hex digits", id)
	}
	sub, err := s.nc.Subscribe(s.relaySubject(id), func(m *nats.Msg) {
		if m.Reply == "" {
			return // nobody to answer
		}
		_ = m.Respond(fn(m.Header.Get(hdrOwner), m.Data))
	})
	if err != nil {
		return nil, unavailable(err)
	}
	if err := sub.SetPendingLimits(relayPendingMsgs, relayPendingBytes); err != nil {
		_ = sub.Unsubscribe()
		return nil, unavailable(err)
	}
	// The subscription is known to the server before the turn's first
	// event is recorded: a stream that resumes from it finds the turn.
	if err := s.nc.FlushTimeout(s.cfg.Timeout); err != nil {
		_ = sub.Unsubscribe()
		return nil, unavailable(err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// AskTurn is a request on the turn's relay subject, bounded by the
// store's timeout.
func (s *NATS) AskTurn(ctx context.Context, id, owner string, data []byte) ([]byte, error) {
	if !ValidID(id) {
		return nil, ErrNotRunning
	}
	if len(data) > s.MaxRelayBytes() {
		return nil, fmt.Errorf("%d bytes: over the %d the relay carries", len(data), s.MaxRelayBytes())
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	m := &nats.Msg{Subject: s.relaySubject(id), Data: data, Header: nats.Header{hdrOwner: []string{owner}}}
	r, err := s.nc.RequestMsgWithContext(ctx, m)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, ErrNotRunning
	case err != nil:
		return nil, unavailable(err)
	}
	return r.Data, nil
}
