// Package etcdtest runs a real single-member etcd in the test's process
// (etcd's embed package), on loopback ports that stay the same across a
// Stop and a Start, so that clients reconnect to it.
package etcdtest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Etcd is an embedded etcd member.
type Etcd struct {
	dir                string
	clientURL, peerURL url.URL
	e                  *embed.Etcd
}

// Start starts a member with its data in a directory of t's; it is stopped
// when t ends.
func Start(t testing.TB) *Etcd {
	t.Helper()
	e := &Etcd{dir: filepath.Join(t.TempDir(), "etcd")}
	e.clientURL = url.URL{Scheme: "http", Host: freeAddr(t)}
	e.peerURL = url.URL{Scheme: "http", Host: freeAddr(t)}
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	return e
}

func freeAddr(t testing.TB) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	return lis.Addr().String()
}

// Endpoint is the client address, host:port.
func (e *Etcd) Endpoint() string { return e.clientURL.Host }

// Start starts the member (again, after Stop: same data, same ports).
func (e *Etcd) Start() error {
	cfg := embed.NewConfig()
	cfg.Name = "exprd-test"
	cfg.Dir = e.dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{e.clientURL}, []url.URL{e.clientURL}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{e.peerURL}, []url.URL{e.peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.UnsafeNoFsync = true // a test's data; fsync only slows it
	var err error
	// The ports were free a moment ago; after a Stop the kernel may hold
	// them for a moment more.
	for try := 0; try < 50; try++ {
		if e.e, err = embed.StartEtcd(cfg); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	select {
	case <-e.e.Server.ReadyNotify():
		return nil
	case <-time.After(30 * time.Second):
		e.e.Close()
		return fmt.Errorf("etcd did not become ready in 30 s")
	}
}

// Stop stops the member; Start starts it again. Stopping a stopped
// member does nothing.
func (e *Etcd) Stop() {
	if e.e != nil {
		e.e.Close()
		e.e = nil
	}
}

// Client is a client of the member, closed when t ends.
func (e *Etcd) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// Compact compacts the member's history up to its current revision, so
// that a watch from an older revision fails with ErrCompacted.
func (e *Etcd) Compact(ctx context.Context, cli *clientv3.Client) (int64, error) {
	resp, err := cli.Get(ctx, "compact-probe")
	if err != nil {
		return 0, err
	}
	rev := resp.Header.Revision
	_, err = cli.Compact(ctx, rev, clientv3.WithCompactPhysical())
	return rev, err
}
