// Package etcdtest runs a real single-member etcd in the test's process
// (etcd's embed package), on loopback ports that stay the same across a
// Stop and a Start, so that clients reconnect to it. The root module's
// tests, which keep etcd's server out of their go.mod, run the same
// member as a process: cmd/etcdserver.
package etcdtest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/exprd/exprd/internal/testkit/testcert"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Etcd is an embedded etcd member.
type Etcd struct {
	dir                string
	clientURL, peerURL url.URL
	e                  *embed.Etcd
	// CAFile is the CA (PEM) of a member started with StartTLS.
	CAFile            string
	certFile, keyFile string
	user, password    string
}

// Start starts a member with its data in a directory of t's; it is stopped
// when t ends.
func Start(t testing.TB) *Etcd {
	t.Helper()
	return start(t, false)
}

// StartTLS is Start with clients served over TLS only, by a certificate
// for 127.0.0.1 that CAFile signed.
func StartTLS(t testing.TB) *Etcd {
	t.Helper()
	return start(t, true)
}

func start(t testing.TB, useTLS bool) *Etcd {
	dir := t.TempDir()
	e := New(filepath.Join(dir, "etcd"), freeAddr(t), freeAddr(t))
	if useTLS {
		e.clientURL.Scheme = "https"
		e.CAFile, e.certFile, e.keyFile = writeCerts(t, dir)
	}
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	return e
}

// New is a member, not started, with its data in dir, serving clients
// (plaintext) at clientAddr and its peer at peerAddr, both host:port.
func New(dir, clientAddr, peerAddr string) *Etcd {
	return &Etcd{dir: dir, clientURL: url.URL{Scheme: "http", Host: clientAddr}, peerURL: url.URL{Scheme: "http", Host: peerAddr}}
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
	if e.certFile != "" {
		cfg.ClientTLSInfo = transport.TLSInfo{CertFile: e.certFile, KeyFile: e.keyFile}
	}
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

// Client is a client of the member (as the user EnableAuth made, if it
// was called), closed when t ends.
func (e *Etcd) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	cfg := clientv3.Config{Endpoints: []string{e.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		Username: e.user, Password: e.password}
	if e.CAFile != "" {
		pem, err := os.ReadFile(e.CAFile)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		cfg.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	cli, err := clientv3.New(cfg)
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

// EnableAuth turns on etcd's authentication with one user, root, of that
// password: from then on every client must log in.
func (e *Etcd) EnableAuth(t testing.TB, password string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli := e.Client(t)
	if _, err := cli.UserAdd(ctx, "root", password); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
	e.user, e.password = "root", password
}

// writeCerts writes a CA and a certificate for 127.0.0.1 it signed, as
// PEM files in dir.
func writeCerts(t testing.TB, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	ca := testcert.NewCA(t, "etcdtest CA")
	caFile, _ = ca.WritePEM(t, dir, "ca")
	certFile, keyFile = ca.Issue(t, "127.0.0.1", "127.0.0.1").WritePEM(t, dir, "cert")
	return caFile, certFile, keyFile
}
