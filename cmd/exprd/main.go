// Command exprd serves exprd's gRPC services.
//
// Every setting is a flag; a YAML file (--config) may set any of them by the
// flag's name, and the environment by EXPRD_<FLAG> with dashes as
// underscores (EXPRD_LISTEN=:50051). The command line wins over the
// environment, which wins over the file.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/exprd/exprd/internal/overload"
	"github.com/exprd/exprd/internal/procs"
	"github.com/exprd/exprd/membudget"
	"github.com/exprd/exprd/server"
	"github.com/exprd/exprd/server/auth"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "exprd:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	c, err := parseConfig(args, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return fmt.Errorf("log-level: %v", err)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if soft := setMemoryLimit("/sys/fs/cgroup", os.Getenv); soft > 0 {
		log.Info("memory limit from the cgroup", "gomemlimit_bytes", soft)
	}

	budget, from := memoryBudget(c.memoryBudget, "/sys/fs/cgroup", "/proc/meminfo")
	log.Info("memory budget", "bytes", budget, "from", from)
	c.memory = membudget.New(budget, c.memoryBudgetWait).LimitCallers(c.memoryCallerShare)
	if soft := setMemoryLimitFromLine(overload.LineFor(budget)); soft > 0 {
		log.Info("memory limit from the memory budget", "gomemlimit_bytes", soft)
	}
	ovl, err := c.overload.manager(c.memory, softMemoryLimit(), log)
	if err != nil {
		return fmt.Errorf("overload: %w", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	tel, err := startTelemetry(ctx, c.metricsListen, log)
	if err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	defer tel.stop(context.WithoutCancel(ctx))
	prof, err := c.pprof.start(log)
	if err != nil {
		return fmt.Errorf("debug-pprof-addr: %w", err)
	}
	defer prof.close()

	dm, err := startDemo(c)
	if err != nil {
		return err
	}
	defer dm.close()
	md, err := startModels(c, dm, log)
	if err != nil {
		return err
	}
	defer md.close()
	tl, err := startTools(ctx, c, dm, log)
	if err != nil {
		return err
	}
	defer tl.close()
	opts, err := c.serverOptions(log)
	if err != nil {
		return err
	}
	store, err := c.store.open(ctx, tl.reg, log)
	if err != nil {
		return err
	}
	defer func() { _ = store.Close() }()
	tel.handle("/readyz", readyz(store))
	opts = append(opts, dm.serverOptions(log)...)
	turns, err := c.turns.open(ctx, log, c.memory)
	if err != nil {
		return err
	}
	defer func() { _ = turns.Close() }()
	opts = append(opts, server.WithTurnStore(turns), server.WithTurnDetachedTimeout(c.turns.detachedTimeout), server.WithMaxTakeovers(c.turns.maxTakeovers), server.WithMaxTurnsPerCaller(c.turns.maxPerCaller))
	opts = append(opts, server.WithRegistry(tl.reg), server.WithToolStore(store), server.WithModels(md.reg), server.WithMemoryBudget(c.memory))
	if ovl != nil {
		opts = append(opts, server.WithOverload(ovl))
	}
	srv, err := server.New(opts...)
	if err != nil {
		return err
	}
	if c.adaptProcs {
		go procs.Run(ctx, log, c.procsPerCore)
	}
	if ovl != nil {
		go ovl.Run(ctx)
	}
	lis, err := net.Listen("tcp", c.listen)
	if err != nil {
		return err
	}
	mcpSrv, err := startMCP(c, tl.reg, srv, ovl, log)
	if err != nil {
		return err
	}
	defer mcpSrv.close()
	attrs := []any{"addr", lis.Addr().String(), "demo", c.demo, "tls", c.tlsCert != "", "auth", c.tokensFile != "" || os.Getenv("EXPRD_AUTH_TOKENS") != ""}
	if tel.addr != nil {
		attrs = append(attrs, "metrics", tel.addr.String())
	}
	log.Info("exprd serving", attrs...)

	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	log.Info("exprd draining", "timeout", c.drain.String())
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.drain)
	defer cancel()
	mcpDrained := mcpSrv.drain(dctx)
	srv.Shutdown(dctx)
	<-mcpDrained
	log.Info("exprd stopped")
	return <-served
}

// serverOptions turns the configuration into the server's options.
func (c config) serverOptions(log *slog.Logger) ([]server.Option, error) {
	opts := []server.Option{
		server.WithLogger(log),
		server.WithBudgets(c.budgets),
		server.WithCacheSize(c.cacheSize),
		server.WithMaxRunningPrograms(c.maxRunning),
		server.WithMaxCallsInFlight(c.maxCallsInFlight),
		server.WithMaxRecvMsgSize(c.maxRecvMsgSize),
		server.WithMaxStateBytes(c.maxStateBytes),
		server.WithMaxStreamsPerConn(c.maxStreamsPerConn),
		server.WithMaxSessions(c.maxSessions),
		server.WithRateLimit(c.ratePerSecond, c.rateBurst),
		server.WithMaxRateBuckets(c.rateCallers),
		server.WithFlowControlWindows(c.windowSize, c.connWindowSize),
		server.WithSlowReaderTimeout(c.slowReader),
		server.WithAgentLimits(c.runLimits.agent),
		server.WithCodeModeMaxTimeout(c.runLimits.codeModeTimeout),
		server.WithCodeModeCandidates(c.runLimits.codeModeCandidates),
		server.WithKeepalive(keepalive.ServerParameters{
			MaxConnectionAge: c.maxConnAge, MaxConnectionAgeGrace: c.maxConnAgeGrace,
			Time: server.DefaultKeepaliveTime, Timeout: server.DefaultKeepaliveTimeout,
		}, keepalive.EnforcementPolicy{MinTime: c.minPingInterval, PermitWithoutStream: true}),
	}
	proxies, err := c.proxies()
	if err != nil {
		return nil, fmt.Errorf("trusted-proxies: %w", err)
	}
	opts = append(opts, server.WithTrustedProxies(proxies...))
	opts = append(opts, c.connLimits.options(c.memory.Limit())...)
	tokens, err := c.tokens()
	if err != nil {
		return nil, err
	}
	if tokens != nil {
		opts = append(opts, server.WithAuth(*tokens))
	}
	if c.tlsCert != "" {
		creds, err := c.transportCredentials()
		if err != nil {
			return nil, err
		}
		opts = append(opts, server.WithTransportCredentials(creds))
	}
	if c.registryWritesWithoutAuth {
		opts = append(opts, server.WithRegistryWritesWithoutAuth())
	}
	return opts, nil
}

// tokens reads the bearer tokens from auth-tokens-file or EXPRD_AUTH_TOKENS;
// nil when neither is given (auth off).
func (c config) tokens() (*auth.Tokens, error) {
	var src *strings.Reader
	switch env := os.Getenv("EXPRD_AUTH_TOKENS"); {
	case c.tokensFile != "":
		data, err := os.ReadFile(c.tokensFile)
		if err != nil {
			return nil, fmt.Errorf("auth-tokens-file: %w", err)
		}
		src = strings.NewReader(string(data))
	case env != "":
		src = strings.NewReader(env)
	default:
		return nil, nil
	}
	t, err := auth.ParseTokens(src)
	if err != nil {
		return nil, fmt.Errorf("auth tokens: %w", err)
	}
	return &t, nil
}

// transportCredentials is TLS with the configured certificate, and mTLS
// (client certificates required and verified) when a client CA is given.
func (c config) transportCredentials() (credentials.TransportCredentials, error) {
	cert, err := tls.LoadX509KeyPair(c.tlsCert, c.tlsKey)
	if err != nil {
		return nil, fmt.Errorf("tls-cert, tls-key: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if c.tlsClientCA != "" {
		pem, err := os.ReadFile(c.tlsClientCA)
		if err != nil {
			return nil, fmt.Errorf("tls-client-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls-client-ca: no certificate in %s", c.tlsClientCA)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return credentials.NewTLS(cfg), nil
}
