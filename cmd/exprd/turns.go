package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/exprd/exprd/membudget"
	"github.com/exprd/exprd/server"
	"github.com/exprd/exprd/turnstore"
)

// turnsConfig is where AgentLoop turns are kept (--turn-store) and their
// limits.
type turnsConfig struct {
	store           string
	natsURL         string
	credsFile       string
	caFile          string
	certFile        string
	keyFile         string
	replicas        int
	limits          turnstore.Limits
	memoryBytes     int64
	detachedTimeout time.Duration
	lease           time.Duration
	maxTakeovers    int
	maxPerCaller    int
}

func (t *turnsConfig) flags(fs *flag.FlagSet) {
	fs.StringVar(&t.store, "turn-store", "memory", "where AgentLoop turns' events are kept for resume: memory (this replica only; a restart loses them) or nats (JetStream at --nats-url, shared by every replica)")
	fs.StringVar(&t.natsURL, "nats-url", "nats://127.0.0.1:4222", "the NATS servers of --turn-store nats: nats://host:4222[,nats://host:4222...] (tls:// for TLS)")
	fs.StringVar(&t.credsFile, "nats-creds-file", "", "a NATS credentials file (user JWT and nkey seed) as the operator issued it (a mounted Secret)")
	fs.StringVar(&t.caFile, "nats-ca-file", "", "verify the NATS servers' certificates with this CA (PEM)")
	fs.StringVar(&t.certFile, "nats-cert-file", "", "a client certificate for NATS (PEM; with --nats-key-file)")
	fs.StringVar(&t.keyFile, "nats-key-file", "", "the client certificate's key (PEM)")
	fs.IntVar(&t.replicas, "nats-replicas", 1, "the replicas of the turns' JetStream stream and bucket (1, 3 or 5)")
	fs.IntVar(&t.limits.MaxEvents, "turn-max-events", turnstore.DefaultMaxEvents, "the most events one turn records; one more ends the turn RESOURCE_EXHAUSTED (turn_max_events)")
	fs.Int64Var(&t.limits.MaxBytes, "turn-max-bytes", turnstore.DefaultMaxBytes, "the most bytes one turn's recorded events hold; past it the turn ends RESOURCE_EXHAUSTED (turn_max_bytes)")
	fs.DurationVar(&t.limits.Retention, "turn-retention", turnstore.DefaultRetention, "how long an ended turn can be resumed (replayed to its end)")
	fs.DurationVar(&t.limits.MaxAge, "turn-max-age", turnstore.DefaultMaxAge, "how long any turn is kept from its start, ended or not; at least --turn-retention, and more than --agent-max-turn-timeout")
	fs.Int64Var(&t.memoryBytes, "turn-store-memory-bytes", turnstore.DefaultMemoryBytes, "--turn-store memory: the most bytes of events it holds for all turns; ended turns are dropped first")
	fs.DurationVar(&t.detachedTimeout, "turn-detached-timeout", server.DefaultTurnDetachedTimeout, "how long a turn started with detach runs without a client")
	fs.DurationVar(&t.lease, "turn-lease", turnstore.DefaultLease, "--turn-store nats: how long a turn's lease lasts after its replica last renewed it (a third of it apart); a turn whose replica stopped is taken over by another within it")
	fs.IntVar(&t.maxPerCaller, "turn-max-per-caller", server.DefaultMaxTurnsPerCaller, "AgentLoop turns one caller (a token's name, or an address without auth) may have running on this replica at once, attached or detached; one more is refused RESOURCE_EXHAUSTED")
	fs.IntVar(&t.maxTakeovers, "turn-max-takeovers", server.DefaultMaxTakeovers, "--turn-store nats: how many times one turn may be taken over after its replica stopped; one more ends it (TURN_TAKEOVER_FAILED)")
}

func (t *turnsConfig) validate() error {
	if t.store != "memory" && t.store != "nats" {
		return fmt.Errorf("turn-store %q: want memory or nats", t.store)
	}
	if err := t.limits.Validate(); err != nil {
		return err
	}
	if t.memoryBytes <= 0 {
		return fmt.Errorf("turn-store-memory-bytes %d: want at least 1", t.memoryBytes)
	}
	if t.detachedTimeout <= 0 {
		return fmt.Errorf("turn-detached-timeout %s: want a positive duration", t.detachedTimeout)
	}
	if (t.certFile == "") != (t.keyFile == "") {
		return fmt.Errorf("nats-cert-file and nats-key-file go together")
	}
	if t.lease < time.Second {
		return fmt.Errorf("turn-lease %s: want at least 1s", t.lease)
	}
	if t.maxPerCaller < 1 {
		return fmt.Errorf("turn-max-per-caller %d: want at least 1", t.maxPerCaller)
	}
	if t.maxTakeovers < 1 {
		return fmt.Errorf("turn-max-takeovers %d: want at least 1", t.maxTakeovers)
	}
	if t.replicas < 1 {
		return fmt.Errorf("nats-replicas %d: want at least 1", t.replicas)
	}
	return nil
}

// open opens the turn store.
func (t *turnsConfig) open(ctx context.Context, log *slog.Logger, budget *membudget.Budget) (turnstore.Store, error) {
	if t.store == "memory" {
		return turnstore.NewMemory(turnstore.MemoryConfig{Limits: t.limits, MaxTotalBytes: t.memoryBytes, Budget: budget})
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err := turnstore.OpenNATS(sctx, turnstore.NATSConfig{URL: t.natsURL, CredsFile: t.credsFile, CAFile: t.caFile,
		CertFile: t.certFile, KeyFile: t.keyFile, Replicas: t.replicas, Limits: t.limits, Lease: t.lease})
	if err != nil {
		return nil, err
	}
	log.Info("turn store", "store", "nats", "url", t.natsURL, "lease", t.lease.String())
	return st, nil
}
