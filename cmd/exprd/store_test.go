package main

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/exprd/exprd/toolstore"
	"github.com/exprd/exprd/utcp/utcpall"
)

// TestRegistryStoreFlags: each --registry-store setting that cannot work
// is refused at start, naming the flag.
func TestRegistryStoreFlags(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want string // "" for none
	}{
		{"the default", nil, ""},
		{"etcd, two members", []string{"--registry-store", "etcd://etcd-0.etcd:2379,etcd-1.etcd:2379"}, ""},
		{"etcd over TLS with a client certificate", []string{"--registry-store", "etcds://etcd:2379", "--registry-store-cert-file", "c.pem", "--registry-store-key-file", "k.pem"}, ""},
		{"an unknown scheme", []string{"--registry-store", "redis://r:6379"}, `registry-store "redis://r:6379": want memory, etcd://host:port[,host:port...] or etcds://host:port[,...] for TLS`},
		{"no port", []string{"--registry-store", "etcd://etcd"}, `registry-store "etcd://etcd": "etcd" is not host:port`},
		{"an empty member", []string{"--registry-store", "etcd://a:2379,"}, `registry-store "etcd://a:2379,": "" is not host:port`},
		{"TLS settings without etcd", []string{"--registry-store-ca-file", "ca.pem"}, "registry-store-*: TLS and user settings need --registry-store etcd://host:port"},
		{"a certificate without its key", []string{"--registry-store", "etcd://e:2379", "--registry-store-cert-file", "c.pem"}, "registry-store-cert-file and registry-store-key-file go together"},
		{"a user without a password", []string{"--registry-store", "etcd://e:2379", "--registry-store-username", "exprd"}, "registry-store-username and registry-store-password-file go together"},
		{"a zero timeout", []string{"--registry-store-timeout", "0s"}, "registry-store-timeout 0s, registry-store-start-timeout 1m0s: want both positive"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseConfig(tt.args, io.Discard)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestRegistryStoreUnreachable: an etcd that never answers (here a
// listener that is not etcd) makes start fail after
// --registry-store-start-timeout, naming the endpoints, rather than serve
// without the shared manuals.
func TestRegistryStoreUnreachable(t *testing.T) {
	notEtcd := httptest.NewServer(nil)
	defer notEtcd.Close()
	c, err := parseConfig([]string{"--registry-store", "etcd://" + notEtcd.Listener.Addr().String(),
		"--registry-store-start-timeout", "1500ms", "--registry-store-timeout", "500ms"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := utcpall.New()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	start := time.Now()
	_, err = c.store.open(context.Background(), reg, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "reading the shared manuals from etcd "+notEtcd.Listener.Addr().String()) {
		t.Fatalf("got %v, want an error naming the endpoint", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("gave up after %v, want about the 1.5 s start timeout", took)
	}
	st, err := (&storeConfig{url: "memory"}).open(context.Background(), reg, nil)
	if _, local := st.(*toolstore.Local); err != nil || !local {
		t.Errorf("memory: got %T, %v; want a *toolstore.Local", st, err)
	}
}
