package turnstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Defaults of NATSConfig.
const (
	DefaultNATSStream  = "EXPRD_TURNS"
	DefaultNATSSubject = "exprd.turn" // a turn's events are on exprd.turn.<id>
	DefaultNATSBucket  = "exprd_turns"
	// DefaultNATSLeaseBucket holds the turns' leases (nats_takeover.go).
	DefaultNATSLeaseBucket = "exprd_turn_leases"
	DefaultNATSTimeout     = 5 * time.Second
)

// Message headers of the events stream.
const (
	hdrSeq = "Exprd-Seq" // the event's seq; on the end record, the last event's
	hdrEnd = "Exprd-End" // set on the end record
	// hdrWriter names the store (a process) that wrote an event or an
	// end record: a publish tried again after its ack was lost finds its
	// own message there, and goes on as written.
	hdrWriter = "Exprd-Writer"
)

// NATSConfig configures a NATS store.
type NATSConfig struct {
	// URL is one or more servers: nats://host:4222[,nats://host:4222...]
	// (tls:// for TLS).
	URL string
	// CredsFile is a NATS credentials file (a user JWT and its nkey seed),
	// as the operator issued it; empty: none.
	CredsFile string
	// CAFile verifies the servers' certificates; CertFile and KeyFile are
	// a client certificate. Either implies TLS.
	CAFile, CertFile, KeyFile string
	// Stream, Subject and Bucket name what the store uses (defaults above);
	// RelaySubject is where resumed streams reach the replica running a
	// turn (DefaultNATSRelaySubject).
	Stream, Subject, Bucket, RelaySubject string
	// LeaseBucket names the bucket of the turns' leases (default above);
	// Lease is how long one lasts after its last renewal (0:
	// DefaultLease).
	LeaseBucket string
	Lease       time.Duration
	// Replicas of the stream and the bucket (0: 1).
	Replicas int
	// Timeout bounds one request to NATS (0: DefaultNATSTimeout).
	Timeout time.Duration
	Limits  Limits
}

// NATS is a Store on NATS JetStream, shared by every replica: a stream of
// events (a subject per turn, de-duplicated by message id) and a
// key-value bucket of turn records (owner, start, end).
type NATS struct {
	cfg    NATSConfig
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
	kv     jetstream.KeyValue
	leases jetstream.KeyValue // the turns' leases: a key a running turn, lapsing Lease after its last write
	writer string             // this store's name in hdrWriter: 64 random bits

	mu     sync.Mutex
	counts map[string]*natsCount // the turns this process writes: what they hold

	// One watch of every record's updates serves every WatchCancel of the
	// process, started by the first: a watch a turn would be a consumer
	// on the NATS server for each turn running.
	watchMu   sync.Mutex
	watching  map[string]chan struct{} // by turn: closed at its cancel
	watchStop context.CancelFunc       // nil until started
}

type natsCount struct {
	events int
	bytes  int64 // its events' and its journal's
	// last is the stream sequence of its last event: the next append
	// expects it, so that a replica that lost the turn's lease cannot
	// append after another took it over.
	last    uint64
	journal int // its journal's entries
	// rec and rev are its record as this process created it and that
	// record's revision: End sets its end with one compare-and-set, and
	// reads the record first only when another write came between (a
	// Cancel). rev is 0 for a turn adopted (its record not read).
	rec natsRecord
	rev uint64
}

// natsRecord is a turn's record in the bucket.
type natsRecord struct {
	Owner   string `json:"owner"`
	Started int64  `json:"started"`          // Unix nanoseconds
	Ended   int64  `json:"ended,omitempty"`  // Unix nanoseconds; 0 while it runs
	Cancel  bool   `json:"cancel,omitempty"` // a stop was asked for
	// Takeovers counts the replicas that went on with the turn after
	// the one running it stopped (Adopt).
	Takeovers int `json:"takeovers,omitempty"`
}

// OpenNATS connects to NATS and makes sure the stream and the bucket exist
// with cfg's limits.
func OpenNATS(ctx context.Context, cfg NATSConfig) (*NATS, error) {
	if err := cfg.Limits.Validate(); err != nil {
		return nil, err
	}
	if cfg.Stream == "" {
		cfg.Stream = DefaultNATSStream
	}
	if cfg.Subject == "" {
		cfg.Subject = DefaultNATSSubject
	}
	if cfg.Bucket == "" {
		cfg.Bucket = DefaultNATSBucket
	}
	if cfg.RelaySubject == "" {
		cfg.RelaySubject = DefaultNATSRelaySubject
	}
	if cfg.LeaseBucket == "" {
		cfg.LeaseBucket = DefaultNATSLeaseBucket
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Replicas <= 0 {
		cfg.Replicas = 1
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultNATSTimeout
	}
	// While the connection is down, a publish fails at once rather than
	// wait in a buffer for its ack's timeout: a turn whose store is out of
	// reach goes on, not durable (the server keeps what it could not
	// record, and records it when the store is back).
	opts := []nats.Option{nats.Name("exprd"), nats.Timeout(cfg.Timeout), nats.MaxReconnects(-1), nats.ReconnectBufSize(-1)}
	if cfg.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	}
	if cfg.CAFile != "" {
		opts = append(opts, nats.RootCAs(cfg.CAFile))
	}
	if cfg.CertFile != "" {
		opts = append(opts, nats.ClientCert(cfg.CertFile, cfg.KeyFile))
	}
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("turn store: %w: %w", ErrUnavailable, err)
	}
	var w [8]byte
	_, _ = rand.Read(w[:])
	s := &NATS{cfg: cfg, nc: nc, counts: map[string]*natsCount{}, writer: hex.EncodeToString(w[:])}
	if err := s.setUp(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return s, nil
}

func (s *NATS) setUp(ctx context.Context) error {
	var err error
	if s.js, err = jetstream.New(s.nc); err != nil {
		return err
	}
	maxMsg := s.cfg.Limits.MaxBytes
	if maxMsg > math.MaxInt32 {
		maxMsg = math.MaxInt32
	}
	s.stream, err = s.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        s.cfg.Stream,
		Description: "exprd: the events of AgentLoop turns, a subject per turn",
		Subjects:    []string{s.cfg.Subject + ".*"},
		Storage:     jetstream.FileStorage,
		Replicas:    s.cfg.Replicas,
		MaxAge:      s.cfg.Limits.MaxAge,
		// The writer enforces the limits (a clear error); the stream is
		// the backstop: the events and the end record.
		MaxMsgsPerSubject:    int64(s.cfg.Limits.MaxEvents) + 1,
		MaxMsgSize:           int32(maxMsg),
		Discard:              jetstream.DiscardNew,
		DiscardNewPerSubject: true,
		Duplicates:           2 * time.Minute,
	})
	if err != nil {
		return fmt.Errorf("turn store: the stream %s: %w", s.cfg.Stream, err)
	}
	s.kv, err = s.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      s.cfg.Bucket,
		Description: "exprd: AgentLoop turn records (owner, start, end)",
		Storage:     jetstream.FileStorage,
		Replicas:    s.cfg.Replicas,
		TTL:         s.cfg.Limits.MaxAge,
		History:     1,
	})
	if err != nil {
		return fmt.Errorf("turn store: the bucket %s: %w", s.cfg.Bucket, err)
	}
	// A lease lapses Lease after its last write: the bucket's max age,
	// with a marker then (LimitMarkerTTL, NATS 2.11 and later) that the
	// other replicas' watches see.
	s.leases, err = s.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:         s.cfg.LeaseBucket,
		Description:    "exprd: the leases of running AgentLoop turns, each held by the replica running it",
		Storage:        jetstream.FileStorage,
		Replicas:       s.cfg.Replicas,
		TTL:            s.cfg.Lease,
		History:        1,
		LimitMarkerTTL: max(2*s.cfg.Lease, time.Second),
	})
	if err != nil {
		return fmt.Errorf("turn store: the bucket %s: %w", s.cfg.LeaseBucket, err)
	}
	return nil
}

// Kind is "nats".
func (s *NATS) Kind() string { return "nats" }

// Limits are the store's limits of a turn.
func (s *NATS) Limits() Limits { return s.cfg.Limits }

// Close closes the connection.
func (s *NATS) Close() error {
	s.watchMu.Lock()
	if s.watchStop != nil {
		s.watchStop()
	}
	s.watchMu.Unlock()
	s.nc.Close()
	return nil
}

func (s *NATS) subject(id string) string { return s.cfg.Subject + "." + id }

func (s *NATS) timeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), s.cfg.Timeout)
}

// unavailable wraps a failure to reach NATS.
func unavailable(err error) error { return fmt.Errorf("%w: %w", ErrUnavailable, err) }

// Create records a new turn.
func (s *NATS) Create(ctx context.Context, id, owner string) error {
	if !ValidID(id) {
		return fmt.Errorf("turn id %q: want 32 lowercase hex digits", id)
	}
	nr := natsRecord{Owner: owner, Started: time.Now().UnixNano()}
	rec, _ := json.Marshal(nr)
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	rev, err := s.kv.Create(ctx, id, rec)
	if err != nil {
		return unavailable(err)
	}
	s.mu.Lock()
	s.counts[id] = &natsCount{rec: nr, rev: rev}
	s.mu.Unlock()
	return nil
}

// Append publishes the turn's next event, de-duplicated by turn and seq.
// Tried again after a failure (its ack lost), it finds its event written
// and goes on.
func (s *NATS) Append(ctx context.Context, id string, ev Event) error {
	s.mu.Lock()
	c := s.counts[id]
	if c == nil {
		s.mu.Unlock()
		return ErrNotFound // only the replica that created a turn writes it
	}
	if err := s.cfg.Limits.Check(c.events, c.bytes, len(ev.Data)); err != nil {
		s.mu.Unlock()
		return err
	}
	last := c.last
	s.mu.Unlock()
	seq := strconv.FormatUint(ev.Seq, 10)
	m := &nats.Msg{Subject: s.subject(id), Data: ev.Data, Header: nats.Header{hdrSeq: []string{seq}, hdrWriter: []string{s.writer}}}
	at, err := s.publish(ctx, m, id+"-"+seq, last)
	if err != nil {
		return err
	}
	s.mu.Lock()
	c.events++
	c.bytes += int64(len(ev.Data))
	c.last = at
	s.mu.Unlock()
	return nil
}

// publish publishes m, the next message of its subject after the stream
// sequence last, and returns its stream sequence. A subject whose last
// message is not last's is another writer's (ErrLeaseLost), unless that
// message is m, written by this store before its ack was lost.
func (s *NATS) publish(ctx context.Context, m *nats.Msg, msgID string, last uint64) (uint64, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	ack, err := s.js.PublishMsg(ctx, m, jetstream.WithMsgID(msgID), jetstream.WithExpectLastSequencePerSubject(last))
	if err == nil {
		return ack.Sequence, nil
	}
	if !isWrongLast(err) {
		return 0, unavailable(err)
	}
	got, gerr := s.stream.GetLastMsgForSubject(ctx, m.Subject)
	if gerr != nil {
		return 0, unavailable(gerr)
	}
	if got.Header.Get(hdrWriter) == s.writer && got.Header.Get(jetstream.MsgIDHeader) == msgID {
		return got.Sequence, nil
	}
	return 0, ErrLeaseLost // another replica appended: it runs the turn now
}

// End publishes the end record and marks the record ended.
func (s *NATS) End(ctx context.Context, id string, end []byte) error {
	s.mu.Lock()
	c := s.counts[id]
	s.mu.Unlock()
	if c == nil {
		return ErrNotFound
	}
	m := &nats.Msg{Subject: s.subject(id), Data: end, Header: nats.Header{hdrSeq: []string{strconv.Itoa(c.events)}, hdrEnd: []string{"1"}, hdrWriter: []string{s.writer}}}
	if _, err := s.publish(ctx, m, id+"-end", c.last); err != nil {
		if errors.Is(err, ErrLeaseLost) {
			s.forget(id)
		}
		return err
	}
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	err := s.endRecord(ctx, id, c)
	if err != nil && !errors.Is(err, ErrUnavailable) {
		err = s.update(ctx, id, "its end", func(rec *natsRecord) bool {
			if rec.Ended != 0 {
				return false // tried again: it was set
			}
			rec.Ended = time.Now().UnixNano()
			return true
		})
	}
	if !errors.Is(err, ErrUnavailable) {
		s.forget(id) // else kept, for End to be tried again
	}
	return err
}

// endRecord sets the turn's end in its record with one compare-and-set on
// the revision this process created it with; errRecordChanged when another
// write came between (or the turn was adopted: its revision unknown).
func (s *NATS) endRecord(ctx context.Context, id string, c *natsCount) error {
	if c.rev == 0 {
		return errRecordChanged
	}
	rec := c.rec
	rec.Ended = time.Now().UnixNano()
	b, _ := json.Marshal(rec)
	_, err := s.kv.Update(ctx, id, b, c.rev)
	switch {
	case errors.Is(err, jetstream.ErrKeyExists): // another revision: read it
		return errRecordChanged
	case err != nil:
		return unavailable(err)
	}
	return nil
}

// errRecordChanged is a record whose revision is not the one this process
// wrote last.
var errRecordChanged = errors.New("the turn's record changed")

// forget stops counting a turn this process no longer writes.
func (s *NATS) forget(id string) {
	s.mu.Lock()
	delete(s.counts, id)
	s.mu.Unlock()
}

// casTries bounds the compare-and-set rounds of a record's update.
const casTries = 8

// update changes the turn's record with change (which reports false to
// leave it as it is), compare-and-set on its revision, again when another
// write came between (a Cancel and an End may race). what names the
// change for the error past casTries.
func (s *NATS) update(ctx context.Context, id, what string, change func(*natsRecord) bool) error {
	for range casTries {
		e, err := s.kv.Get(ctx, id)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			return ErrNotFound
		}
		if err != nil {
			return unavailable(err)
		}
		var rec natsRecord
		if err := json.Unmarshal(e.Value(), &rec); err != nil {
			return fmt.Errorf("turn %s: its record: %w", id, err)
		}
		if !change(&rec) {
			return nil
		}
		b, _ := json.Marshal(rec)
		if _, err = s.kv.Update(ctx, id, b, e.Revision()); err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) { // not a lost race
			return unavailable(err)
		}
	}
	return unavailable(fmt.Errorf("turn %s: its record changed %d times while %s was set", id, casTries, what))
}

// Cancel sets the record's cancel flag, unless the turn has ended.
func (s *NATS) Cancel(ctx context.Context, id string) error {
	if !ValidID(id) {
		return ErrNotFound
	}
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	return s.update(ctx, id, "a cancel", func(rec *natsRecord) bool {
		if rec.Ended != 0 || rec.Cancel {
			return false
		}
		rec.Cancel = true
		return true
	})
}

// WatchCancel registers the turn with the process's one watch of the
// bucket's updates (started by the first call), then reads the turn's
// record, for a cancel recorded before: either closes the channel.
func (s *NATS) WatchCancel(ctx context.Context, id string) <-chan struct{} {
	stop := make(chan struct{})
	if !ValidID(id) {
		return stop
	}
	s.watchMu.Lock()
	if s.watchStop == nil {
		if err := s.startWatch(); err != nil {
			s.watchMu.Unlock()
			return stop // never: a turn whose watch fails is stopped by its own replica only
		}
	}
	s.watching[id] = stop
	s.watchMu.Unlock()
	context.AfterFunc(ctx, func() { s.unwatch(id, stop) })
	// A turn this process created has had no cancel yet: nobody knew its
	// id before this watch (its first event comes after). Another's (one
	// adopted) may have.
	s.mu.Lock()
	c := s.counts[id]
	created := c != nil && c.rev != 0
	s.mu.Unlock()
	if created {
		return stop
	}
	if rec, err := s.Get(ctx, id); err == nil && rec.Cancelled {
		s.cancelled(id)
	}
	return stop
}

// startWatch starts the watch of every record's updates. s.watchMu is held.
func (s *NATS) startWatch() error {
	ctx, cancel := context.WithCancel(context.Background())
	w, err := s.kv.WatchAll(ctx, jetstream.UpdatesOnly(), jetstream.IgnoreDeletes())
	if err != nil {
		cancel()
		return err
	}
	s.watching, s.watchStop = map[string]chan struct{}{}, cancel
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
				if e == nil {
					continue
				}
				var rec natsRecord
				if json.Unmarshal(e.Value(), &rec) == nil && rec.Cancel {
					s.cancelled(e.Key())
				}
			}
		}
	}()
	return nil
}

// cancelled closes the watch of turn id, if this process watches it.
func (s *NATS) cancelled(id string) {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	if ch, ok := s.watching[id]; ok {
		close(ch)
		delete(s.watching, id)
	}
}

// unwatch forgets the watch stop of turn id (its context ended).
func (s *NATS) unwatch(id string, stop chan struct{}) {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	if s.watching[id] == stop {
		delete(s.watching, id)
	}
}

// Get reads the turn's record, and its last event's seq from the stream.
func (s *NATS) Get(ctx context.Context, id string) (Record, error) {
	if !ValidID(id) {
		return Record{}, ErrNotFound
	}
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	e, err := s.kv.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return Record{}, ErrNotFound
	}
	if err != nil {
		return Record{}, unavailable(err)
	}
	var nr natsRecord
	if err := json.Unmarshal(e.Value(), &nr); err != nil {
		return Record{}, fmt.Errorf("turn %s: its record: %w", id, err)
	}
	rec := Record{ID: id, Owner: nr.Owner, Started: time.Unix(0, nr.Started), Cancelled: nr.Cancel}
	if nr.Ended != 0 {
		rec.Ended = time.Unix(0, nr.Ended)
	}
	if s.cfg.Limits.expired(rec, time.Now()) {
		return Record{}, ErrNotFound
	}
	last, err := s.stream.GetLastMsgForSubject(ctx, s.subject(id))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
	case err != nil:
		return Record{}, unavailable(err)
	default:
		if rec.Last, err = strconv.ParseUint(last.Header.Get(hdrSeq), 10, 64); err != nil {
			return Record{}, fmt.Errorf("turn %s: its last event has no seq", id)
		}
	}
	return rec, nil
}

// Follow reads the turn's subject from its start (read): the events after
// after, then the new ones, to the end record.
func (s *NATS) Follow(ctx context.Context, id string, after uint64, fn func(Event) error) ([]byte, error) {
	if !ValidID(id) {
		return nil, ErrNotFound
	}
	it, stop, err := s.read(ctx, s.subject(id))
	if err != nil {
		return nil, err
	}
	defer stop()
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, unavailable(err)
		}
		if m.Headers().Get(hdrEnd) != "" {
			return m.Data(), nil
		}
		seq, err := strconv.ParseUint(m.Headers().Get(hdrSeq), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("turn %s: an event without a seq", id)
		}
		if seq <= after {
			continue
		}
		if err := fn(Event{Seq: seq, Data: m.Data()}); err != nil {
			return nil, err
		}
	}
}

// readerIdle is how long a reader's consumer lives on the NATS server
// without a pull (nats.go's default is 5 minutes): one whose reader
// stopped without deleting it (its process stopped) goes soon. A stream
// holds a bounded number of consumers (its max_consumers, and the
// server's limit), so that readers that stopped must not keep theirs.
const readerIdle = 10 * time.Second

// read reads subject from its start with an ordered consumer; stop stops
// it and deletes its consumer from the server.
func (s *NATS) read(ctx context.Context, subject string) (jetstream.MessagesContext, func(), error) {
	cctx, cancel := s.timeout(ctx)
	defer cancel()
	cons, err := s.js.OrderedConsumer(cctx, s.cfg.Stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject}, DeliverPolicy: jetstream.DeliverAllPolicy, InactiveThreshold: readerIdle})
	if err != nil {
		return nil, nil, unavailable(err)
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, nil, unavailable(err)
	}
	stop := func() {
		it.Stop()
		if info := cons.CachedInfo(); info != nil {
			dctx, cancel := s.timeout(context.Background())
			defer cancel()
			_ = s.js.DeleteConsumer(dctx, s.cfg.Stream, info.Name)
		}
	}
	return it, stop, nil
}
