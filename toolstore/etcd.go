package toolstore

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/manual"
)

// Defaults of an EtcdConfig.
const (
	DefaultPrefix           = "/exprd/registry/"
	DefaultTimeout          = 5 * time.Second
	DefaultProgressInterval = 2 * time.Second
	// MaxRecordBytes bounds a stored manual (compressed), under etcd's
	// default request limit of 1.5 MiB.
	MaxRecordBytes = 1 << 20
	// maxRecordJSON bounds a stored record once decompressed.
	maxRecordJSON = 32 * MaxRecordBytes
	// snapshotPage is how many manuals one read of a snapshot returns.
	snapshotPage = 16
)

// EtcdConfig says how to reach etcd.
type EtcdConfig struct {
	Endpoints          []string
	TLS                *tls.Config // nil: plaintext
	Username, Password string
	Prefix             string        // keys are Prefix + "manuals/" + name
	Timeout            time.Duration // of each request to etcd
	// ProgressInterval is how often the replica asks etcd to confirm that
	// it has every change, which is what Status.Synced measures.
	ProgressInterval time.Duration
	Logger           *slog.Logger
	Meter            metric.MeterProvider
}

// Etcd is a Store shared by every replica through etcd. What is stored is
// a manual as Resolve leaves it (its tools, templates with variables
// unresolved), never its source: a replica applies a manual without
// fetching anything, so every replica serves the same tools whatever the
// provider answers later, and no secret reaches etcd.
type Etcd struct {
	reg      *utcp.Registry
	cli      *clientv3.Client
	cfg      EtcdConfig
	log      *slog.Logger
	operator map[string]bool
	writer   string

	mu     sync.Mutex
	rev    int64            // revision applied
	synced time.Time        // when the replica last knew it had every change
	shared map[string]int64 // manuals applied from the store, by mod revision
	// unapplied holds each manual whose latest record this replica could
	// not apply; tried again when a removal may have made room.
	unapplied map[string]*mvccpb.KeyValue
	// failed holds, by revision, the applies that failed lately: a writer
	// waiting for its revision finds its own outcome there, whatever
	// other writes of the same name came since. Kept for failedFor.
	failed  map[int64]applyFailure
	advance chan struct{} // closed and replaced when rev moves

	// stopWatch ends the watch follow is on; reload makes follow read a
	// snapshot next (etcd's history went backwards).
	stopWatch context.CancelFunc
	reload    bool

	metrics etcdMetrics
	cancel  context.CancelFunc
	done    chan struct{}
	writes  sync.WaitGroup // Register and Remove calls under way, for Close
}

type applyFailure struct {
	err error
	at  time.Time
}

// failedFor is how long a failed apply is remembered: longer than a
// writer waits for it.
const failedFor = time.Minute

// record is a stored manual.
type record struct {
	Manual  json.RawMessage `json:"manual"`
	Written time.Time       `json:"written"` // the writer's clock, for the propagation metric
	Writer  string          `json:"writer"`  // the writer's host name, for people reading etcd
}

// OpenEtcd connects to etcd, applies its snapshot of the shared manuals to
// reg, and follows its changes until Close. The manuals reg holds already
// are the operator's. It fails when no snapshot could be read before ctx
// ends.
func OpenEtcd(ctx context.Context, reg *utcp.Registry, cfg EtcdConfig) (*Etcd, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("toolstore: no etcd endpoints")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if !strings.HasSuffix(cfg.Prefix, "/") {
		cfg.Prefix += "/"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = DefaultProgressInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Meter == nil {
		cfg.Meter = noop.NewMeterProvider()
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: cfg.Endpoints, TLS: cfg.TLS, Username: cfg.Username, Password: cfg.Password,
		DialTimeout: cfg.Timeout, DialKeepAliveTime: 10 * time.Second, DialKeepAliveTimeout: cfg.Timeout,
		Logger: zap.NewNop(),
		// Back at most a second between attempts to reach etcd, so that
		// writes work again soon after it is back.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second}, MinConnectTimeout: cfg.Timeout})},
	})
	if err != nil {
		// With a user, the client logs in as it connects: a certificate
		// etcd's CA did not sign, or a wrong password, fails here.
		return nil, fmt.Errorf("toolstore: connecting to etcd at %s (TLS %t, user %q): %w; check the endpoints, the CA and the credentials",
			strings.Join(cfg.Endpoints, ","), cfg.TLS != nil, cfg.Username, err)
	}
	host, _ := os.Hostname()
	s := &Etcd{reg: reg, cli: cli, cfg: cfg, log: cfg.Logger, operator: operatorManuals(reg), writer: host,
		shared: map[string]int64{}, unapplied: map[string]*mvccpb.KeyValue{}, failed: map[int64]applyFailure{}, advance: make(chan struct{}), done: make(chan struct{})}
	if s.metrics, err = newEtcdMetrics(cfg.Meter); err != nil {
		_ = cli.Close()
		return nil, err
	}
	for {
		err = s.loadSnapshot(ctx)
		if err == nil {
			break
		}
		s.log.Warn("tool registry store: no snapshot yet", "error", err)
		select {
		case <-ctx.Done():
			_ = cli.Close()
			return nil, fmt.Errorf("toolstore: reading the shared manuals from etcd %s: %w", strings.Join(cfg.Endpoints, ","), err)
		case <-time.After(time.Second):
		}
	}
	fctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go s.follow(fctx)
	return s, nil
}

// Close stops following etcd and closes the client.
func (s *Etcd) Close() error {
	s.cancel()
	<-s.done
	s.writes.Wait() // their waits end with done; their undos need the client
	return s.cli.Close()
}

// rewind notes that etcd's history went back past what this replica
// applied (restored from a backup, or a new cluster at the same address):
// rev no longer says what the replica has, so it is reset, and follow
// reloads a snapshot. It reports whether rev was behind.
func (s *Etcd) rewind(rev int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rev == 0 || rev >= s.rev {
		return false
	}
	s.log.Warn("tool registry store: etcd's revision went back; reloading its snapshot", "applied", s.rev, "etcd", rev)
	s.rev, s.synced, s.reload = 0, time.Time{}, true
	if s.stopWatch != nil {
		s.stopWatch()
	}
	return true
}

// Operator implements Store.
func (s *Etcd) Operator(name string) bool { return s.operator[name] }

// Status implements Store.
func (s *Etcd) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Status{Store: "etcd", Revision: s.rev, Synced: s.synced}
}

func (s *Etcd) key(name string) string { return s.cfg.Prefix + "manuals/" + name }

// Register implements Store. The manual is resolved here, then stored with
// a compare-and-swap (create only unless replace); it returns once this
// replica has applied that revision. A write this replica cannot apply
// (another replica's write made the registry exceed its bounds meanwhile)
// is undone in etcd if nothing wrote the key since.
func (s *Etcd) Register(ctx context.Context, name string, src utcp.Source, replace bool) (*utcp.Registration, error) {
	s.writes.Add(1)
	defer s.writes.Done()
	res, err := s.reg.Resolve(ctx, name, src)
	if err != nil {
		return nil, err
	}
	name = res.Name
	if !replace {
		if _, taken := s.reg.Manual(name); taken {
			return nil, &utcp.AlreadyExistsError{Kind: "manual", Name: name, Manual: name}
		}
	}
	if err := s.withinBounds(res); err != nil {
		return nil, err
	}
	value, err := s.encode(res)
	if err != nil {
		return nil, err
	}
	key := s.key(name)
	wctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	put := clientv3.OpPut(key, string(value), clientv3.WithPrevKV())
	txn := s.cli.Txn(wctx)
	if !replace {
		txn = txn.If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0))
	}
	resp, err := txn.Then(put).Commit()
	if err != nil {
		return nil, s.unavailable(ctx, "write", err)
	}
	if !resp.Succeeded {
		return nil, &utcp.AlreadyExistsError{Kind: "manual", Name: name, Manual: name}
	}
	rev := resp.Header.Revision
	if s.rewind(rev) {
		return nil, &UnavailableError{Op: "apply", Err: errors.New("etcd's history went back; this replica is reloading it")}
	}
	var prev *mvccpb.KeyValue
	if r := resp.Responses[0].GetResponsePut(); r != nil {
		prev = r.PrevKv
	}
	if err := s.waitApplied(ctx, rev); err != nil {
		s.undo(key, rev, prev)
		return nil, err
	}
	return &utcp.Registration{Manual: name, Tools: res.Tools, Skipped: res.Skipped}, nil
}

// withinBounds refuses a manual that would take the registry past its
// bounds, counted on this replica (which holds every shared manual).
func (s *Etcd) withinBounds(res *utcp.Resolved) error {
	b := s.reg.Bounds()
	manuals, tools := b.Manuals+1, b.Tools+len(res.Tools)
	if old, ok := s.reg.Manual(res.Name); ok {
		manuals, tools = manuals-1, tools-len(old.Tools)
	}
	if manuals > b.MaxManuals && manuals > b.Manuals {
		return &utcp.LimitError{What: "manuals", Limit: b.MaxManuals, Would: manuals}
	}
	if tools > b.MaxTools && tools > b.Tools {
		return &utcp.LimitError{What: "tools", Limit: b.MaxTools, Would: tools}
	}
	return nil
}

// undo puts the key back as it was before a write at rev, unless
// something wrote it since.
func (s *Etcd) undo(key string, rev int64, prev *mvccpb.KeyValue) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	defer cancel()
	back := clientv3.OpDelete(key)
	if prev != nil {
		back = clientv3.OpPut(key, string(restamped(prev.Value, s.writer)))
	}
	if _, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).Then(back).Commit(); err != nil {
		s.log.Error("tool registry store: cannot undo a write this replica could not apply", "key", key, "revision", rev, "error", err)
	}
}

// restamped is a stored record with its write time made now (and its
// writer this replica), so that the replicas applying an undo do not
// count the old record's age as propagation; a record that does not
// decode is returned as it is.
func restamped(value []byte, writer string) []byte {
	rec, err := decodeRecord(value)
	if err != nil {
		return value
	}
	rec.Written, rec.Writer = time.Now().UTC(), writer
	out, err := encodeRecord(rec)
	if err != nil {
		return value
	}
	return out
}

// Remove implements Store: a delete if the key exists, then a wait until
// this replica applied it.
func (s *Etcd) Remove(ctx context.Context, name string) (*utcp.Registration, error) {
	s.writes.Add(1)
	defer s.writes.Done()
	name = utcp.SanitizeManualName(name)
	key := s.key(name)
	wctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	resp, err := s.cli.Txn(wctx).If(clientv3.Compare(clientv3.CreateRevision(key), ">", 0)).
		Then(clientv3.OpDelete(key, clientv3.WithPrevKV())).Commit()
	if err != nil {
		return nil, s.unavailable(ctx, "delete", err)
	}
	if !resp.Succeeded {
		return nil, s.reg.UnknownManual(name)
	}
	out := &utcp.Registration{Manual: name}
	if d := resp.Responses[0].GetResponseDeleteRange(); d != nil && len(d.PrevKvs) == 1 {
		if rec, err := decodeRecord(d.PrevKvs[0].Value); err == nil {
			if m, err := manual.Parse(rec.Manual); err == nil {
				for _, t := range m.Tools {
					out.Tools = append(out.Tools, utcp.FullToolName(name, t.Name))
				}
			}
		}
	}
	if s.rewind(resp.Header.Revision) {
		return nil, &UnavailableError{Op: "apply", Err: errors.New("etcd's history went back; this replica is reloading it")}
	}
	if err := s.waitApplied(ctx, resp.Header.Revision); err != nil {
		return nil, err
	}
	return out, nil
}

// unavailable is the error of a request to etcd that failed: the
// caller's own cancellation as it is, anything else ErrUnavailable.
func (s *Etcd) unavailable(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	s.log.Warn("tool registry store: etcd request failed", "op", op, "error", err)
	return &UnavailableError{Op: op, Err: errors.New("etcd did not answer in " + s.cfg.Timeout.String())}
}

// waitApplied waits until this replica has applied rev, and reports the
// error applying that revision failed with, if it did.
func (s *Etcd) waitApplied(ctx context.Context, rev int64) error {
	timer := time.NewTimer(s.cfg.Timeout)
	defer timer.Stop()
	for {
		s.mu.Lock()
		applied, advance := s.rev, s.advance
		f, failed := s.failed[rev]
		s.mu.Unlock()
		if applied >= rev {
			if failed {
				return f.err
			}
			return nil
		}
		select {
		case <-advance:
		case <-s.done:
			return &UnavailableError{Op: "apply", Err: errors.New("this replica is shutting down")}
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return &UnavailableError{Op: "apply", Err: fmt.Errorf("stored at revision %d, but this replica has not seen it yet", rev)}
		}
	}
}

// encode is a resolved manual as stored: JSON, gzip-compressed.
func (s *Etcd) encode(res *utcp.Resolved) ([]byte, error) {
	m, err := json.Marshal(res.Manual)
	if err != nil {
		return nil, err
	}
	value, err := encodeRecord(&record{Manual: m, Written: time.Now().UTC(), Writer: s.writer})
	if err != nil {
		return nil, err
	}
	if err := recordWithin(value); err != nil {
		return nil, err
	}
	return value, nil
}

// recordWithin refuses a stored record over MaxRecordBytes.
func recordWithin(value []byte) error {
	if len(value) > MaxRecordBytes {
		return &utcp.LimitError{What: "manual_bytes", Limit: MaxRecordBytes, Would: len(value)}
	}
	return nil
}

// encodeRecord is a record as stored: JSON, gzip-compressed.
func encodeRecord(rec *record) ([]byte, error) {
	raw, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(raw)
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// decodeRecord reads a stored manual, at most 32 times MaxRecordBytes
// once decompressed.
func decodeRecord(value []byte) (*record, error) {
	zr, err := gzip.NewReader(bytes.NewReader(value))
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(zr, maxRecordJSON+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxRecordJSON {
		return nil, errors.New("the record is too large once decompressed")
	}
	var rec record
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, err
	}
	return &rec, nil
}

// loadSnapshot reads every shared manual at one revision, page by page,
// and makes the registry match it: manuals gone are removed, new or
// changed ones applied.
func (s *Etcd) loadSnapshot(ctx context.Context) error {
	prefix := s.cfg.Prefix + "manuals/"
	end := clientv3.GetPrefixRangeEnd(prefix)
	kvs := map[string]*mvccpb.KeyValue{}
	var rev int64
	from := prefix
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(snapshotPage)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		resp, err := s.cli.Get(rctx, from, opts...)
		cancel()
		if err != nil {
			return err
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			kvs[strings.TrimPrefix(string(kv.Key), prefix)] = kv
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	s.mu.Lock()
	var gone []string
	for name := range s.shared {
		if _, ok := kvs[name]; !ok {
			gone = append(gone, name)
		}
	}
	for name := range s.unapplied {
		if _, ok := kvs[name]; !ok {
			delete(s.unapplied, name)
		}
	}
	s.mu.Unlock()
	for _, name := range gone {
		s.remove(name, rev)
	}
	for name, kv := range kvs {
		s.mu.Lock()
		have, ok := s.shared[name]
		s.mu.Unlock()
		if !ok || have != kv.ModRevision {
			s.put(ctx, name, kv, false)
		}
	}
	s.moved(rev, true)
	return nil
}

// follow applies etcd's changes from the revision applied, reloading a
// snapshot when the watch cannot resume (compacted past it, or cancelled),
// and asks for progress notices so that Status.Synced stays current.
func (s *Etcd) follow(ctx context.Context) {
	defer close(s.done)
	ctx = clientv3.WithRequireLeader(ctx)
	var progress sync.WaitGroup
	progress.Go(func() { s.askProgress(ctx) })
	defer progress.Wait()
	prefix := s.cfg.Prefix + "manuals/"
	snapshot := false
	for ctx.Err() == nil {
		if snapshot {
			if err := s.loadSnapshot(ctx); err != nil {
				s.log.Warn("tool registry store: reloading the snapshot", "error", err)
				sleep(ctx, time.Second)
				continue
			}
			s.metrics.reloads.Add(ctx, 1)
			snapshot = false
		}
		wctx, cancel := context.WithCancel(ctx)
		s.mu.Lock()
		s.stopWatch = cancel
		s.mu.Unlock()
		for resp := range s.cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(s.Status().Revision+1), clientv3.WithProgressNotify()) {
			if s.rewind(resp.Header.Revision) {
				break
			}
			if err := resp.Err(); err != nil {
				if ctx.Err() == nil {
					s.log.Warn("tool registry store: the watch ended; reloading a snapshot", "error", err)
				}
				snapshot = true
				break
			}
			for _, ev := range resp.Events {
				name := strings.TrimPrefix(string(ev.Kv.Key), prefix)
				if ev.Type == clientv3.EventTypeDelete {
					s.remove(name, ev.Kv.ModRevision)
				} else {
					s.put(ctx, name, ev.Kv, true)
				}
				s.moved(ev.Kv.ModRevision, false)
			}
			if resp.IsProgressNotify() {
				s.moved(resp.Header.Revision, true)
			}
		}
		cancel()
		s.mu.Lock()
		if s.reload {
			s.reload, snapshot = false, true
		}
		s.mu.Unlock()
		if !snapshot {
			sleep(ctx, 100*time.Millisecond) // the watch closed without a reason: resume from rev
		}
	}
}

// askProgress asks etcd every ProgressInterval for a progress notice on
// the watch (one arrives only when the watch is connected and current),
// and reads etcd's revision to notice a history that went back.
func (s *Etcd) askProgress(ctx context.Context) {
	t := time.NewTicker(s.cfg.ProgressInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = s.cli.RequestProgress(ctx)
			// etcd sends no progress to a watch from a revision it has
			// not reached: a history that went back (a restore, a new
			// cluster) shows in a read's revision instead.
			rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
			if resp, err := s.cli.Get(rctx, s.cfg.Prefix+"manuals/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err == nil {
				s.rewind(resp.Header.Revision)
			}
			cancel()
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// moved records that everything up to rev is applied; synced says that
// etcd confirmed nothing newer exists.
func (s *Etcd) moved(rev int64, synced bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if synced {
		s.synced = time.Now()
	}
	if rev > s.rev {
		s.rev = rev
		close(s.advance)
		s.advance = make(chan struct{})
	}
}

// put applies a stored manual. One that cannot be applied (a name the
// operator holds here, a bound, a variable this replica does not bind)
// leaves the registry as it was, is logged and counted, and is the
// writer's error when this replica wrote it.
func (s *Etcd) put(ctx context.Context, name string, kv *mvccpb.KeyValue, live bool) {
	err := s.apply(ctx, name, kv.Value, live)
	s.mu.Lock()
	defer s.mu.Unlock()
	outcome := "ok"
	if err != nil {
		outcome = "error"
		now := time.Now()
		for rev, f := range s.failed {
			if now.Sub(f.at) > failedFor {
				delete(s.failed, rev)
			}
		}
		s.failed[kv.ModRevision] = applyFailure{err: err, at: now}
		s.unapplied[name] = kv
		s.log.Error("tool registry store: cannot apply a shared manual", "manual", name, "revision", kv.ModRevision, "error", err)
	} else {
		s.shared[name] = kv.ModRevision
		delete(s.unapplied, name)
	}
	s.metrics.applies.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome)))
}

func (s *Etcd) apply(ctx context.Context, name string, value []byte, live bool) error {
	if s.operator[name] {
		return fmt.Errorf("the operator loaded a manual named %q on this replica", name)
	}
	if name != utcp.SanitizeManualName(name) {
		return fmt.Errorf("%q is not a manual name", name)
	}
	rec, err := decodeRecord(value)
	if err != nil {
		return fmt.Errorf("unreadable record: %w", err)
	}
	m, err := manual.Parse(rec.Manual)
	if err != nil {
		return err
	}
	if _, err := s.reg.Replace(ctx, name, utcp.FromManual(m)); err != nil {
		return err
	}
	if live && !rec.Written.IsZero() {
		s.metrics.propagation.Record(ctx, max(0, time.Since(rec.Written).Seconds()))
	}
	return nil
}

// remove removes a shared manual that the store no longer has.
func (s *Etcd) remove(name string, rev int64) {
	s.mu.Lock()
	_, ours := s.shared[name]
	delete(s.shared, name)
	delete(s.unapplied, name)
	var retry []*mvccpb.KeyValue
	for _, kv := range s.unapplied {
		retry = append(retry, kv)
	}
	s.mu.Unlock()
	if !ours {
		return
	}
	if _, err := s.reg.Remove(name); err != nil {
		s.log.Error("tool registry store: cannot remove a shared manual", "manual", name, "revision", rev, "error", err)
		return
	}
	// The removal may have made room under the registry's bounds for a
	// manual that could not be applied.
	prefix := s.cfg.Prefix + "manuals/"
	for _, kv := range retry {
		s.put(context.Background(), strings.TrimPrefix(string(kv.Key), prefix), kv, false)
	}
}

// etcdMetrics are the store's instruments; Prometheus shows them as
// exprd_registry_*.
type etcdMetrics struct {
	applies     metric.Int64Counter
	reloads     metric.Int64Counter
	propagation metric.Float64Histogram
}

func newEtcdMetrics(mp metric.MeterProvider) (etcdMetrics, error) {
	m := mp.Meter("github.com/exprd/exprd/toolstore")
	var out etcdMetrics
	var err error
	if out.applies, err = m.Int64Counter("exprd.registry.applies", metric.WithDescription("Shared manuals applied from the store, by outcome.")); err != nil {
		return out, err
	}
	if out.reloads, err = m.Int64Counter("exprd.registry.snapshot_reloads", metric.WithDescription("Snapshots reloaded after a watch could not resume.")); err != nil {
		return out, err
	}
	if out.propagation, err = m.Float64Histogram("exprd.registry.propagation", metric.WithUnit("s"),
		metric.WithDescription("From a manual's write on one replica to its application on this one (by the two clocks)."),
		metric.WithExplicitBucketBoundaries(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)); err != nil {
		return out, err
	}
	return out, err
}
