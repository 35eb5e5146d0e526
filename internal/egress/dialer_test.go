package egress_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exprd/exprd/internal/egress"
	"github.com/exprd/exprd/internal/testkit/egresstest"
)

// waitFor bounds a test's waits on the listener; it is a deadline for a
// hung test, not a synchronisation.
const waitFor = 10 * time.Second

// listener is a TCP listener on 127.0.0.1 whose accepted connections arrive,
// in order, on accepted.
type listener struct {
	net.Listener
	port     string
	accepted chan net.Conn
}

func listen(t *testing.T) *listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	l := &listener{Listener: ln, accepted: make(chan net.Conn, 16)}
	_, l.port, _ = net.SplitHostPort(ln.Addr().String())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(l.accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.accepted <- c
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		for c := range l.accepted {
			_ = c.Close()
		}
	})
	return l
}

// next returns the next connection the listener accepted.
func (l *listener) next(t *testing.T) net.Conn {
	t.Helper()
	select {
	case c := <-l.accepted:
		return c
	case <-time.After(waitFor):
		t.Fatalf("listener accepted nothing in %v", waitFor)
		return nil
	}
}

// assertNothingAccepted fails if the listener has a connection waiting.
func (l *listener) assertNothingAccepted(t *testing.T) {
	t.Helper()
	select {
	case c := <-l.accepted:
		t.Errorf("listener accepted a connection from %s, want none", c.RemoteAddr())
		_ = c.Close()
	default:
	}
}

// dialAccepted dials through d, and checks the listener's next connection
// is this one (not one a refused dial made before it).
func (l *listener) dialAccepted(t *testing.T, d *egress.Dialer, address string) {
	t.Helper()
	c, err := d.DialContext(context.Background(), "tcp", address)
	if err != nil {
		t.Fatalf("DialContext(%s): got %v, want a connection", address, err)
	}
	defer c.Close()
	if got, want := c.RemoteAddr().String(), "127.0.0.1:"+l.port; got != want {
		t.Errorf("DialContext(%s): got a connection to %s, want %s", address, got, want)
	}
	srv := l.next(t)
	if got, want := srv.RemoteAddr().String(), c.LocalAddr().String(); got != want {
		t.Errorf("first accepted connection: got one from %s, want the allowed dial's %s", got, want)
	}
	l.assertNothingAccepted(t)
}

// wantRefused checks err is a dial error wrapping an *egress.Error.
func wantRefused(t *testing.T, err error, host, addr, why string) {
	t.Helper()
	if err == nil {
		t.Fatalf("dial to %s: got a connection, want refused", host)
	}
	var op *net.OpError
	if !errors.As(err, &op) {
		t.Errorf("dial to %s: got %v (%T), want a *net.OpError", host, err, err)
	}
	var e *egress.Error
	if !errors.As(err, &e) {
		t.Fatalf("dial to %s: got %v (%T), want it to wrap an *egress.Error", host, err, err)
	}
	if e.Host != host {
		t.Errorf("dial to %s: got Host %q, want %q", host, e.Host, host)
	}
	if got := e.Addr.String(); got != addr {
		t.Errorf("dial to %s: got Addr %s, want %s", host, got, addr)
	}
	if !strings.Contains(e.Why, why) {
		t.Errorf("dial to %s: got Why %q, want it to contain %q", host, e.Why, why)
	}
}

func mustParse(t *testing.T, entries ...string) *egress.Policy {
	t.Helper()
	p, err := egress.Parse(entries)
	if err != nil {
		t.Fatalf("Parse(%q): %v", entries, err)
	}
	return p
}

func TestDialLoopbackLiteral(t *testing.T) {
	t.Parallel()
	l := listen(t)
	address := "127.0.0.1:" + l.port

	_, err := (&egress.Dialer{Policy: egress.Public()}).DialContext(context.Background(), "tcp", address)
	wantRefused(t, err, "127.0.0.1", "127.0.0.1", "loopback")
	l.assertNothingAccepted(t)

	// The first connection the listener sees is the allowed one: the
	// refused dial never connected.
	l.dialAccepted(t, &egress.Dialer{Policy: mustParse(t, "loopback")}, address)
}

func TestDialName(t *testing.T) {
	t.Parallel()
	l := listen(t)
	loop4 := netip.MustParseAddr("127.0.0.1")
	metadata := netip.MustParseAddr("169.254.169.254")
	dns := egresstest.StartDNS(t, map[string][]netip.Addr{
		"rebind.test":   {loop4},
		"multi.test":    {metadata, loop4},
		"meta.test":     {metadata},
		"v6.test":       {netip.MustParseAddr("::1")},
		"dual.test":     {netip.MustParseAddr("::1"), loop4},
		"mapped.test":   {netip.MustParseAddr("::ffff:10.0.0.1")},
		"SVC.Test.":     {loop4},
		"x.wild.test":   {loop4},
		"wild.test":     {loop4},
		"private.test":  {netip.MustParseAddr("10.0.0.1")},
		"private2.test": {netip.MustParseAddr("192.168.0.1")},
	})
	dialer := func(p *egress.Policy) *egress.Dialer {
		return &egress.Dialer{Policy: p, Resolver: dns.Resolver(), Timeout: waitFor}
	}
	dial := func(p *egress.Policy, name string) error {
		c, err := dialer(p).DialContext(context.Background(), "tcp", net.JoinHostPort(name, l.port))
		if c != nil {
			_ = c.Close()
			t.Errorf("DialContext(%s): got a connection, want refused", name)
		}
		return err
	}
	at := func(name string) string { return net.JoinHostPort(name, l.port) }

	// Refusals first: each would show up on the listener if it connected.
	wantRefused(t, dial(egress.Public(), "rebind.test"), "rebind.test", "127.0.0.1", "loopback")
	wantRefused(t, dial(egress.Public(), "v6.test"), "v6.test", "::1", "loopback")
	wantRefused(t, dial(mustParse(t, "127.0.0.0/8"), "meta.test"), "meta.test", "169.254.169.254", "link-local")
	wantRefused(t, dial(egress.Public(), "mapped.test"), "mapped.test", "10.0.0.1", "private")
	wantRefused(t, dial(mustParse(t, "*.wild.test"), "wild.test"), "wild.test", "127.0.0.1", "loopback")
	wantRefused(t, dial(mustParse(t, "private.test"), "private2.test"), "private2.test", "192.168.0.1", "private")
	l.assertNothingAccepted(t)
	if dns.Queries() == 0 {
		t.Errorf("Queries: got 0, want the names resolved through the test DNS")
	}

	t.Run("listed name", func(t *testing.T) {
		l.dialAccepted(t, dialer(mustParse(t, "rebind.test")), at("rebind.test"))
	})
	t.Run("listed name, case and trailing dot", func(t *testing.T) {
		l.dialAccepted(t, dialer(mustParse(t, "svc.test")), at("Svc.TEST."))
	})
	t.Run("wildcard", func(t *testing.T) {
		l.dialAccepted(t, dialer(mustParse(t, "*.wild.test")), at("x.wild.test"))
	})
	t.Run("refused and allowed addresses", func(t *testing.T) {
		l.dialAccepted(t, dialer(mustParse(t, "127.0.0.0/8")), at("multi.test"))
	})
	t.Run("refused v6, allowed v4", func(t *testing.T) {
		l.dialAccepted(t, dialer(mustParse(t, "127.0.0.1")), at("dual.test"))
	})
	t.Run("loopback keyword", func(t *testing.T) {
		l.dialAccepted(t, dialer(mustParse(t, "loopback")), at("rebind.test"))
	})
	t.Run("no such host", func(t *testing.T) {
		err := dial(mustParse(t, "loopback"), "missing.test")
		var dnsErr *net.DNSError
		if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
			t.Errorf("DialContext(missing.test): got %v, want a not-found *net.DNSError", err)
		}
	})
}

func TestDialInvalid(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name    string
		dialer  *egress.Dialer
		network string
		address string
		wantErr string
		refused bool // an *egress.Error
	}{
		{"nil dialer", nil, "tcp", "127.0.0.1:1", "no egress policy", true},
		{"nil policy", &egress.Dialer{}, "tcp", "127.0.0.1:1", "no egress policy", true},
		{"zero policy", &egress.Dialer{Policy: &egress.Policy{}}, "tcp", "127.0.0.1:1", "no egress policy", true},
		{"unix", &egress.Dialer{Policy: egress.Public()}, "unix", "/tmp/x.sock", `network "unix" is not supported`, false},
		{"no port", &egress.Dialer{Policy: egress.Public()}, "tcp", "example.com", "missing port", false},
		{"udp refused", &egress.Dialer{Policy: egress.Public()}, "udp", "127.0.0.1:53", "loopback", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := tt.dialer.DialContext(ctx, tt.network, tt.address)
			if c != nil {
				_ = c.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("DialContext(%s, %s): got %v, want an error containing %q", tt.network, tt.address, err, tt.wantErr)
			}
			var e *egress.Error
			if got := errors.As(err, &e); got != tt.refused {
				t.Errorf("DialContext(%s, %s): got errors.As *egress.Error %v, want %v", tt.network, tt.address, got, tt.refused)
			}
		})
	}
}

func TestGRPCDialer(t *testing.T) {
	t.Parallel()
	l := listen(t)
	address := "127.0.0.1:" + l.port

	_, err := (&egress.Dialer{Policy: egress.Public()}).GRPCDialer()(context.Background(), address)
	wantRefused(t, err, "127.0.0.1", "127.0.0.1", "loopback")
	l.assertNothingAccepted(t)

	c, err := (&egress.Dialer{Policy: mustParse(t, "loopback")}).GRPCDialer()(context.Background(), address)
	if err != nil {
		t.Fatalf("GRPCDialer()(%s): got %v, want a connection", address, err)
	}
	defer c.Close()
	if got, want := c.RemoteAddr().Network(), "tcp"; got != want {
		t.Errorf("network: got %s, want %s", got, want)
	}
	if got, want := l.next(t).RemoteAddr().String(), c.LocalAddr().String(); got != want {
		t.Errorf("accepted: got %s, want %s", got, want)
	}
}

// TestDialContextCancelled: a cancelled context ends the dial with the
// context's error, not an egress one.
func TestDialContextCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := (&egress.Dialer{Policy: mustParse(t, "loopback")}).DialContext(ctx, "tcp", "127.0.0.1:"+strconv.Itoa(1))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
}
