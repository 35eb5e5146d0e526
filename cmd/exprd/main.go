// Command exprd serves exprd's gRPC services.
//
// Flags may also be set from the environment as EXPRD_<FLAG> with dashes as
// underscores (EXPRD_LISTEN=:50051); a flag on the command line wins.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/exprd/exprd/evaluator"
	"github.com/exprd/exprd/examples"
	"github.com/exprd/exprd/server"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "exprd:", err)
		os.Exit(1)
	}
}

type config struct {
	listen       string
	demo         bool
	logLevel     string
	drain        time.Duration
	cacheSize    int
	callsPerSess int
	budgets      evaluator.Budgets
}

func parseFlags(args []string) (config, error) {
	c := config{budgets: evaluator.DefaultBudgets()}
	fs := flag.NewFlagSet("exprd", flag.ContinueOnError)
	fs.StringVar(&c.listen, "listen", ":50051", "address to serve gRPC on")
	fs.BoolVar(&c.demo, "demo", false, "start sessions from the demo products state and offer the demo functions")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.DurationVar(&c.drain, "drain-timeout", 10*time.Second, "on SIGTERM, how long open streams may go on before they are stopped")
	fs.IntVar(&c.cacheSize, "compile-cache-size", evaluator.DefaultCompileCacheSize, "compiled programs kept")
	fs.IntVar(&c.callsPerSess, "max-calls-in-flight", server.DefaultMaxCallsInFlight, "calls running at once on one stream")
	b := &c.budgets
	fs.DurationVar(&b.Timeout, "max-timeout", b.Timeout, "evaluation time per call")
	fs.Uint64Var(&b.MaxIterations, "max-iterations", b.MaxIterations, "predicate iterations per call")
	fs.Uint64Var(&b.MemoryBudget, "max-memory-budget", b.MemoryBudget, "expr VM memory budget per expression")
	fs.IntVar(&b.MaxSourceLength, "max-source-length", b.MaxSourceLength, "characters of one expression")
	fs.IntVar(&b.MaxNodes, "max-nodes", b.MaxNodes, "AST nodes of one expression")
	fs.IntVar(&b.MaxStringLength, "max-string-length", b.MaxStringLength, "characters of a string written or read")
	fs.IntVar(&b.MaxArrayLength, "max-array-length", b.MaxArrayLength, "items of an array written or read")
	fs.IntVar(&b.MaxReadChars, "max-read-chars", b.MaxReadChars, "characters of a read value's JSON")
	fs.DurationVar(&b.FunctionTimeout, "max-function-timeout", b.FunctionTimeout, "wait for a client-run function")
	fs.IntVar(&b.MaxSteps, "max-steps", b.MaxSteps, "steps of one call")
	fs.IntVar(&b.MaxValueBytes, "max-value-bytes", b.MaxValueBytes, "bytes of JSON of a value written, read or passed to a function")
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		key := "EXPRD_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(key); ok && envErr == nil {
			if err := f.Value.Set(v); err != nil {
				envErr = fmt.Errorf("%s=%q: %v", key, v, err)
			}
		}
	})
	if envErr != nil {
		return c, envErr
	}
	return c, fs.Parse(args)
}

func run(args []string) error {
	c, err := parseFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return fmt.Errorf("-log-level: %v", err)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	opts := []server.Option{
		server.WithLogger(log),
		server.WithBudgets(c.budgets),
		server.WithCacheSize(c.cacheSize),
		server.WithMaxCallsInFlight(c.callsPerSess),
	}
	if c.demo {
		opts = append(opts, server.WithInitialState(examples.Products), server.WithFunctions(demoFunctions(log)...))
	}
	srv, err := server.New(opts...)
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", c.listen)
	if err != nil {
		return err
	}
	log.Info("exprd serving", "addr", lis.Addr().String(), "demo", c.demo)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	log.Info("exprd draining", "timeout", c.drain)
	dctx, cancel := context.WithTimeout(context.Background(), c.drain)
	defer cancel()
	srv.Shutdown(dctx)
	log.Info("exprd stopped")
	return <-served
}
