package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/exprd/exprd/toolstore"
	"github.com/exprd/exprd/utcp"
)

// storeConfig is where the tool registry's API writes go (--registry-store).
type storeConfig struct {
	url          string
	prefix       string
	caFile       string
	certFile     string
	keyFile      string
	username     string
	passwordFile string
	timeout      time.Duration
	startTimeout time.Duration
}

func (s *storeConfig) flags(fs *flag.FlagSet) {
	fs.StringVar(&s.url, "registry-store", "memory", "where manuals registered over the API live: memory (this replica only) or etcd://host:2379[,host:2379...] (etcds:// for TLS), shared by every replica")
	fs.StringVar(&s.prefix, "registry-store-prefix", toolstore.DefaultPrefix, "the etcd key prefix of the shared registry (one per exprd deployment)")
	fs.StringVar(&s.caFile, "registry-store-ca-file", "", "verify etcd's certificate with this CA (PEM; implies TLS)")
	fs.StringVar(&s.certFile, "registry-store-cert-file", "", "a client certificate for etcd (PEM; with --registry-store-key-file)")
	fs.StringVar(&s.keyFile, "registry-store-key-file", "", "the client certificate's key (PEM)")
	fs.StringVar(&s.username, "registry-store-username", "", "etcd user (with --registry-store-password-file)")
	fs.StringVar(&s.passwordFile, "registry-store-password-file", "", "a file holding the etcd user's password (a mounted Secret)")
	fs.DurationVar(&s.timeout, "registry-store-timeout", toolstore.DefaultTimeout, "the deadline of one request to etcd; a write that cannot reach it in this time is UNAVAILABLE")
	fs.DurationVar(&s.startTimeout, "registry-store-start-timeout", 60*time.Second, "how long exprd waits at start for etcd's snapshot of the shared manuals before it gives up")
}

// endpoints parses --registry-store: nil for memory.
func (s *storeConfig) endpoints() (eps []string, useTLS bool, err error) {
	switch {
	case s.url == "memory" || s.url == "":
		return nil, false, nil
	case strings.HasPrefix(s.url, "etcd://"):
	case strings.HasPrefix(s.url, "etcds://"):
		useTLS = true
	default:
		return nil, false, fmt.Errorf("registry-store %q: want memory, etcd://host:port[,host:port...] or etcds://host:port[,...] for TLS", s.url)
	}
	_, list, _ := strings.Cut(s.url, "://")
	for _, hp := range strings.Split(list, ",") {
		host, port, err := net.SplitHostPort(strings.TrimSpace(hp))
		if err != nil || host == "" || port == "" {
			return nil, false, fmt.Errorf("registry-store %q: %q is not host:port", s.url, hp)
		}
		eps = append(eps, net.JoinHostPort(host, port))
	}
	return eps, useTLS || s.caFile != "" || s.certFile != "", nil
}

func (s *storeConfig) validate() error {
	eps, _, err := s.endpoints()
	if err != nil {
		return err
	}
	if eps == nil && (s.caFile != "" || s.certFile != "" || s.username != "") {
		return fmt.Errorf("registry-store-*: TLS and user settings need --registry-store etcd://host:port")
	}
	if (s.certFile == "") != (s.keyFile == "") {
		return fmt.Errorf("registry-store-cert-file and registry-store-key-file go together")
	}
	if (s.username == "") != (s.passwordFile == "") {
		return fmt.Errorf("registry-store-username and registry-store-password-file go together")
	}
	if s.timeout <= 0 || s.startTimeout <= 0 {
		return fmt.Errorf("registry-store-timeout %s, registry-store-start-timeout %s: want both positive", s.timeout, s.startTimeout)
	}
	return nil
}

// open opens the store over reg, whose manuals now are the operator's.
func (s *storeConfig) open(ctx context.Context, reg *utcp.Registry, log *slog.Logger) (toolstore.Store, error) {
	eps, useTLS, err := s.endpoints()
	if err != nil || eps == nil {
		return toolstore.NewLocal(reg), err
	}
	cfg := toolstore.EtcdConfig{Endpoints: eps, Prefix: s.prefix, Timeout: s.timeout, Logger: log, Meter: otel.GetMeterProvider(), Username: s.username}
	if useTLS {
		if cfg.TLS, err = s.tlsConfig(); err != nil {
			return nil, err
		}
	}
	if s.passwordFile != "" {
		pw, err := os.ReadFile(s.passwordFile)
		if err != nil {
			return nil, fmt.Errorf("registry-store-password-file: %w", err)
		}
		cfg.Password = strings.TrimRight(string(pw), "\r\n")
	}
	sctx, cancel := context.WithTimeout(ctx, s.startTimeout)
	defer cancel()
	st, err := toolstore.OpenEtcd(sctx, reg, cfg)
	if err != nil {
		return nil, err
	}
	log.Info("tool registry store", "store", "etcd", "endpoints", eps, "prefix", cfg.Prefix, "revision", st.Status().Revision)
	return st, nil
}

func (s *storeConfig) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.caFile != "" {
		pem, err := os.ReadFile(s.caFile)
		if err != nil {
			return nil, fmt.Errorf("registry-store-ca-file: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("registry-store-ca-file: no certificate in %s", s.caFile)
		}
	}
	if s.certFile != "" {
		cert, err := tls.LoadX509KeyPair(s.certFile, s.keyFile)
		if err != nil {
			return nil, fmt.Errorf("registry-store-cert-file, registry-store-key-file: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// readyz answers the metrics port's /readyz: 200 with what the replica's
// registry has applied and how stale it may be. It stays 200 while the
// store is unreachable: the replica serves its last snapshot, and the
// staleness says how old that is.
func readyz(st toolstore.Store) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		s := st.Status()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"ready": true,
			"registry": map[string]any{
				"store": s.Store, "revision": s.Revision, "synced": s.Synced.UTC().Format(time.RFC3339Nano),
				"staleness_seconds": s.Staleness(time.Now()).Seconds(),
			},
		})
	}
}
