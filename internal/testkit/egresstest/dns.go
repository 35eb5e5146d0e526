// Package egresstest helps test code that dials through egress: a tiny DNS
// server whose answers a test chooses, so a test can make a name resolve to
// loopback, to the cloud metadata address, or to both.
package egresstest

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// DNS is a DNS server on 127.0.0.1 (UDP, and TCP for resolvers that use
// it) answering A and AAAA queries from a fixed map of names to addresses.
// A known name gets its addresses of the asked type (none is an empty
// answer); an unknown name gets NXDOMAIN. Names are case-insensitive and a
// trailing dot is ignored.
//
// The Go resolver still reads /etc/hosts first ("localhost" resolves from
// there) and applies resolv.conf's search list and ndots, so a name may be
// asked for with search suffixes first: those get NXDOMAIN.
type DNS struct {
	records map[string][]netip.Addr
	udp     net.PacketConn
	tcp     net.Listener
	queries atomic.Int64

	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// StartDNS starts a DNS server answering from records (name → addresses;
// IPv4 and IPv4-mapped addresses answer A queries, IPv6 ones AAAA). It
// registers t.Cleanup to stop it and wait for its goroutines.
func StartDNS(t testing.TB, records map[string][]netip.Addr) *DNS {
	t.Helper()
	d := &DNS{records: map[string][]netip.Addr{}, conns: map[net.Conn]struct{}{}}
	for name, addrs := range records {
		k := normalize(name)
		d.records[k] = append(d.records[k], addrs...)
	}
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("egresstest: DNS: %v", err)
	}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = udp.Close()
		t.Fatalf("egresstest: DNS: %v", err)
	}
	d.udp, d.tcp = udp, tcp
	d.wg.Add(2)
	go d.serveUDP()
	go d.serveTCP()
	t.Cleanup(d.stop)
	return d
}

// Resolver returns a resolver (PreferGo) that sends every DNS query to d,
// whatever servers /etc/resolv.conf names.
func (d *DNS) Resolver() *net.Resolver {
	udp, tcp := d.udp.LocalAddr().String(), d.tcp.Addr().String()
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var nd net.Dialer
			if strings.HasPrefix(network, "tcp") {
				return nd.DialContext(ctx, "tcp", tcp)
			}
			return nd.DialContext(ctx, "udp", udp)
		},
	}
}

// Queries returns how many queries d has answered (NXDOMAIN included).
func (d *DNS) Queries() int { return int(d.queries.Load()) }

// stop closes the listeners and open connections and waits for the
// goroutines serving them.
func (d *DNS) stop() {
	d.mu.Lock()
	d.closed = true
	_ = d.udp.Close()
	_ = d.tcp.Close()
	for c := range d.conns {
		_ = c.Close()
	}
	d.mu.Unlock()
	d.wg.Wait()
}

func (d *DNS) serveUDP() {
	defer d.wg.Done()
	buf := make([]byte, 65535)
	for {
		n, from, err := d.udp.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if resp := d.answer(buf[:n]); resp != nil {
			_, _ = d.udp.WriteTo(resp, from)
		}
	}
}

func (d *DNS) serveTCP() {
	defer d.wg.Done()
	for {
		c, err := d.tcp.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			_ = c.Close()
			return
		}
		d.conns[c] = struct{}{}
		d.wg.Add(1)
		d.mu.Unlock()
		go d.serveConn(c)
	}
}

// serveConn answers length-prefixed queries on one TCP connection until the
// client closes it or d stops.
func (d *DNS) serveConn(c net.Conn) {
	defer d.wg.Done()
	defer func() {
		d.mu.Lock()
		delete(d.conns, c)
		d.mu.Unlock()
		_ = c.Close()
	}()
	var size [2]byte
	for {
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return
		}
		msg := make([]byte, binary.BigEndian.Uint16(size[:]))
		if _, err := io.ReadFull(c, msg); err != nil {
			return
		}
		resp := d.answer(msg)
		if resp == nil {
			return
		}
		out := binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(resp)), uint16(len(resp)))
		if _, err := c.Write(append(out, resp...)); err != nil {
			return
		}
	}
}

// answer builds the response to one query, or returns nil for a message
// that is not one.
func (d *DNS) answer(msg []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil || h.Response {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	addrs, known := d.records[normalize(q.Name.String())]
	rh := dnsmessage.Header{
		ID:                 h.ID,
		Response:           true,
		OpCode:             h.OpCode,
		Authoritative:      true,
		RecursionDesired:   h.RecursionDesired,
		RecursionAvailable: true,
	}
	if !known {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(q) != nil || b.StartAnswers() != nil {
		return nil
	}
	rr := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET}
	for _, a := range addrs {
		a = a.WithZone("")
		switch {
		case q.Type == dnsmessage.TypeA && a.Unmap().Is4():
			if b.AResource(rr, dnsmessage.AResource{A: a.Unmap().As4()}) != nil {
				return nil
			}
		case q.Type == dnsmessage.TypeAAAA && a.Is6() && !a.Is4In6():
			if b.AAAAResource(rr, dnsmessage.AAAAResource{AAAA: a.As16()}) != nil {
				return nil
			}
		}
	}
	resp, err := b.Finish()
	if err != nil {
		return nil
	}
	d.queries.Add(1)
	return resp
}

func normalize(name string) string {
	return strings.ToLower(strings.TrimSuffix(name, "."))
}
