package turnstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The NATS store's takeover: a turn's lease is a key of the lease bucket
// (the holder's name), which lapses Lease after its last write; its
// journal is a subject of the events stream, <Subject>.j<id>, bounded
// with the turn's events by its limits.

var _ Takeover = (*NATS)(nil)

// isWrongLast is a publish refused for its expected last sequence: the
// subject had a message this writer did not write.
func isWrongLast(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

func (s *NATS) journalSubject(id string) string { return s.cfg.Subject + ".j" + id }

// LeaseTTL is how long a lease lasts after its last renewal.
func (s *NATS) LeaseTTL() time.Duration { return s.cfg.Lease }

// Acquire creates the turn's lease key for holder.
func (s *NATS) Acquire(ctx context.Context, id, holder string) (*Lease, error) {
	if !ValidID(id) {
		return nil, ErrNotFound
	}
	cctx, cancel := s.timeout(ctx)
	defer cancel()
	rev, err := s.leases.Create(cctx, id, []byte(holder))
	if errors.Is(err, jetstream.ErrKeyExists) {
		return nil, ErrLeaseHeld
	}
	if err != nil {
		return nil, unavailable(err)
	}
	l := &Lease{}
	l.renew = func(ctx context.Context) error {
		ctx, cancel := s.timeout(ctx)
		defer cancel()
		next, err := s.leases.Update(ctx, id, []byte(holder), rev)
		if err == nil {
			rev = next
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return unavailable(err)
		}
		// It lapsed: taken again when nobody took it meanwhile.
		if next, err = s.leases.Create(ctx, id, []byte(holder)); err == nil {
			rev = next
			return nil
		}
		if errors.Is(err, jetstream.ErrKeyExists) {
			return ErrLeaseLost
		}
		return unavailable(err)
	}
	l.handOver = func(ctx context.Context) error {
		ctx, cancel := s.timeout(ctx)
		defer cancel()
		if err := s.leases.Purge(ctx, id, jetstream.LastRevision(rev)); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
			return unavailable(err)
		}
		return nil
	}
	l.release = func(ctx context.Context) error {
		ctx, cancel := s.timeout(ctx)
		defer cancel()
		if err := s.leases.Delete(ctx, id, jetstream.LastRevision(rev)); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
			return unavailable(err)
		}
		return nil
	}
	return l, nil
}

// WatchLapsed watches the lease bucket for the markers of lapsed leases
// (a purge, reason MaxAge; a lease given up is a delete), and first
// looks at every running turn for one without a lease.
func (s *NATS) WatchLapsed(ctx context.Context, fn func(id string)) error {
	w, err := s.leases.WatchAll(ctx, jetstream.UpdatesOnly())
	if err != nil {
		return unavailable(err)
	}
	go func() {
		defer func() { _ = w.Stop() }()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e != nil && e.Operation() == jetstream.KeyValuePurge && ValidID(e.Key()) {
					fn(e.Key())
				}
			}
		}
	}()
	go s.orphans(ctx, fn)
	return nil
}

// orphans calls fn with each running turn that holds no lease: its
// replica stopped while no replica watched the leases. A turn started
// less than a lease ago is left out: its replica writes its record, then
// takes its lease, and a replica starting in between took the turn from
// under it (its client's Run ended UNAVAILABLE, in a CI run). A replica
// that stopped between the two had journalled nothing a takeover could
// go on from.
func (s *NATS) orphans(ctx context.Context, fn func(id string)) {
	keys, err := s.kv.ListKeys(ctx)
	if err != nil {
		return
	}
	defer func() { _ = keys.Stop() }()
	for id := range keys.Keys() {
		if !ValidID(id) {
			continue
		}
		rec, err := s.Get(ctx, id)
		if err != nil || !rec.Ended.IsZero() || time.Since(rec.Started) < s.cfg.Lease {
			continue
		}
		gctx, cancel := s.timeout(ctx)
		_, err = s.leases.Get(gctx, id)
		cancel()
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			fn(id)
		}
	}
}

// scan calls fn with each message the subject holds now, in order.
func (s *NATS) scan(ctx context.Context, subject string, fn func(jetstream.Msg) error) error {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	last, err := s.stream.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	if err != nil {
		return unavailable(err)
	}
	it, stop, err := s.read(ctx, subject)
	if err != nil {
		return err
	}
	defer stop()
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return unavailable(err)
		}
		if err := fn(m); err != nil {
			return err
		}
		if meta, err := m.Metadata(); err != nil || meta.Sequence.Stream >= last.Sequence {
			return err
		}
	}
}

// Adopt counts what the turn holds (its events, its journal) and the
// stream sequence of its last event, and counts the takeover in its
// record.
func (s *NATS) Adopt(ctx context.Context, id string) (int, error) {
	if !ValidID(id) {
		return 0, ErrNotFound
	}
	c := &natsCount{}
	err := s.scan(ctx, s.subject(id), func(m jetstream.Msg) error {
		if m.Headers().Get(hdrEnd) != "" {
			return ErrNotRunning // it ended meanwhile
		}
		meta, err := m.Metadata()
		if err != nil {
			return err
		}
		c.events++
		c.bytes += int64(len(m.Data()))
		c.last = meta.Sequence.Stream
		return nil
	})
	if err == nil {
		err = s.scan(ctx, s.journalSubject(id), func(m jetstream.Msg) error {
			c.journal++
			c.bytes += int64(len(m.Data()))
			return nil
		})
	}
	if err != nil {
		return 0, err
	}
	var n int
	uctx, cancel := s.timeout(ctx)
	defer cancel()
	if err := s.update(uctx, id, "a takeover", func(rec *natsRecord) bool {
		rec.Takeovers++
		n = rec.Takeovers
		return true
	}); err != nil {
		return 0, err
	}
	s.mu.Lock()
	s.counts[id] = c
	s.mu.Unlock()
	return n, nil
}

// Journal publishes entry on the turn's journal subject, de-duplicated
// by its index.
func (s *NATS) Journal(ctx context.Context, id string, entry []byte) error {
	s.mu.Lock()
	c := s.counts[id]
	if c == nil {
		s.mu.Unlock()
		return ErrNotFound
	}
	if err := s.cfg.Limits.Check(c.events, c.bytes, len(entry)); err != nil {
		s.mu.Unlock()
		return err
	}
	c.journal++
	c.bytes += int64(len(entry))
	s.mu.Unlock()
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	// Its message id is its content's hash: an entry tried again after
	// its ack was lost is written once (the same entry twice says nothing
	// more: the journal folds to the same turn).
	sum := sha256.Sum256(entry)
	m := &nats.Msg{Subject: s.journalSubject(id), Data: entry}
	if _, err := s.js.PublishMsg(ctx, m, jetstream.WithMsgID(id+"-j"+hex.EncodeToString(sum[:16]))); err != nil {
		s.mu.Lock()
		c.journal--
		c.bytes -= int64(len(entry))
		s.mu.Unlock()
		return unavailable(err)
	}
	return nil
}

// ReadJournal reads the turn's journal subject.
func (s *NATS) ReadJournal(ctx context.Context, id string) ([][]byte, error) {
	if !ValidID(id) {
		return nil, ErrNotFound
	}
	var out [][]byte
	err := s.scan(ctx, s.journalSubject(id), func(m jetstream.Msg) error {
		out = append(out, m.Data())
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("turn %s: its journal: %w", id, err)
	}
	return out, nil
}
