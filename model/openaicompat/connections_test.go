package openaicompat_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/model/openaicompat"
)

// sseServer is a model server on loopback that streams every turn's
// reply slowly, delta by delta, and counts the connections it accepts and
// the requests each protocol carried.
type sseServer struct {
	*httptest.Server
	deltas int
	delay  time.Duration

	accepted atomic.Int64 // connections accepted
	open     atomic.Int64 // connections open now
	maxOpen  atomic.Int64 // the most open at once
	http1    atomic.Int64 // requests over HTTP/1.x
	http2    atomic.Int64 // requests over HTTP/2
}

// The ways a server may speak.
const (
	plainHTTP1 = iota // http://, HTTP/1.1 only
	plainH2C          // http://, HTTP/1.1 and cleartext HTTP/2 (h2c)
	tlsHTTP1          // https://, ALPN offering http/1.1 only
	tlsH2             // https://, ALPN offering h2 and http/1.1
)

// startSSE starts a server speaking as kind, each reply deltas chunks
// delay apart, until tb ends.
func startSSE(tb testing.TB, kind, deltas int, delay time.Duration) *sseServer {
	tb.Helper()
	s := &sseServer{deltas: deltas, delay: delay}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.chat))
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			s.accepted.Add(1)
			n := s.open.Add(1)
			for m := s.maxOpen.Load(); n > m && !s.maxOpen.CompareAndSwap(m, n); m = s.maxOpen.Load() {
			}
		case http.StateClosed, http.StateHijacked:
			s.open.Add(-1)
		}
	}
	switch kind {
	case plainHTTP1:
		s.Start()
	case plainH2C:
		s.Config.Protocols = new(http.Protocols)
		s.Config.Protocols.SetHTTP1(true)
		s.Config.Protocols.SetUnencryptedHTTP2(true)
		s.Start()
	case tlsHTTP1:
		s.StartTLS()
	case tlsH2:
		s.EnableHTTP2 = true
		s.StartTLS()
	}
	tb.Cleanup(s.Close)
	return s
}

func (s *sseServer) chat(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 2 {
		s.http2.Add(1)
	} else {
		s.http1.Add(1)
	}
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "text/event-stream")
	f := w.(http.Flusher)
	chunk := func(delta, finish string) {
		fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", delta, finish)
		f.Flush()
	}
	for range s.deltas {
		chunk(`{"content":"lamp "}`, "null")
		select {
		case <-time.After(s.delay):
		case <-r.Context().Done():
			return
		}
	}
	chunk(`{}`, `"stop"`)
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
}

// client is a provider of the server's, over the provider's own transport
// (only the server's certificate added to its TLS config).
func (s *sseServer) client(tb testing.TB, opts ...openaicompat.Option) *openaicompat.Provider {
	tb.Helper()
	var cert *x509.Certificate
	if s.TLS != nil {
		cert = s.Certificate()
	}
	return newClient(tb, s.URL, cert, opts...)
}

// counts is what the server has counted so far.
func (s *sseServer) counts() connCounts {
	return connCounts{s.accepted.Load(), s.maxOpen.Load(), s.http1.Load(), s.http2.Load()}
}

// connCounts are a server's counts: connections accepted, the most open
// at once, requests over HTTP/1.x and over HTTP/2.
type connCounts struct{ accepted, maxOpen, http1, http2 int64 }

// newClient is a provider of the server at url, trusting cert (nil: plain
// http).
func newClient(tb testing.TB, url string, cert *x509.Certificate, opts ...openaicompat.Option) *openaicompat.Provider {
	tb.Helper()
	if cert != nil {
		roots := x509.NewCertPool()
		roots.AddCert(cert)
		opts = append(opts, openaicompat.WithTLSConfig(&tls.Config{RootCAs: roots}))
	}
	p, err := openaicompat.New("test", openaicompat.ProviderConfig{BaseURL: url + "/v1", Model: "m"}, opts...)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	tb.Cleanup(func() { _ = p.Close() })
	return p
}

// hold starts n turns, each after the one before has its answer's
// headers, and returns their streams unread: n requests in flight at once.
func hold(t *testing.T, p *openaicompat.Provider, n int) []model.Stream {
	t.Helper()
	var open []model.Stream
	for range n {
		s, err := p.Stream(context.Background(), ask)
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, s)
	}
	return open
}

// collectAll reads every stream to its end.
func collectAll(t *testing.T, streams []model.Stream) {
	t.Helper()
	for _, s := range streams {
		if err := collect(s); err != nil {
			t.Fatal(err)
		}
	}
}

// turnText runs one streamed turn to its end.
func turnText(p *openaicompat.Provider) error {
	s, err := p.Stream(context.Background(), ask)
	if err != nil {
		return err
	}
	return collect(s)
}

// collect reads s to its end and closes it: the Response, then io.EOF.
func collect(s model.Stream) error {
	defer s.Close()
	for {
		ev, err := s.Recv()
		if err != nil {
			return err
		}
		if _, ok := ev.(model.Response); ok {
			if _, err := s.Recv(); err != io.EOF {
				return fmt.Errorf("after the Response: %v, want io.EOF", err)
			}
			return nil
		}
	}
}

// TestConnectionsReused counts the connections a server accepts for turns
// one after another and for waves of turns held open at once: HTTP/1.1
// needs a connection a turn in flight and reuses them wave after wave;
// HTTP/2, negotiated by ALPN over the provider's own TLS config, carries
// every turn of a wave on one connection; a plain http server that would
// accept cleartext HTTP/2 still gets HTTP/1.1 (no h2c by prior knowledge,
// which a plain HTTP/1.1 server would not understand).
func TestConnectionsReused(t *testing.T) {
	t.Parallel()
	const sequential, inFlight, waves = 10, 6, 3
	for _, tt := range []struct {
		name         string
		kind         int
		wantConns    int // for the waves; the sequential turns open 1
		wantHTTP2    bool
		wantMaxConns int
	}{
		{"plain HTTP/1.1", plainHTTP1, inFlight, false, inFlight},
		{"plain, server accepting h2c", plainH2C, inFlight, false, inFlight},
		{"TLS, HTTP/1.1 only", tlsHTTP1, inFlight, false, inFlight},
		{"TLS offering h2", tlsH2, 1, true, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := startSSE(t, tt.kind, 2, time.Millisecond)
			p := srv.client(t)
			for range sequential {
				if err := turnText(p); err != nil {
					t.Fatal(err)
				}
			}
			if n := srv.counts().accepted; n != 1 {
				t.Errorf("%d turns one after another opened %d connections, want 1", sequential, n)
			}
			for range waves {
				collectAll(t, hold(t, p, inFlight))
			}
			if n := srv.accepted.Load(); n != int64(tt.wantConns) {
				t.Errorf("%d turns one after another, then %d waves of %d turns at once, opened %d connections, want %d", sequential, waves, inFlight, n, tt.wantConns)
			}
			if n := srv.maxOpen.Load(); n != int64(tt.wantMaxConns) {
				t.Errorf("%d connections open at once, want %d", n, tt.wantMaxConns)
			}
			h1, h2 := srv.http1.Load(), srv.http2.Load()
			if total := int64(sequential + waves*inFlight); tt.wantHTTP2 && h2 != total || !tt.wantHTTP2 && h1 != total {
				t.Errorf("requests over HTTP/1.x %d, over HTTP/2 %d; want all %d over HTTP/2: %v", h1, h2, total, tt.wantHTTP2)
			}
		})
	}
}

// WithMaxConns bounds the connections: over HTTP/1.1, turns held open at
// the limit each have one, and one past it waits for one of theirs; over
// HTTP/2, a burst of turns started at once shares the one connection the
// limit lets it dial.
func TestWithMaxConns(t *testing.T) {
	t.Parallel()
	const limit = 4
	for _, tt := range []struct {
		name      string
		kind      int
		maxConns  int
		turns     int
		burst     bool // started at once, not one after another's headers
		wantConns int64
	}{
		{"HTTP/1.1, at the limit", plainHTTP1, limit, limit, false, limit},
		{"HTTP/1.1, one past it", plainHTTP1, limit, limit + 1, false, limit},
		{"HTTP/1.1, no limit", plainHTTP1, 0, limit + 1, false, limit + 1},
		{"HTTP/2, a burst under a limit of 1", tlsH2, 1, 20, true, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := startSSE(t, tt.kind, 2, time.Millisecond)
			p := srv.client(t, openaicompat.WithMaxConns(tt.maxConns))
			var held []model.Stream
			if !tt.burst {
				held = hold(t, p, min(tt.turns, limit))
			}
			errs := make(chan error, tt.turns)
			for range tt.turns - len(held) { // past the limit, each waits for a connection
				go func() { errs <- turnText(p) }()
			}
			if tt.maxConns == 0 {
				// Without a limit each dials its own: held open until it
				// has, lest one reuse a held turn's connection, freed.
				for deadline := time.Now().Add(10 * time.Second); srv.accepted.Load() < tt.wantConns && time.Now().Before(deadline); {
					time.Sleep(time.Millisecond)
				}
			}
			collectAll(t, held)
			for range tt.turns - len(held) {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			if n := srv.accepted.Load(); n != tt.wantConns {
				t.Errorf("%d turns opened %d connections, want %d", tt.turns, n, tt.wantConns)
			}
		})
	}
}

func TestWithMaxConnsRefusesNegative(t *testing.T) {
	t.Parallel()
	if _, err := openaicompat.New("test", openaicompat.ProviderConfig{BaseURL: "http://127.0.0.1:1/v1", Model: "m"}, openaicompat.WithMaxConns(-1)); err == nil {
		t.Fatal("WithMaxConns(-1): no error")
	}
}

func TestWithTLSConfigRefusesNil(t *testing.T) {
	t.Parallel()
	if _, err := openaicompat.New("test", openaicompat.ProviderConfig{BaseURL: "https://127.0.0.1:1/v1", Model: "m"}, openaicompat.WithTLSConfig(nil)); err == nil {
		t.Fatal("WithTLSConfig(nil): no error")
	}
}

// BenchmarkConnections counts the connections a provider opens to one
// model server that streams each reply slowly (8 deltas 5 ms apart):
// turns one after another (an op is a turn), and waves of n turns started
// at once (an op is a wave), over plain HTTP/1.1 (with the default idle
// connections, and with as many as n) and over TLS offering h2 (with no
// bound on connections, and with WithMaxConns(16)). Metrics: conns,
// connections accepted over the whole run; first-wave-conns, those of the
// first wave; new-conns/op, those a later wave opened (0: every connection
// reused); max-open, the most open at once over the run.
//
// Waves go up to 1,000 turns, or to the count in $EXPRD_BENCH_MAX_WAVE
// (BENCHMARKS.md's figures: 10000). A wave of n may open n connections
// (over HTTP/1.1 it must; over HTTP/2, without WithMaxConns, each turn that
// finds no connection free dials one): when 2n descriptors do not fit
// under this process's limit of open files, the server runs in a process
// of its own (TestConnectionsServerProcess).
func BenchmarkConnections(b *testing.B) {
	maxWave := 1000
	if v := os.Getenv("EXPRD_BENCH_MAX_WAVE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatalf("EXPRD_BENCH_MAX_WAVE=%q: %v", v, err)
		}
		maxWave = n
	}
	for _, proto := range []struct {
		name        string
		kind        int
		maxConns    int
		idleIsWave  bool // WithIdleConns(n) for waves of n past the default
		onlyPastDef bool // only the waves past DefaultIdleConns
	}{
		{"http1", plainHTTP1, 0, false, false},
		{"http1-idle-conns=n", plainHTTP1, 0, true, true},
		{"h2", tlsH2, 0, false, false},
		{"h2-max-conns=16", tlsH2, 16, false, false},
	} {
		if !proto.onlyPastDef {
			b.Run(proto.name+"/sequential", func(b *testing.B) {
				srv := startSSE(b, proto.kind, 8, 5*time.Millisecond)
				p := srv.client(b, openaicompat.WithMaxConns(proto.maxConns))
				for b.Loop() {
					if err := turnText(p); err != nil {
						b.Fatal(err)
					}
				}
				c := srv.counts()
				b.ReportMetric(float64(c.accepted), "conns")
				b.ReportMetric(float64(c.maxOpen), "max-open")
			})
		}
		for _, n := range []int{100, 1000, 10000} {
			if n > maxWave || proto.onlyPastDef && n <= openaicompat.DefaultIdleConns {
				continue
			}
			b.Run(fmt.Sprintf("%s/concurrent=%d", proto.name, n), func(b *testing.B) {
				opts := []openaicompat.Option{openaicompat.WithMaxConns(proto.maxConns)}
				if proto.idleIsWave {
					opts = append(opts, openaicompat.WithIdleConns(n))
				}
				var p *openaicompat.Provider
				var counts func() connCounts
				if proto.maxConns == 0 && openFiles() < uint64(2*n+1024) {
					srv := startSSEProcess(b, proto.kind)
					p, counts = newClient(b, srv.url, srv.cert, opts...), srv.counts
				} else {
					srv := startSSE(b, proto.kind, 8, 5*time.Millisecond)
					p, counts = srv.client(b, opts...), srv.counts
				}
				wave := func() {
					var wg sync.WaitGroup
					for range n {
						wg.Go(func() {
							if err := turnText(p); err != nil {
								b.Error(err)
							}
						})
					}
					wg.Wait()
				}
				wave()
				first := counts().accepted
				waves := 0
				for b.Loop() {
					wave()
					waves++
				}
				c := counts()
				b.ReportMetric(float64(first), "first-wave-conns")
				b.ReportMetric(float64(c.accepted-first)/float64(waves), "new-conns/op")
				b.ReportMetric(float64(c.maxOpen), "max-open")
				if proto.kind == tlsH2 && c.http1 > 0 {
					b.Errorf("%d requests over HTTP/1.x, want none", c.http1)
				}
			})
		}
	}
}

// sseServerEnv, in a child process's environment, makes
// TestConnectionsServerProcess serve as startSSEProcess asks: "plain" or
// "tls".
const sseServerEnv = "OPENAICOMPAT_TEST_SSE_SERVER"

// TestConnectionsServerProcess is, in a child process started by
// startSSEProcess, the model server of a wave whose connections do not fit
// in one process's descriptors with their clients: it writes its URL and
// certificate (base64 DER, "-" for none) on a line, then its counts, a line
// for each line read, until its standard input ends.
func TestConnectionsServerProcess(t *testing.T) {
	kind, ok := map[string]int{"plain": plainHTTP1, "tls": tlsH2}[os.Getenv(sseServerEnv)]
	if !ok {
		t.Skip("the model server of BenchmarkConnections, in a process of its own")
	}
	srv := startSSE(t, kind, 8, 5*time.Millisecond)
	cert := "-"
	if srv.TLS != nil {
		cert = base64.StdEncoding.EncodeToString(srv.Certificate().Raw)
	}
	fmt.Println(srv.URL, cert)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		c := srv.counts()
		fmt.Println(c.accepted, c.maxOpen, c.http1, c.http2)
	}
}

// sseProcess is a server TestConnectionsServerProcess runs in a child
// process.
type sseProcess struct {
	url  string
	cert *x509.Certificate // nil: plain http
	in   io.Writer
	out  *bufio.Reader
	tb   testing.TB
}

// startSSEProcess starts this test binary as a server speaking as kind
// (plainHTTP1 or tlsH2) until tb ends.
func startSSEProcess(tb testing.TB, kind int) *sseProcess {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestConnectionsServerProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), sseServerEnv+"="+map[int]string{plainHTTP1: "plain", tlsH2: "tls"}[kind])
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = in.Close()
		_ = cmd.Wait()
	})
	s := &sseProcess{in: in, out: bufio.NewReader(out), tb: tb}
	var certText string
	if _, err := fmt.Sscan(s.line(), &s.url, &certText); err != nil {
		tb.Fatalf("the server process's first line: %v", err)
	}
	if certText != "-" {
		der, err := base64.StdEncoding.DecodeString(certText)
		if err != nil {
			tb.Fatal(err)
		}
		if s.cert, err = x509.ParseCertificate(der); err != nil {
			tb.Fatal(err)
		}
	}
	return s
}

func (s *sseProcess) line() string {
	l, err := s.out.ReadString('\n')
	if err != nil {
		s.tb.Fatalf("reading the server process: %v", err)
	}
	return l
}

func (s *sseProcess) counts() connCounts {
	if _, err := io.WriteString(s.in, "counts\n"); err != nil {
		s.tb.Fatal(err)
	}
	var c connCounts
	if _, err := fmt.Sscan(s.line(), &c.accepted, &c.maxOpen, &c.http1, &c.http2); err != nil {
		s.tb.Fatalf("the server process's counts: %v", err)
	}
	return c
}

// openFiles is the process's limit of open files.
func openFiles() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	return l.Cur
}
