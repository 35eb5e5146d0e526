package openaicompat_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
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
	if s.TLS != nil {
		roots := x509.NewCertPool()
		roots.AddCert(s.Certificate())
		opts = append(opts, openaicompat.WithTLSConfig(&tls.Config{RootCAs: roots}))
	}
	p, err := openaicompat.New("test", openaicompat.ProviderConfig{BaseURL: s.URL + "/v1", Model: "m"}, opts...)
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
			if n := srv.accepted.Load(); n != 1 {
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
// at once (an op is a wave), over plain HTTP/1.1 and over TLS offering h2,
// the latter also with WithMaxConns(16).
// Metrics: conns, connections accepted over the whole run, the first
// wave included; max-open, the most open at once; new-conns/op,
// connections a wave opened after the first (0: every connection reused).
// A wave of n may open n connections without WithMaxConns (over HTTP/1.1
// it must; over HTTP/2 each turn waiting for the first connection dials
// one), 2n descriptors in this process (both ends): it is skipped when the
// limit of open files is below that.
func BenchmarkConnections(b *testing.B) {
	for _, proto := range []struct {
		name     string
		kind     int
		maxConns int
	}{{"http1", plainHTTP1, 0}, {"h2", tlsH2, 0}, {"h2-max-conns=16", tlsH2, 16}} {
		b.Run(proto.name+"/sequential", func(b *testing.B) {
			srv := startSSE(b, proto.kind, 8, 5*time.Millisecond)
			p := srv.client(b, openaicompat.WithMaxConns(proto.maxConns))
			for b.Loop() {
				if err := turnText(p); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(srv.accepted.Load()), "conns")
			b.ReportMetric(float64(srv.maxOpen.Load()), "max-open")
		})
		for _, n := range []int{100, 1000, 10000} {
			b.Run(fmt.Sprintf("%s/concurrent=%d", proto.name, n), func(b *testing.B) {
				if proto.maxConns == 0 && openFiles() < uint64(2*n+1024) {
					b.Skipf("a wave of %d may open %d connections, %d descriptors here; the limit is %d", n, n, 2*n, openFiles())
				}
				srv := startSSE(b, proto.kind, 8, 5*time.Millisecond)
				p := srv.client(b, openaicompat.WithMaxConns(proto.maxConns))
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
				first := srv.accepted.Load()
				waves := 0
				for b.Loop() {
					wave()
					waves++
				}
				b.ReportMetric(float64(first), "first-wave-conns")
				b.ReportMetric(float64(srv.accepted.Load()-first)/float64(waves), "new-conns/op")
				b.ReportMetric(float64(srv.maxOpen.Load()), "max-open")
				if proto.kind == tlsH2 && srv.http1.Load() > 0 {
					b.Errorf("%d requests over HTTP/1.x, want none", srv.http1.Load())
				}
			})
		}
	}
}

// openFiles is the process's limit of open files.
func openFiles() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	return l.Cur
}
