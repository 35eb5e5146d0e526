// Command exprd-hostile is exprd's hostile-load run. exprd is a shared
// service: every client, model reply and tool provider may be hostile.
// The run starts a real exprd (the demo, egress to loopback, auth on with
// a token file of its own, --memory-budget 256 MiB and no GOMEMLIMIT:
// exprd sets the runtime's soft limit from its budget, 85% of the line
// of the budget and a quarter, 320 MiB, under which RSS must stay) with a
// loopback HTTP UTCP provider whose
// one tool answers 5 MiB, a hostile model server (--models-config) and a
// server of hostile OpenAPI documents; it measures a steady client's
// ExprTool Calls (from a process of its own) alone, then runs each hostile case for a few seconds
// while the steady client goes on, then all of them at once:
//
//  1. Session streams sending states past the containers bound, and legal
//     8 MB ones;
//  2. concurrent CodeMode Executes of the 5 MiB tool;
//  3. Session calls setting 40 KB, 20,001-segment addresses;
//  4. a flood of 10 MB SearchTools queries, half with 100 ms deadlines;
//  5. 100,000 distinct callers (loopback source addresses) without a
//     token;
//  6. Session streams that send calls writing megabytes and never read;
//  7. Session calls allocating until their time budget ends them;
//  8. before a token, over raw HTTP/2: (a) header blocks repeating a
//     large -bin field by its HPACK index, (b) 1,000 streams each sending
//     one window of a message they never finish, (c) gzip messages that
//     inflate to 16 MiB, (d) length prefixes claiming 16 MiB and then
//     nothing (with a token), while a legitimate caller sends 3 MB
//     states, (e) a rapid-reset flood, (f) 5,000 health Watch streams on
//     one connection;
//  9. CodeMode programs building 2 GB of strings;
//  10. ExprTool programs building 10 GB of strings, over Call and Session;
//  11. host functions: (a) a client-run function answered with 1 MB a
//     call, a thousand times, (b) a UTCP tool called a thousand times;
//  12. slow builtins (uniq, a pattern built at run time) under a 1 s
//     deadline;
//  13. a hostile model: (a) 600 calls of a missing tool a reply, (b) a
//     tool call at every step, never an answer;
//  14. hostile OpenAPI documents: (a) 100 operations sharing a schema of
//     3,000 $refs, (b) a chain of 3,000 of them.
//
// A phase passes only when exprd's peak resident set stays under the
// budget and a quarter; its CPU, from a second into the quiet period
// after, falls back to under a tenth of a core and every request was
// answered by its deadline; every request got a typed answer (a gRPC
// status other than UNKNOWN, a stream reset or a GOAWAY) and exprd did
// not crash; the steady client's p99 stays under a second (a p99 past a
// second is a core held past a deadline and a second); every answer of
// the well-behaved clients (the steady client, case 8d's legitimate
// caller) is right. Those are the bounds. The goal besides: the steady
// client's p99 within 5 times its quiet baseline's, which on two cores
// shared with the harness most cases do not meet yet. The run passes
// when every phase holds all six (report.go, verdict); with --bounds-only
// its exit status holds the bounds only, and its report still says FAIL
// when the goal fails.
//
//	make loadtest-hostile                        # about 5 minutes on 2 cores; writes BENCHMARKS.md's section
//	make loadtest-hostile HOSTILE_FLAGS="--short --bounds-only --cases 1,2,...,14"  # as CI runs it; prints only
//	bin/exprd-hostile --exprd bin/exprd --short --cases 8b,12   # some cases alone (a letter: one load of a case)
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == steadyClientCmd {
		if err := steadyClientMain(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "exprd-hostile:", err)
			os.Exit(2)
		}
		return
	}
	code, err := run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "exprd-hostile:", err)
		os.Exit(2)
	}
	os.Exit(code)
}

type config struct {
	exprd      string
	short      bool
	memLimit   string
	benchmarks string
	showLog    bool
	boundsOnly bool
	only       string

	baseline, caseDuration, callersDuration, mixDuration, quiet time.Duration
	deadline, steadyDeadline, slowDeadline, p99Limit            time.Duration

	memoryBudgetMiB, rssAbortMiB, p99Factor, quietCores, steadyRate float64

	stateStreams, codemodeCalls, deepStreams, searchClients int
	callers, callerConcurrency, silentStreams, silentCalls  int
	hostileStateBytes, legalStateBytes, searchBytes         int
	bigToolBytes, deepSegments, allocStreams                int

	// Case 8.
	streamWindow, hpackStreams, hpackBytes, windowStreams int
	gzipClients, gzipInflated, squatters, legitStateBytes int
	resetConns, resetsPerConn, healthStreams              int
	// Cases 9 to 14.
	codemodeStrings, exprtoolStrings, clientFnStreams, serverFnClients int
	slowClients, agentTurns, openAPIClients                            int
}

// lineMiB is the line a phase's peak VmRSS must stay under: the memory
// budget and a quarter, exprd's overload line.
func (c *config) lineMiB() float64 { return c.memoryBudgetMiB * 1.25 }

func parseFlags() *config {
	c := &config{}
	flag.StringVar(&c.exprd, "exprd", "bin/exprd", "the exprd binary to start")
	flag.BoolVar(&c.short, "short", false, "a short run: shorter phases, fewer clients and callers, under 60 s in all; never writes --benchmarks")
	flag.Float64Var(&c.memoryBudgetMiB, "memory-budget-mib", 256, "exprd's --memory-budget, in MiB; a phase's peak VmRSS must stay under it and a quarter")
	flag.StringVar(&c.memLimit, "gomemlimit", "", "GOMEMLIMIT exprd runs with (exprdproc passes this process's environment on); empty: none, and exprd sets the runtime's soft limit from its memory budget (85% of the budget and a quarter) as it does for an operator who sets neither it nor a cgroup limit. At the budget itself, with the line a quarter past, the GC ran back to back and VmRSS passed the line in two runs of three")
	flag.StringVar(&c.benchmarks, "benchmarks", "", "rewrite this file's section between <!-- hostile:start --> and <!-- hostile:end --> (appended when missing) with the run's tables")
	flag.BoolVar(&c.showLog, "log", false, "copy exprd's log to stderr")
	flag.StringVar(&c.only, "cases", allCases(), "the phases to run after the baseline, in this order, comma-separated: case numbers, a case's load (8a), and mix")
	flag.DurationVar(&c.baseline, "baseline", 5*time.Second, "the steady client alone, first")
	flag.DurationVar(&c.caseDuration, "case-duration", 5*time.Second, "how long each case sends (each client finishing at least one round)")
	flag.DurationVar(&c.callersDuration, "callers-duration", 60*time.Second, "case 5 stops at this or when every caller is done")
	flag.DurationVar(&c.mixDuration, "mix-duration", 10*time.Second, "how long all cases send at once")
	flag.DurationVar(&c.quiet, "quiet", 3*time.Second, "the quiet period after each phase; exprd's CPU is measured from its first second on")
	flag.DurationVar(&c.deadline, "deadline", 30*time.Second, "the deadline of every hostile request but cases 4's and 12's short ones")
	flag.DurationVar(&c.steadyDeadline, "steady-deadline", 10*time.Second, "the deadline of each steady call, and of case 8d's legitimate caller")
	flag.DurationVar(&c.slowDeadline, "slow-deadline", time.Second, "case 12: the deadline of each call")
	flag.Float64Var(&c.steadyRate, "steady-rate", 200, "the steady client's calls per second, at most (one at a time)")
	flag.Float64Var(&c.rssAbortMiB, "rss-abort-mib", 2048, "safety cap for a shared machine: past this VmRSS the phase stops and its exprd is killed (the phase fails)")
	flag.DurationVar(&c.p99Limit, "p99-limit", time.Second, "a steady p99 past this fails the phase: a bound")
	flag.Float64Var(&c.p99Factor, "p99-factor", 5, "a steady p99 past this × the baseline's fails the phase: the goal")
	flag.BoolVar(&c.boundsOnly, "bounds-only", false, "exit 0 when every bound holds and only the p99 goal fails (the report still says FAIL)")
	flag.Float64Var(&c.quietCores, "quiet-cores", 0.1, "exprd's CPU from a second into the quiet period on, in cores, past which the phase fails")
	flag.IntVar(&c.stateStreams, "state-streams", 128, "case 1: streams sending big states")
	flag.IntVar(&c.codemodeCalls, "codemode-calls", 128, "case 2: concurrent CodeMode Executes")
	flag.IntVar(&c.deepStreams, "deep-streams", 16, "case 3: streams sending deep set addresses")
	flag.IntVar(&c.searchClients, "search-clients", 32, "case 4: clients sending 10 MB queries")
	flag.IntVar(&c.callers, "callers", 100_000, "case 5: distinct callers")
	flag.IntVar(&c.callerConcurrency, "caller-concurrency", 256, "case 5: callers connecting at once")
	flag.IntVar(&c.silentStreams, "silent-streams", 64, "case 6: streams that never read")
	flag.IntVar(&c.silentCalls, "silent-calls", 0, "case 6: calls each stream sends at most (0: until sending blocks)")
	flag.IntVar(&c.allocStreams, "alloc-streams", 64, "case 7: streams running programs that allocate until their time budget ends them")
	flag.IntVar(&c.hostileStateBytes, "hostile-state-bytes", 15_000_000, "case 1: the state past the containers bound, {\"a\":[{},{},…]}")
	flag.IntVar(&c.legalStateBytes, "legal-state-bytes", 8_000_000, "case 1: the legal state of normal objects")
	flag.IntVar(&c.searchBytes, "search-bytes", 10_000_000, "case 4: a query's bytes")
	flag.IntVar(&c.bigToolBytes, "big-tool-bytes", 5<<20, "case 2: the tool's answer")
	flag.IntVar(&c.deepSegments, "deep-segments", 20_000, `case 3: the address is "scopes.root" + ".a" × this`)
	flag.IntVar(&c.streamWindow, "stream-window", 1<<20, "exprd's --stream-window (its default): case 8b sends one such window a stream")
	flag.IntVar(&c.hpackStreams, "hpack-streams", 300, "case 8a: streams on the one connection")
	flag.IntVar(&c.hpackBytes, "hpack-bytes", 16<<20-64<<10, "case 8a: a stream's header list once decoded (gRPC's default bound is 16 MiB)")
	flag.IntVar(&c.windowStreams, "window-streams", 1000, "case 8b: streams sending one window of a message they never finish")
	flag.IntVar(&c.gzipClients, "gzip-clients", 32, "case 8c: connections sending gzip messages")
	flag.IntVar(&c.gzipInflated, "gzip-inflated", 16<<20-1<<10, "case 8c: the bytes a message inflates to (under --max-recv-msg-size)")
	flag.IntVar(&c.squatters, "squatters", 64, "case 8d: streams squatting on a 16 MiB length prefix")
	flag.IntVar(&c.legitStateBytes, "legit-state-bytes", 3_000_000, "case 8d: the legitimate caller's state")
	flag.IntVar(&c.resetConns, "reset-conns", 4, "case 8e: connections flooding resets")
	flag.IntVar(&c.resetsPerConn, "resets", 100_000, "case 8e: resets a connection sends at most")
	flag.IntVar(&c.healthStreams, "health-streams", 5000, "case 8f: health Watch streams on one connection")
	flag.IntVar(&c.codemodeStrings, "codemode-strings", 64, "case 9: concurrent CodeMode Executes")
	flag.IntVar(&c.exprtoolStrings, "exprtool-strings", 32, "case 10: concurrent unary Calls, and as many Session streams")
	flag.IntVar(&c.clientFnStreams, "client-fn-streams", 16, "case 11a: Sessions answering their function with 1 MB")
	flag.IntVar(&c.serverFnClients, "server-fn-clients", 16, "case 11b: concurrent Calls of math.add in a loop")
	flag.IntVar(&c.slowClients, "slow-clients", 2, "case 12: clients reading slow builtins at once")
	flag.IntVar(&c.agentTurns, "agent-turns", 8, "case 13: AgentLoop turns at once, for each of the two models")
	flag.IntVar(&c.openAPIClients, "openapi-clients", 4, "case 14: clients registering each document at once")
	flag.Parse()
	if _, err := selectPhases(c.only); err != nil {
		fmt.Fprintln(os.Stderr, "exprd-hostile: --cases:", err)
		os.Exit(2)
	}
	if c.short {
		// Explicit flags still win over these.
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for name, v := range shortFlags {
			if !set[name] {
				_ = flag.Set(name, v)
			}
		}
	}
	return c
}

// shortFlags are --short's settings: the payloads as large, the clients
// fewer and the phases shorter.
var shortFlags = map[string]string{
	"baseline": "2s", "case-duration": "800ms", "callers-duration": "3s", "mix-duration": "2s", "quiet": "1500ms",
	"deadline": "3s", "steady-deadline": "3s", "rss-abort-mib": "1024",
	"state-streams": "16", "codemode-calls": "16", "deep-streams": "4", "search-clients": "8", "callers": "2000", "silent-streams": "16", "alloc-streams": "8",
	"hpack-streams": "60", "window-streams": "200", "gzip-clients": "8", "squatters": "16", "resets": "10000", "reset-conns": "2", "health-streams": "1000",
	"codemode-strings": "8", "exprtool-strings": "4", "client-fn-streams": "4", "server-fn-clients": "4", "agent-turns": "2", "openapi-clients": "1",
}

func run() (int, error) {
	cfg := parseFlags()
	started := time.Now()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	provider, err := startBigProvider(cfg.bigToolBytes)
	if err != nil {
		return 0, err
	}
	defer provider.Close()
	model, err := startHostileModel()
	if err != nil {
		return 0, err
	}
	defer model.Close()
	docs, err := startOpenAPIServer()
	if err != nil {
		return 0, err
	}
	defer docs.Close()
	dir, err := os.MkdirTemp("", "exprd-hostile-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)

	h, err := startHarness(ctx, cfg, dir, provider, model, docs)
	if err != nil {
		return 0, err
	}
	defer h.close()

	results := h.runAll()
	rep := report{cfg: cfg, phases: results, crashed: h.crashes > 0, exprdLog: h.log, seconds: time.Since(started).Seconds(),
		memLimitNote: h.memLimitNote, args: h.args}
	out := rep.markdown()
	fmt.Println(out)
	if cfg.benchmarks != "" && !cfg.short {
		if err := writeSection(cfg.benchmarks, out); err != nil {
			return 0, err
		}
		fmt.Fprintf(os.Stderr, "exprd-hostile: wrote the tables into %s\n", cfg.benchmarks)
	}
	failures := rep.failures()
	if len(failures) == 0 {
		fmt.Fprintf(os.Stderr, "exprd-hostile: pass: every phase held memory, cores, typed answers, the steady p99, right answers and the p99 goal (%.0f s)\n", rep.seconds)
		return 0, nil
	}
	fmt.Fprintln(os.Stderr, "exprd-hostile: FAIL:\n  "+strings.Join(failures, "\n  "))
	if rep.crashed {
		fmt.Fprintln(os.Stderr, "exprd's last log lines:\n"+h.log.String())
	}
	if cfg.boundsOnly && len(rep.boundFailures()) == 0 {
		fmt.Fprintln(os.Stderr, "exprd-hostile: every bound held; only the p99 goal failed, which --bounds-only leaves out of the exit status")
		return 0, nil
	}
	return 1, nil
}

// prefixed writes exprd's log lines to w marked as exprd's.
type prefixed struct{ w io.Writer }

func (p prefixed) Write(b []byte) (int, error) {
	if _, err := fmt.Fprint(p.w, "exprd: ", string(b)); err != nil {
		return 0, err
	}
	return len(b), nil
}
