package toolstore

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"

	"github.com/exprd/exprd/internal/egress"
	"github.com/exprd/exprd/internal/testkit/etcdproc"
	"github.com/exprd/exprd/internal/testkit/tcpcut"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/manual"
	"github.com/exprd/exprd/utcp/utcpall"
)

// TestMain runs the tests against a real etcd (etcdproc builds it from
// the cluster module), removes it, and fails the package when a store
// left a goroutine behind once closed.
func TestMain(m *testing.M) {
	code := etcdproc.Run(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// repoDir is the repository's root, where etcdproc finds the cluster
// module.
const repoDir = ".."

// Of the stores under test: a short timeout, so that an unreachable etcd
// answers quickly, and frequent progress notices.
const (
	testTimeout  = time.Second
	testProgress = 100 * time.Millisecond
)

// manualJSON is a manual with one http tool of each name (never called).
func manualJSON(tools ...string) string {
	var ts []any
	for _, name := range tools {
		ts = append(ts, map[string]any{"name": name, "description": "test tool " + name,
			"tool_call_template": map[string]any{"call_template_type": "http", "url": "http://127.0.0.1:1/" + name}})
	}
	raw, _ := json.Marshal(map[string]any{"utcp_version": "1.1.0", "manual_version": "1.0.0", "tools": ts})
	return string(raw)
}

// source is manualJSON as the API's inline manual_json is registered.
func source(tools ...string) utcp.Source {
	return utcp.FromText(manualJSON(tools...)).AllowProtocols(utcp.TypeHTTP)
}

// replica is a registry and the store in front of it, as one exprd holds
// them, with the store's metrics.
type replica struct {
	reg     *utcp.Registry
	store   *Etcd
	metrics *sdkmetric.ManualReader
}

// newRegistry is a registry with every part, holding an operator's
// manual of one tool per name in operator; closed when t ends.
func newRegistry(t *testing.T, operator []string, opts ...utcp.Option) *utcp.Registry {
	t.Helper()
	reg, err := utcpall.New(append([]utcp.Option{utcp.WithEgress(egress.MustParse("loopback"))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	for _, name := range operator {
		if _, err := reg.Register(context.Background(), name, source("operator_tool")); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

// openReplica opens a store over reg on etcd at endpoint under prefix;
// closed when t ends.
func openReplica(t *testing.T, reg *utcp.Registry, endpoint, prefix string) *replica {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	metrics := sdkmetric.NewManualReader()
	store, err := OpenEtcd(ctx, reg, EtcdConfig{Endpoints: []string{endpoint}, Prefix: prefix, Timeout: testTimeout,
		ProgressInterval: testProgress, Meter: sdkmetric.NewMeterProvider(sdkmetric.WithReader(metrics))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := store.Close(); err != nil {
			t.Error(err)
		}
	})
	return &replica{reg: reg, store: store, metrics: metrics}
}

// tools are the replica's tools of one manual (nil: no such manual).
func (r *replica) tools(manual string) []string {
	if m, ok := r.reg.Manual(manual); ok {
		return m.Tools
	}
	return nil
}

// count is a counter of the store's, summed over the points whose
// outcome is outcome ("": every point).
func (r *replica) count(t *testing.T, name, outcome string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.metrics.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if m.Name != name || !ok {
				continue
			}
			for _, p := range sum.DataPoints {
				if v, _ := p.Attributes.Value(attribute.Key("outcome")); outcome == "" || v.AsString() == outcome {
					n += p.Value
				}
			}
		}
	}
	return n
}

// eventually polls cond until it holds, for up to 20 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 20 s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// revision is etcd's revision now.
func revision(t *testing.T, cli *clientv3.Client) int64 {
	t.Helper()
	resp, err := cli.Get(context.Background(), "revision-probe")
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// storedTools are the tools of the record stored under name (nil: no
// key); a record that does not decode fails the test.
func storedTools(t *testing.T, cli *clientv3.Client, prefix, name string) []string {
	t.Helper()
	resp, err := cli.Get(context.Background(), prefix+"manuals/"+name)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return nil
	}
	rec, err := decodeRecord(resp.Kvs[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	m, err := manual.Parse(rec.Manual)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tool := range m.Tools {
		out = append(out, tool.Name)
	}
	return out
}

// putRecord stores a manual as another writer would, at key.
func putRecord(ctx context.Context, cli *clientv3.Client, key, manual string) (int64, error) {
	value, err := encodeRecord(&record{Manual: json.RawMessage(manual), Written: time.Now().UTC(), Writer: "another"})
	if err != nil {
		return 0, err
	}
	resp, err := cli.Put(ctx, key, string(value))
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// TestEtcdUndo: a write that this replica cannot apply is undone in etcd
// (the key deleted, or the record it replaced put back), and a write
// refused before it reaches etcd (a name taken, a bound, the record
// limit, an unknown manual) writes nothing. A holds an operator's manual
// "op" and at most four tools; B holds nothing of its own.
func TestEtcdUndo(t *testing.T) {
	t.Parallel()
	etcd := etcdproc.Start(t, repoDir)
	cli := etcd.Client(t)
	type env struct {
		a, b   *replica
		prefix string
	}
	huge := make([]byte, MaxRecordBytes*2)
	if _, err := rand.Read(huge); err != nil {
		t.Fatal(err)
	}
	var theirs time.Time // when B's record of "op" was written
	for i, tc := range []struct {
		name  string
		setup func(t *testing.T, e *env)
		write func(ctx context.Context, e *env) error
		is    error  // what the write's error is (errors.Is), or nil
		says  string // what it says
		// written: etcd's revision moved (a write and its undo).
		written bool
		after   func(t *testing.T, e *env)
	}{{
		name: "a replace of a name the operator holds here is undone: no record left",
		write: func(ctx context.Context, e *env) error {
			_, err := e.a.store.Register(ctx, "op", source("mine"), true)
			return err
		},
		says:    `the operator loaded a manual named "op"`,
		written: true,
		after: func(t *testing.T, e *env) {
			if got := storedTools(t, cli, e.prefix, "op"); got != nil {
				t.Errorf("etcd holds %v under op, want no key", got)
			}
			eventually(t, "B lists op after its undo", func() bool { return e.b.tools("op") == nil })
		},
	}, {
		name: "a replace of a name the operator holds here puts back the record it replaced",
		setup: func(t *testing.T, e *env) {
			if _, err := e.b.store.Register(context.Background(), "op", source("theirs"), false); err != nil {
				t.Fatal(err)
			}
			theirs = time.Now()
		},
		write: func(ctx context.Context, e *env) error {
			_, err := e.a.store.Register(ctx, "op", source("mine"), true)
			return err
		},
		says:    `the operator loaded a manual named "op"`,
		written: true,
		after: func(t *testing.T, e *env) {
			if got, want := storedTools(t, cli, e.prefix, "op"), []string{"theirs"}; !slices.Equal(got, want) {
				t.Errorf("etcd holds %v under op, want B's %v", got, want)
			}
			resp, err := cli.Get(context.Background(), e.prefix+"manuals/op")
			if err != nil {
				t.Fatal(err)
			}
			// Restamped: replicas do not count the old record's age as
			// propagation.
			if rec, err := decodeRecord(resp.Kvs[0].Value); err != nil || !rec.Written.After(theirs) {
				t.Errorf("the record put back was written at %v (%v), want after B's write at %v", rec.Written, err, theirs)
			}
			eventually(t, "B serves its own op again", func() bool { return slices.Equal(e.b.tools("op"), []string{"op.theirs"}) })
		},
	}, {
		name: "a name taken in etcd, by a record this replica could not apply: refused by the compare",
		setup: func(t *testing.T, e *env) {
			resp, err := cli.Put(context.Background(), e.prefix+"manuals/taken", "not gzip")
			if err != nil {
				t.Fatal(err)
			}
			eventually(t, "A applies up to the garbled record", func() bool { return e.a.store.Status().Revision >= resp.Header.Revision })
		},
		write: func(ctx context.Context, e *env) error {
			_, err := e.a.store.Register(ctx, "taken", source("x"), false)
			return err
		},
		is: utcp.ErrAlreadyExists,
	}, {
		name: "a name this replica serves, without replace",
		setup: func(t *testing.T, e *env) {
			if _, err := e.b.store.Register(context.Background(), "held", source("x"), false); err != nil {
				t.Fatal(err)
			}
			eventually(t, "A serves held", func() bool { return e.a.tools("held") != nil })
		},
		write: func(ctx context.Context, e *env) error {
			_, err := e.a.store.Register(ctx, "held", source("y"), false)
			return err
		},
		is: utcp.ErrAlreadyExists,
		after: func(t *testing.T, e *env) {
			if got, want := e.a.tools("held"), []string{"held.x"}; !slices.Equal(got, want) {
				t.Errorf("A serves %v, want %v", got, want)
			}
		},
	}, {
		name: "past the registry's bound on tools",
		write: func(ctx context.Context, e *env) error {
			_, err := e.a.store.Register(ctx, "many", source("t1", "t2", "t3", "t4"), false)
			return err
		},
		is: utcp.ErrLimit,
	}, {
		name: "past the store's record limit",
		write: func(ctx context.Context, e *env) error {
			var m map[string]any
			if err := json.Unmarshal([]byte(manualJSON("big")), &m); err != nil {
				return err
			}
			m["tools"].([]any)[0].(map[string]any)["description"] = base64.StdEncoding.EncodeToString(huge)[:MaxRecordBytes*3/2]
			raw, err := json.Marshal(m)
			if err != nil {
				return err
			}
			_, err = e.b.store.Register(ctx, "big", utcp.FromText(string(raw)).AllowProtocols(utcp.TypeHTTP), false)
			return err
		},
		is:   utcp.ErrLimit,
		says: "manual_bytes",
	}, {
		name:  "a removal of a manual etcd does not hold",
		write: func(ctx context.Context, e *env) error { _, err := e.b.store.Remove(ctx, "nothing"); return err },
		is:    utcp.ErrNotFound,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			e := &env{prefix: fmt.Sprintf("/undo/%d/", i)}
			e.a = openReplica(t, newRegistry(t, []string{"op"}, utcp.WithMaxTools(4)), etcd.Endpoint(), e.prefix)
			e.b = openReplica(t, newRegistry(t, nil), etcd.Endpoint(), e.prefix)
			if tc.setup != nil {
				tc.setup(t, e)
			}
			before := revision(t, cli)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := tc.write(ctx, e)
			if err == nil || (tc.is != nil && !errors.Is(err, tc.is)) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v, want an error that is %v and says %q", err, tc.is, tc.says)
			}
			if moved := revision(t, cli) != before; moved != tc.written {
				t.Errorf("etcd's revision moved: %v, want %v", moved, tc.written)
			}
			now := revision(t, cli)
			for _, r := range []*replica{e.a, e.b} {
				eventually(t, "a replica passes every write", func() bool { return r.store.Status().Revision >= now })
			}
			// The operator's manual is A's whatever was written.
			if got, want := e.a.tools("op"), []string{"op.operator_tool"}; !slices.Equal(got, want) {
				t.Errorf("A's op: %v, want the operator's %v", got, want)
			}
			if tc.after != nil {
				tc.after(t, e)
			}
		})
	}
}

// TestEtcdRevisions: each change to the shared manuals, by this store, by
// another replica's or by another client of etcd, reaches both replicas
// (A and B), and each replica's revision reaches the change's: at once on
// the replica that wrote it, which answers only once it serves it. A
// record no replica can apply is skipped, counted, and passed.
func TestEtcdRevisions(t *testing.T) {
	t.Parallel()
	etcd := etcdproc.Start(t, repoDir)
	cli := etcd.Client(t)
	const prefix = "/revisions/"
	a := openReplica(t, newRegistry(t, nil), etcd.Endpoint(), prefix)
	b := openReplica(t, newRegistry(t, nil), etcd.Endpoint(), prefix)
	register := func(r *replica, name string, replace bool, tools ...string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := r.store.Register(ctx, name, source(tools...), replace)
			return err
		}
	}
	remove := func(r *replica, name string) func(context.Context) error {
		return func(ctx context.Context) error { _, err := r.store.Remove(ctx, name); return err }
	}
	put := func(key, value string) func(context.Context) error {
		return func(ctx context.Context) error { _, err := cli.Put(ctx, key, value); return err }
	}
	for _, tc := range []struct {
		name   string
		write  func(context.Context) error
		by     *replica // the replica that wrote, nil: another client
		manual string
		want   []string // tools of manual on every replica after
		failed int64    // applies each replica counts as failed
	}{
		{"A registers", register(a, "calc", false, "add"), a, "calc", []string{"calc.add"}, 0},
		{"B replaces", register(b, "calc", true, "add", "sum"), b, "calc", []string{"calc.add", "calc.sum"}, 0},
		{"A replaces", register(a, "calc", true, "sum"), a, "calc", []string{"calc.sum"}, 0},
		{"B removes", remove(b, "calc"), b, "calc", nil, 0},
		{"another client puts a record", func(ctx context.Context) error {
			_, err := putRecord(ctx, cli, prefix+"manuals/other", manualJSON("mul"))
			return err
		}, nil, "other", []string{"other.mul"}, 0},
		{"A removes it", remove(a, "other"), a, "other", nil, 0},
		{"another client puts a record no replica can read", put(prefix+"manuals/garbled", "not gzip"), nil, "garbled", nil, 1},
		{"another client puts a record under a name no manual has", func(ctx context.Context) error {
			_, err := putRecord(ctx, cli, prefix+"manuals/Not-A-Name", manualJSON("x"))
			return err
		}, nil, "Not-A-Name", nil, 1},
		// A removal tries again every record the replica could not
		// apply (it may have made room): the two above fail again.
		{"another client deletes a record", func(ctx context.Context) error {
			if _, err := putRecord(ctx, cli, prefix+"manuals/brief", manualJSON("x")); err != nil {
				return err
			}
			_, err := cli.Delete(ctx, prefix+"manuals/brief")
			return err
		}, nil, "brief", nil, 2},
		// The watch sees no event of it; etcd's progress notices move
		// the revision past it.
		{"another client writes beside the prefix", put("/elsewhere/manuals/calc", "x"), nil, "calc", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			failed := map[*replica]int64{a: a.count(t, "exprd.registry.applies", "error"), b: b.count(t, "exprd.registry.applies", "error")}
			if err := tc.write(ctx); err != nil {
				t.Fatal(err)
			}
			rev := revision(t, cli)
			if r := tc.by; r != nil {
				if got := r.tools(tc.manual); !slices.Equal(got, tc.want) {
					t.Errorf("the writer serves %v once the write returned, want %v", got, tc.want)
				}
				if got := r.store.Status().Revision; got != rev {
					t.Errorf("the writer's revision once the write returned: %d, want %d", got, rev)
				}
			}
			for _, r := range []*replica{a, b} {
				eventually(t, fmt.Sprintf("a replica serves %v of %s at revision %d", tc.want, tc.manual, rev), func() bool {
					return slices.Equal(r.tools(tc.manual), tc.want) && r.store.Status().Revision >= rev
				})
				if got := r.count(t, "exprd.registry.applies", "error") - failed[r]; got != tc.failed {
					t.Errorf("a replica counted %d failed applies, want %d", got, tc.failed)
				}
			}
		})
	}

	t.Run("of registrations of one name at once, one wins", func(t *testing.T) {
		all := []*replica{a, b, openReplica(t, newRegistry(t, nil), etcd.Endpoint(), prefix)}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for round := range 5 {
			name := fmt.Sprintf("race%d", round)
			errs := make([]error, len(all))
			var wg sync.WaitGroup
			for i, r := range all {
				wg.Go(func() { _, errs[i] = r.store.Register(ctx, name, source(fmt.Sprintf("from_%d", i)), false) })
			}
			wg.Wait()
			winner := -1
			for i, err := range errs {
				switch {
				case err == nil && winner >= 0:
					t.Fatalf("%s: both replica %d and %d registered it", name, winner, i)
				case err == nil:
					winner = i
				case !errors.Is(err, utcp.ErrAlreadyExists):
					t.Fatalf("%s on replica %d: got %v, want nil or ErrAlreadyExists", name, i, err)
				}
			}
			if winner < 0 {
				t.Fatalf("%s: no registration won", name)
			}
			want := []string{fmt.Sprintf("%s.from_%d", name, winner)}
			for _, r := range all {
				eventually(t, fmt.Sprintf("every replica serves %v", want), func() bool { return slices.Equal(r.tools(name), want) })
			}
		}
	})

	t.Run("Synced moves with etcd's progress notices", func(t *testing.T) {
		for _, r := range []*replica{a, b} {
			from := r.store.Status().Synced
			eventually(t, "Synced moves", func() bool { return r.store.Status().Synced.After(from) })
			if st := r.store.Status(); st.Store != "etcd" || st.Staleness(time.Now()) > 10*testProgress {
				t.Errorf("status %+v: %v stale, want etcd, under %v", st, st.Staleness(time.Now()), 10*testProgress)
			}
		}
	})
}

// TestEtcdReload: a store opened over what others wrote loads it whole,
// at one revision, in pages; a shared manual it cannot apply is left (the
// operator's own kept), and applied once a removal makes room; a watch
// that cannot resume, its revisions compacted away while the store could
// not reach etcd, reloads a snapshot.
func TestEtcdReload(t *testing.T) {
	t.Parallel()
	etcd := etcdproc.Start(t, repoDir)
	cli := etcd.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("a second store loads what the first wrote, in pages", func(t *testing.T) {
		const prefix = "/reload/pages/"
		a := openReplica(t, newRegistry(t, nil), etcd.Endpoint(), prefix)
		var want []string
		for i := range snapshotPage + 1 {
			name := fmt.Sprintf("page%02d", i)
			if _, err := a.store.Register(ctx, name, source("add"), false); err != nil {
				t.Fatal(err)
			}
			want = append(want, name)
		}
		for _, tt := range []struct {
			name, prefix string
			want         []string
		}{{"the same prefix", prefix, want}, {"another prefix", "/reload/other/", nil}} {
			t.Run(tt.name, func(t *testing.T) {
				b := openReplica(t, newRegistry(t, nil), etcd.Endpoint(), tt.prefix)
				// Loaded before OpenEtcd returned: no wait.
				if got := b.reg.Manuals(); !slices.Equal(got, tt.want) {
					t.Errorf("B opened with %v, want %v", got, tt.want)
				}
				if got, want := b.store.Status().Revision, revision(t, cli); got != want {
					t.Errorf("B opened at revision %d, want etcd's %d", got, want)
				}
			})
		}
	})

	t.Run("a shared manual of the operator's name is left; the operator's is kept", func(t *testing.T) {
		const prefix = "/reload/operator/"
		a := openReplica(t, newRegistry(t, nil), etcd.Endpoint(), prefix)
		for _, name := range []string{"op", "calc"} {
			if _, err := a.store.Register(ctx, name, source("shared"), false); err != nil {
				t.Fatal(err)
			}
		}
		b := openReplica(t, newRegistry(t, []string{"op"}), etcd.Endpoint(), prefix)
		if got, want := b.tools("op"), []string{"op.operator_tool"}; !slices.Equal(got, want) {
			t.Errorf("B's op: %v, want the operator's %v", got, want)
		}
		if got, want := b.tools("calc"), []string{"calc.shared"}; !slices.Equal(got, want) {
			t.Errorf("B's calc: %v, want %v", got, want)
		}
		if !b.store.Operator("op") || b.store.Operator("calc") {
			t.Errorf("B says op is the operator's: %v, calc: %v; want true, false", b.store.Operator("op"), b.store.Operator("calc"))
		}
		if got := b.count(t, "exprd.registry.applies", "error"); got != 1 {
			t.Errorf("B counted %d failed applies, want 1", got)
		}
	})

	t.Run("a manual past this replica's bound is applied once a removal makes room", func(t *testing.T) {
		const prefix = "/reload/room/"
		a := openReplica(t, newRegistry(t, nil), etcd.Endpoint(), prefix)
		if _, err := a.store.Register(ctx, "first", source("add"), false); err != nil {
			t.Fatal(err)
		}
		b := openReplica(t, newRegistry(t, nil, utcp.WithMaxManuals(1)), etcd.Endpoint(), prefix)
		if _, err := a.store.Register(ctx, "second", source("add"), false); err != nil {
			t.Fatal(err)
		}
		eventually(t, "B passes the second manual", func() bool { return b.store.Status().Revision >= a.store.Status().Revision })
		if got := b.reg.Manuals(); !slices.Equal(got, []string{"first"}) {
			t.Fatalf("B holds %v, want [first] (its bound is one manual)", got)
		}
		if _, err := a.store.Remove(ctx, "first"); err != nil {
			t.Fatal(err)
		}
		eventually(t, "B holds only the second manual", func() bool { return slices.Equal(b.reg.Manuals(), []string{"second"}) })
	})

	t.Run("a watch compacted away reloads a snapshot", func(t *testing.T) {
		const prefix = "/reload/compacted/"
		proxy, err := tcpcut.Start(etcd.Endpoint())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(proxy.Close)
		a := openReplica(t, newRegistry(t, nil), proxy.Addr(), prefix)
		b := openReplica(t, newRegistry(t, nil), etcd.Endpoint(), prefix)
		if _, err := b.store.Register(ctx, "gone", source("add"), false); err != nil {
			t.Fatal(err)
		}
		eventually(t, "A serves gone", func() bool { return a.tools("gone") != nil })
		// A cannot reach etcd while B changes the manuals and etcd
		// compacts its history past them: A's watch cannot resume.
		proxy.Refuse(true)
		if _, err := b.store.Remove(ctx, "gone"); err != nil {
			t.Fatal(err)
		}
		if _, err := b.store.Register(ctx, "new", source("add"), false); err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Compact(ctx, revision(t, cli), clientv3.WithCompactPhysical()); err != nil {
			t.Fatal(err)
		}
		if got := a.count(t, "exprd.registry.snapshot_reloads", ""); got != 0 {
			t.Fatalf("A reloaded %d snapshots before it could reach etcd again", got)
		}
		proxy.Refuse(false)
		// The reload is counted once its snapshot is applied.
		eventually(t, "A reloads a snapshot: new and not gone", func() bool {
			return a.tools("new") != nil && a.tools("gone") == nil && a.count(t, "exprd.registry.snapshot_reloads", "") > 0
		})
		if got := a.count(t, "exprd.registry.snapshot_reloads", ""); got != 1 {
			t.Errorf("A reloaded %d snapshots, want 1", got)
		}
	})

	t.Run("no etcd: OpenEtcd fails when its context ends", func(t *testing.T) {
		octx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := OpenEtcd(octx, newRegistry(t, nil), EtcdConfig{Endpoints: []string{"127.0.0.1:1"}, Timeout: 200 * time.Millisecond})
		if err == nil || !strings.Contains(err.Error(), "reading the shared manuals from etcd 127.0.0.1:1") {
			t.Errorf("got %v, want it to say it could not read the shared manuals", err)
		}
	})
}

// TestEtcdRestart: with etcd stopped or killed, a replica serves what it
// has, its writes are ErrUnavailable (and write nothing) and its Status
// grows stale; once etcd is back, writes work again and every replica
// converges. An etcd restarted empty (a history that went back) is
// followed from its snapshot.
func TestEtcdRestart(t *testing.T) {
	t.Parallel()
	etcd := etcdproc.Start(t, repoDir)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// writeOnceBack retries a write until etcd answers it.
	writeOnceBack := func(t *testing.T, write func() error) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := write()
			if err == nil {
				return
			}
			if !errors.Is(err, ErrUnavailable) || time.Now().After(deadline) {
				t.Fatalf("a write once etcd is back: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// sharing is two replicas under prefix, both serving manual, which A
	// registered.
	sharing := func(t *testing.T, prefix, manual string) (a, b *replica) {
		t.Helper()
		a = openReplica(t, newRegistry(t, nil), etcd.Endpoint(), prefix)
		b = openReplica(t, newRegistry(t, nil), etcd.Endpoint(), prefix)
		if _, err := a.store.Register(ctx, manual, source("add"), false); err != nil {
			t.Fatal(err)
		}
		eventually(t, "B serves "+manual, func() bool { return b.tools(manual) != nil })
		return a, b
	}
	for i, tc := range []struct {
		name string
		down func() error
	}{{"stopped (SIGTERM)", etcd.Stop}, {"killed (SIGKILL)", etcd.Kill}} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := sharing(t, fmt.Sprintf("/restart/%d/", i), "before")
			if err := tc.down(); err != nil {
				t.Fatal(err)
			}
			if _, err := a.store.Register(ctx, "while_down", source("add"), false); !errors.Is(err, ErrUnavailable) {
				t.Errorf("a register with etcd down: got %v, want ErrUnavailable", err)
			}
			if _, err := b.store.Remove(ctx, "before"); !errors.Is(err, ErrUnavailable) {
				t.Errorf("a remove with etcd down: got %v, want ErrUnavailable", err)
			}
			for _, r := range []*replica{a, b} {
				if got := r.tools("before"); got == nil {
					t.Error("a replica stopped serving a manual when etcd went down")
				}
				eventually(t, "a replica grows stale", func() bool { return r.store.Status().Staleness(time.Now()) > 5*testProgress })
			}

			if err := etcd.Start(); err != nil {
				t.Fatal(err)
			}
			writeOnceBack(t, func() error { _, err := a.store.Register(ctx, "after", source("add"), false); return err })
			writeOnceBack(t, func() error { _, err := b.store.Remove(ctx, "before"); return err })
			for _, r := range []*replica{a, b} {
				eventually(t, "a replica converges: after, no before, no while_down", func() bool {
					return slices.Equal(r.reg.Manuals(), []string{"after"})
				})
				eventually(t, "a replica is current again", func() bool { return r.store.Status().Staleness(time.Now()) < 5*testProgress })
			}
		})
	}

	t.Run("restarted empty: the replicas follow its new history", func(t *testing.T) {
		a, b := sharing(t, "/restart/wiped/", "old")
		if err := etcd.Wipe(); err != nil {
			t.Fatal(err)
		}
		// Its revision is back near 1, below what the replicas applied:
		// each reloads the (empty) snapshot rather than wait for
		// revisions that will never come.
		for _, r := range []*replica{a, b} {
			eventually(t, "a replica drops old", func() bool { return r.tools("old") == nil })
		}
		writeOnceBack(t, func() error { _, err := a.store.Register(ctx, "fresh", source("add"), false); return err })
		eventually(t, "B serves fresh", func() bool { return b.tools("fresh") != nil })
		if got, want := b.store.Status().Revision, a.store.Status().Revision; got != want {
			t.Errorf("B at revision %d, A at %d", got, want)
		}
		for _, r := range []*replica{a, b} {
			if got := r.count(t, "exprd.registry.snapshot_reloads", ""); got < 1 {
				t.Errorf("a replica reloaded %d snapshots, want at least 1", got)
			}
		}
	})
}
