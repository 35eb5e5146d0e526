package cluster_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exprd/exprd/cluster/etcdtest"
	"github.com/exprd/exprd/demo/providers"
	"github.com/exprd/exprd/internal/testkit/exprdproc"
)

// TestRegistryStoreOverTLSWithAuth: replicas reach an etcd that serves
// TLS only and requires a user, given the CA, the user and a password
// file (as a mounted Secret holds it, newline included), and share the
// registry through it; without the CA or with a wrong password exprd does
// not start, and says why.
func TestRegistryStoreOverTLSWithAuth(t *testing.T) {
	etcd := etcdtest.StartTLS(t)
	etcd.EnableAuth(t, "s3cret")
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "password"), filepath.Join(dir, "wrong")
	if err := os.WriteFile(good, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("guess\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	store := func(caFile, password string) []string {
		args := []string{"--registry-store", "etcds://" + etcd.Endpoint(), "--registry-store-username", "root",
			"--registry-store-password-file", password, "--registry-store-start-timeout", "3s"}
		if caFile != "" {
			args = append(args, "--registry-store-ca-file", caFile)
		}
		return args
	}

	math, err := providers.StartMath()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = math.Close() })
	a := startReplica(t, "A", etcd.Endpoint(), store(etcd.CAFile, good)...)
	b := startReplica(t, "B", etcd.Endpoint(), store(etcd.CAFile, good)...)
	ctx := context.Background()
	if _, err := register(ctx, a, "calc", mathManual(t, math, map[string]string{"add": "add"}), false); err != nil {
		t.Fatal(err)
	}
	b.waitTools(t, "calc", []string{"calc.add"})
	if got, err := b.add(ctx, "calc.add", 1, 2); err != nil || got != 3 {
		t.Fatalf("B: calc.add(1, 2) = %v, %v; want 3", got, err)
	}

	for _, tt := range []struct {
		name, want string
		args       []string
	}{
		{"no CA: etcd's certificate is not trusted", "connecting to etcd at " + etcd.Endpoint() + ` (TLS true, user "root")`, store("", good)},
		{"a wrong password", "authentication failed", store(etcd.CAFile, bad)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			log := &exprdproc.LogBuffer{}
			args := append([]string{"--registry-writes-without-auth"}, tt.args...)
			p, err := exprdproc.Start(exprdBin, log, args...)
			if err == nil {
				p.Stop()
				t.Fatal("exprd started")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want it to say %q", err, tt.want)
			}
		})
	}
}
