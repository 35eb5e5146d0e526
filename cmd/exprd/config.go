package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v4"

	"github.com/exprd/exprd/evaluator"
	"github.com/exprd/exprd/internal/egress"
	"github.com/exprd/exprd/internal/procs"
	"github.com/exprd/exprd/membudget"
	"github.com/exprd/exprd/model/openaicompat"
	"github.com/exprd/exprd/server"
	"github.com/exprd/exprd/server/ratelimit"
	"github.com/exprd/exprd/utcp"
)

// config is exprd's configuration. Every setting is a flag; a YAML file
// (--config) may set any of them by the flag's name, the environment by
// EXPRD_<FLAG> (dashes as underscores). The command line wins over the
// environment, which wins over the file.
type config struct {
	listen        string
	metricsListen string
	demo          bool
	logLevel      string
	adaptProcs    bool
	procsPerCore  int
	drain         time.Duration
	cacheSize     int
	maxRunning    int

	maxCallsInFlight  int
	maxRecvMsgSize    int
	maxStateBytes     int
	maxStreamsPerConn int
	maxSessions       int
	ratePerSecond     float64
	rateBurst         int
	rateCallers       int
	windowSize        int
	connWindowSize    int
	slowReader        time.Duration
	trustedProxies    string

	tokensFile  string
	tlsCert     string
	tlsKey      string
	tlsClientCA string

	modelsConfig string
	manualsDir   string
	utcpEnvFile  string
	utcpSecrets  string
	utcpEnv      string
	utcpTimeout  time.Duration

	modelIdleConns int // each model provider's, openaicompat.WithIdleConns
	modelMaxConns  int // openaicompat.WithMaxConns

	registryWritesWithoutAuth bool
	egressAllow               string
	showProviderMessages      bool
	registryMaxManuals        int
	registryMaxTools          int
	store                     storeConfig
	turns                     turnsConfig
	memoryBudget              int64
	memoryBudgetWait          time.Duration
	memoryCallerShare         float64
	memory                    *membudget.Budget // made from the two above at start
	overload                  overloadConfig
	runLimits                 runLimitsConfig  // AgentLoop's and CodeMode's maxima (runlimits.go)
	connLimits                connLimitsConfig // what a connection holds before a token is checked (connlimits.go)
	mcp                       mcpConfig        // the MCP endpoint (mcp.go)
	pprof                     pprofConfig      // --debug-pprof-addr (pprof.go)

	maxConnAge      time.Duration
	maxConnAgeGrace time.Duration
	minPingInterval time.Duration

	budgets evaluator.Budgets
}

func newFlagSet(c *config) *flag.FlagSet {
	fs := flag.NewFlagSet("exprd", flag.ContinueOnError)
	fs.String("config", "", "a YAML file of settings, keyed by flag name")
	fs.StringVar(&c.listen, "listen", ":50051", "address to serve gRPC on")
	fs.StringVar(&c.metricsListen, "metrics-listen", ":9090", "address to serve Prometheus /metrics on (empty: off)")
	fs.BoolVar(&c.demo, "demo", false, "run the demo on loopback (cmd/exprd/demo.go): the scripted model as provider \"demo\", the math and catalog tool providers, the products state and functions")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.BoolVar(&c.adaptProcs, "adapt-procs", true, "run Go on one core while exprd uses little CPU and on --procs-per-core Ps a core of its default (GOMAXPROCS) once it uses most of one: at low concurrency a second core costs more in thread wakeups than it gives; off when the GOMAXPROCS variable is set")
	fs.IntVar(&c.procsPerCore, "procs-per-core", procs.DefaultPerCore, "with --adapt-procs, busy: Go's Ps a core (1 to 8); programs still compute one a core. More Ps than cores let the system's scheduler give a short call a core while goroutines compute for others (at 2, the hostile run's steady p99 a third to a half); they cost throughput at saturation (200 streams of one client: 0.82-0.85 times the calls a second at 2) and memory (128 streams of 15 MB states: 310-350 MiB against 295 at 1)")
	fs.DurationVar(&c.drain, "drain-timeout", 10*time.Second, "on SIGTERM, how long open streams may go on before they are stopped")
	fs.IntVar(&c.cacheSize, "compile-cache-size", evaluator.DefaultCompileCacheSize, "compiled programs kept")
	fs.IntVar(&c.maxRunning, "max-running-programs", 0, "ExprTool programs running at once; the others wait their turn, their time budget not yet counting (0: as many as Go's cores at the time: GOMAXPROCS, no more than the cores)")

	fs.IntVar(&c.maxCallsInFlight, "max-calls-in-flight", server.DefaultMaxCallsInFlight, "calls running at once on one stream")
	fs.IntVar(&c.maxRecvMsgSize, "max-recv-msg-size", server.DefaultMaxRecvMsgSize, "bytes of one received message")
	fs.IntVar(&c.maxStateBytes, "max-state-bytes", server.DefaultMaxStateBytes, "bytes of JSON of a session's state")
	fs.IntVar(&c.maxStreamsPerConn, "max-streams-per-connection", server.DefaultMaxStreamsPerConn, "streams open at once on one connection")
	fs.IntVar(&c.maxSessions, "max-sessions", server.DefaultMaxSessions, "Session streams this replica holds")
	fs.Float64Var(&c.ratePerSecond, "rate-limit", server.DefaultRatePerSecond, "RPCs started per second per caller")
	fs.IntVar(&c.rateBurst, "rate-burst", server.DefaultRateBurst, "burst of the per-caller rate limit")
	fs.IntVar(&c.windowSize, "stream-window", server.DefaultInitialWindowSize, "bytes a client may send on a stream that exprd has not read yet (HTTP/2 flow control; fixed, at least 65536)")
	fs.IntVar(&c.connWindowSize, "connection-window", server.DefaultInitialConnWindowSize, "the same for a whole connection")
	fs.DurationVar(&c.slowReader, "slow-reader-timeout", server.DefaultSlowReaderTimeout, "how long a Session's outbound queue (1 MiB) may stay full before its client counts as not reading and the stream ends RESOURCE_EXHAUSTED")
	fs.IntVar(&c.rateCallers, "rate-limit-callers", ratelimit.DefaultMaxBuckets, "callers the rate limiter remembers (the least recently seen is forgotten past it)")
	fs.StringVar(&c.trustedProxies, "trusted-proxies", "", "comma-separated IPs or CIDRs of proxies whose x-forwarded-for names the client for the rate limit (default: none; the peer's address is the client's)")

	fs.StringVar(&c.tokensFile, "auth-tokens-file", "", "bearer tokens, one `NAME TOKEN SCOPES` a line (EXPRD_AUTH_TOKENS may hold them instead); empty with no EXPRD_AUTH_TOKENS: auth off")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "serve TLS with this certificate (PEM)")
	fs.StringVar(&c.tlsKey, "tls-key", "", "the TLS certificate's key (PEM)")
	fs.StringVar(&c.tlsClientCA, "tls-client-ca", "", "require client certificates signed by this CA (mTLS)")

	fs.StringVar(&c.modelsConfig, "models-config", "", "a YAML file naming the OpenAI-compatible model providers (keys from the environment only)")
	fs.IntVar(&c.modelIdleConns, "model-idle-conns", openaicompat.DefaultIdleConns, "idle connections each model provider keeps to its server for reuse: as many as its turns in flight at once over HTTP/1.1")
	fs.IntVar(&c.modelMaxConns, "model-max-conns", 0, "connections each model provider opens to its server at once (0: no limit); over HTTP/2 a small count (16) makes a burst of turns share connections, over HTTP/1.1 it bounds the turns in flight to the server")
	fs.StringVar(&c.manualsDir, "manuals-dir", "", "register every UTCP manual (or OpenAPI document) in this directory at start")
	fs.StringVar(&c.utcpEnvFile, "utcp-env-file", "", "a .env file of UTCP variables, each keyed by its manual's name with every _ doubled, then _, then the variable (demo_shop + API_TOKEN: demo__shop_API_TOKEN)")
	fs.StringVar(&c.utcpSecrets, "utcp-secrets-dir", "", "a directory of UTCP variables, one file each, named by its key as in --utcp-env-file (a mounted Kubernetes Secret)")
	fs.StringVar(&c.utcpEnv, "utcp-env", "", "comma-separated keys (as in --utcp-env-file) read from the process environment; no other environment variable is ever a UTCP variable")
	fs.DurationVar(&c.utcpTimeout, "utcp-timeout", utcp.DefaultTimeout, "the deadline of a UTCP tool call or manual fetch whose template sets no timeout (a template's own timeout wins, longer or shorter)")

	fs.StringVar(&c.egressAllow, "egress-allow", "", "comma-separated hosts, *.suffix names, IPs, CIDRs or \"loopback\" that tool providers may be on besides public addresses; plain http:// and plaintext gRPC reach only these (--demo adds loopback)")
	fs.BoolVar(&c.showProviderMessages, "show-provider-messages", false, "let clients and models see the reason phrase of a tool provider's error status and the type and code of its JSON error, when each is a short identifier-like token holding no bound value; never its message (default: only what failed and the status code)")
	fs.BoolVar(&c.registryWritesWithoutAuth, "registry-writes-without-auth", false, "with auth off, let any client register and deregister manuals (default: refused; with auth on, writers need the registry.write scope)")
	fs.IntVar(&c.registryMaxManuals, "registry-max-manuals", utcp.DefaultMaxManuals, "manuals the tool registry holds at once, the operator's included")
	fs.IntVar(&c.registryMaxTools, "registry-max-tools", utcp.DefaultMaxTools, "tools the tool registry holds at once, over every manual")
	c.store.flags(fs)
	c.turns.flags(fs)
	fs.Int64Var(&c.memoryBudget, "memory-budget", 0, "bytes the states of sessions, turns and calls and the tools' answers being read may hold at once (0: 70% of the cgroup's memory limit, else of GOMEMLIMIT, else of the machine's memory)")
	fs.DurationVar(&c.memoryBudgetWait, "memory-budget-wait", 250*time.Millisecond, "how long work waits for room in a spent memory budget before it is refused (RESOURCE_EXHAUSTED)")
	fs.Float64Var(&c.memoryCallerShare, "memory-caller-share", membudget.DefaultCallerShare, "the part of the memory budget one caller (a token; with auth off, an address) may hold at once, over all its streams and calls; 1: no bound but the budget")
	c.overload.flags(fs)
	c.runLimits.flags(fs)
	c.connLimits.flags(fs)
	c.mcp.flags(fs)
	c.pprof.flags(fs)

	fs.DurationVar(&c.maxConnAge, "max-connection-age", server.DefaultMaxConnectionAge, "how long a connection lives, so long streams rebalance")
	fs.DurationVar(&c.maxConnAgeGrace, "max-connection-age-grace", server.DefaultMaxConnectionAgeGrace, "how long streams may go on after max-connection-age")
	fs.DurationVar(&c.minPingInterval, "min-ping-interval", server.DefaultMinPingInterval, "clients pinging more often are sent away")

	b := &c.budgets
	fs.DurationVar(&b.Timeout, "max-timeout", b.Timeout, "evaluation time per call, not counting waits on the user or on host functions")
	fs.Uint64Var(&b.MaxIterations, "max-iterations", b.MaxIterations, "predicate iterations per call")
	fs.Uint64Var(&b.MemoryBudget, "max-memory-budget", b.MemoryBudget, "expr VM memory budget per expression")
	fs.IntVar(&b.MaxSourceLength, "max-source-length", b.MaxSourceLength, "characters of one expression")
	fs.IntVar(&b.MaxNodes, "max-nodes", b.MaxNodes, "AST nodes of one expression")
	fs.IntVar(&b.MaxStringLength, "max-string-length", b.MaxStringLength, "characters of a string written or read")
	fs.IntVar(&b.MaxArrayLength, "max-array-length", b.MaxArrayLength, "items of an array written or read")
	fs.IntVar(&b.MaxReadChars, "max-read-chars", b.MaxReadChars, "characters of a read value's JSON")
	fs.DurationVar(&b.FunctionTimeout, "max-function-timeout", b.FunctionTimeout, "wait for one host function's result (client-run, server-run or UTCP)")
	fs.IntVar(&b.MaxSteps, "max-steps", b.MaxSteps, "steps of one call")
	fs.IntVar(&b.MaxValueBytes, "max-value-bytes", b.MaxValueBytes, "bytes of JSON of a value written, read or passed to a function")
	fs.IntVar(&b.MaxAllocBytes, "max-alloc-bytes", b.MaxAllocBytes, "bytes a call's programs build (strings, arrays, maps) and its host functions answer")
	fs.IntVar(&b.MaxFunctionCalls, "max-function-calls", b.MaxFunctionCalls, "host-function calls of one call")
	return fs
}

// parseConfig reads the command line, then fills what it left unset from
// the environment, then from the --config file. Every error names its key.
func parseConfig(args []string, stderr io.Writer) (config, error) {
	c := config{budgets: evaluator.DefaultBudgets()}
	fs := newFlagSet(&c)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })

	fromEnv := map[string]bool{}
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		key := envKey(f.Name)
		v, ok := os.LookupEnv(key)
		if !ok || onCommandLine[f.Name] {
			return
		}
		if err := set(f, v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %v", key, v, err))
		}
		fromEnv[f.Name] = true
	})
	if path := fs.Lookup("config").Value.String(); path != "" {
		file, err := readConfigFile(path)
		if err != nil {
			return c, err
		}
		for _, key := range slices.Sorted(maps.Keys(file)) {
			f := fs.Lookup(key)
			switch {
			case f == nil || key == "config":
				errs = append(errs, fmt.Errorf("%s: %q is not a setting (see exprd --help)", path, key))
			case onCommandLine[key] || fromEnv[key]:
			default:
				if err := set(f, file[key]); err != nil {
					errs = append(errs, fmt.Errorf("%s: %s: %q: %v", path, key, file[key], err))
				}
			}
		}
	}
	if err := c.runLimits.candidates(os.LookupEnv); err != nil {
		errs = append(errs, err)
	}
	if err := c.validate(); err != nil {
		errs = append(errs, err)
	}
	return c, errors.Join(errs...)
}

// set sets f from the environment or the file. A value that does not parse
// leaves f as it was (flag's numeric values would become 0), so that the
// parse error is the only one reported for it.
func set(f *flag.Flag, v string) error {
	was := f.Value.String()
	err := f.Value.Set(v)
	if err == nil {
		return nil
	}
	_ = f.Value.Set(was)
	if w := wanted(f); w != "" {
		return fmt.Errorf("%v, want %s", err, w)
	}
	return err
}

// wanted says what a flag's value must look like, for its parse error.
func wanted(f *flag.Flag) string {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return ""
	}
	switch g.Get().(type) {
	case time.Duration:
		return "a duration such as 100ms or 10s"
	case bool:
		return "true or false"
	case int, int64:
		return "an integer"
	case uint, uint64:
		return "a whole number"
	case float64:
		return "a number"
	}
	return ""
}

func envKey(flagName string) string {
	return "EXPRD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// readConfigFile reads a YAML mapping of setting names to scalar values:
// one document (none, in a file of comments, sets nothing), each key once.
func readConfigFile(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	var raw map[string]yaml.Node
	if err := loadYAML(data, &raw); err != nil {
		return nil, fmt.Errorf("config %s: %v", path, err)
	}
	out := make(map[string]string, len(raw))
	for k, n := range raw {
		if n.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("config %s: %s: want a single value (line %d)", path, k, n.Line)
		}
		out[k] = n.Value
	}
	return out, nil
}

// loadYAML decodes data's one YAML document into v; none (a file of
// comments) leaves v as it is, and a second one is an error.
func loadYAML(data []byte, v any) error {
	l, err := yaml.NewLoader(bytes.NewReader(data))
	if err != nil {
		return err
	}
	if err := l.Load(v); err != nil {
		if err == io.EOF {
			return nil
		}
		return err
	}
	switch err := l.Load(&yaml.Node{}); err {
	case io.EOF:
		return nil
	case nil:
		return errors.New("more than one YAML document")
	default:
		return err
	}
}

func (c config) validate() error {
	errs := c.budgetErrors()
	if (c.tlsCert == "") != (c.tlsKey == "") {
		errs = append(errs, errors.New("tls-cert and tls-key: give both or neither"))
	}
	if c.tlsClientCA != "" && c.tlsCert == "" {
		errs = append(errs, errors.New("tls-client-ca: mTLS needs tls-cert and tls-key"))
	}
	if _, err := c.proxies(); err != nil {
		errs = append(errs, fmt.Errorf("trusted-proxies: %v", err))
	}
	if _, err := c.egressPolicy(); err != nil {
		errs = append(errs, fmt.Errorf("egress-allow: %v", err))
	}
	if c.memoryBudget < 0 || c.memoryBudgetWait < 0 {
		errs = append(errs, fmt.Errorf("memory-budget %d, memory-budget-wait %s: want neither negative", c.memoryBudget, c.memoryBudgetWait))
	}
	if c.procsPerCore < 1 || c.procsPerCore > 8 {
		errs = append(errs, fmt.Errorf("procs-per-core: %d, want 1 to 8", c.procsPerCore))
	}
	if !(c.memoryCallerShare > 0 && c.memoryCallerShare <= 1) {
		errs = append(errs, fmt.Errorf("memory-caller-share: %v, want more than 0 and at most 1", c.memoryCallerShare))
	}
	if err := c.overload.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.runLimits.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.connLimits.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.mcp.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.turns.validate(); err != nil {
		return err
	}
	if err := c.store.validate(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, notPositive([]positiveFlag{{"model-idle-conns", c.modelIdleConns > 0, c.modelIdleConns}})...)
	if c.modelMaxConns < 0 {
		errs = append(errs, fmt.Errorf("model-max-conns: %d, want 0 (no limit) or a positive value", c.modelMaxConns))
	}
	if c.registryMaxManuals <= 0 || c.registryMaxTools <= 0 {
		errs = append(errs, fmt.Errorf("registry-max-manuals %d, registry-max-tools %d: want both positive", c.registryMaxManuals, c.registryMaxTools))
	}
	if c.drain <= 0 {
		errs = append(errs, fmt.Errorf("drain-timeout: %v, want a positive duration", c.drain))
	}
	return errors.Join(errs...)
}

// positiveFlag is a flag that must be above zero: whether it is, and its
// value.
type positiveFlag struct {
	flag string
	ok   bool
	v    any
}

// notPositive is an error for each flag that is not positive, naming it:
// "max-nodes: 0, want a positive value" ("a positive duration" for a
// duration).
func notPositive(flags []positiveFlag) []error {
	var errs []error
	for _, f := range flags {
		if f.ok {
			continue
		}
		want := "a positive value"
		if _, ok := f.v.(time.Duration); ok {
			want = "a positive duration"
		}
		errs = append(errs, fmt.Errorf("%s: %v, want %s", f.flag, f.v, want))
	}
	return errs
}

// budgetErrors checks that every budget's flag is positive, naming the flag
// (evaluator's Validate names the proto's field, and stays as a backstop).
func (c config) budgetErrors() []error {
	b := c.budgets
	errs := notPositive([]positiveFlag{
		{"max-timeout", b.Timeout > 0, b.Timeout},
		{"max-iterations", b.MaxIterations > 0, b.MaxIterations},
		{"max-memory-budget", b.MemoryBudget > 0, b.MemoryBudget},
		{"max-source-length", b.MaxSourceLength > 0, b.MaxSourceLength},
		{"max-nodes", b.MaxNodes > 0, b.MaxNodes},
		{"max-string-length", b.MaxStringLength > 0, b.MaxStringLength},
		{"max-array-length", b.MaxArrayLength > 0, b.MaxArrayLength},
		{"max-read-chars", b.MaxReadChars > 0, b.MaxReadChars},
		{"max-function-timeout", b.FunctionTimeout > 0, b.FunctionTimeout},
		{"max-steps", b.MaxSteps > 0, b.MaxSteps},
		{"max-value-bytes", b.MaxValueBytes > 0, b.MaxValueBytes},
		{"max-alloc-bytes", b.MaxAllocBytes > 0, b.MaxAllocBytes},
		{"max-function-calls", b.MaxFunctionCalls > 0, b.MaxFunctionCalls},
	})
	if len(errs) == 0 {
		if err := b.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// egressPolicy is --egress-allow, with the entries the demo adds.
func (c config) egressPolicy(extra ...string) (*egress.Policy, error) {
	return egress.Parse(append(splitList(c.egressAllow), extra...))
}

// proxies is --trusted-proxies: each an IP (a one-address prefix) or a CIDR.
func (c config) proxies() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, e := range splitList(c.trustedProxies) {
		if a, err := netip.ParseAddr(e); err == nil {
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(e)
		if err != nil {
			return nil, fmt.Errorf("%q is neither an IP nor a CIDR", e)
		}
		out = append(out, p)
	}
	return out, nil
}
