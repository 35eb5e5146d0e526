package egresstest_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/exprd/exprd/internal/testkit/egresstest"
)

func TestDNSResolves(t *testing.T) {
	t.Parallel()
	d := egresstest.StartDNS(t, map[string][]netip.Addr{
		"one.test":    {netip.MustParseAddr("127.0.0.1")},
		"both.test":   {netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("::1")},
		"mapped.test": {netip.MustParseAddr("::ffff:10.0.0.1")},
		"Upper.Test.": {netip.MustParseAddr("192.0.2.1")},
		"v6.test":     {netip.MustParseAddr("fd00:ec2::254")},
	})
	r := d.Resolver()
	tests := []struct {
		name    string
		network string // "ip", "ip4" or "ip6"
		want    []string
	}{
		{"one.test", "ip", []string{"127.0.0.1"}},
		{"both.test", "ip", []string{"169.254.169.254", "::1"}},
		{"both.test", "ip4", []string{"169.254.169.254"}},
		{"both.test", "ip6", []string{"::1"}},
		{"mapped.test", "ip4", []string{"10.0.0.1"}},
		{"upper.test", "ip", []string{"192.0.2.1"}},
		{"UPPER.TEST.", "ip", []string{"192.0.2.1"}},
		{"v6.test", "ip", []string{"fd00:ec2::254"}},
	}
	for _, tt := range tests {
		t.Run(tt.name+"/"+tt.network, func(t *testing.T) {
			t.Parallel()
			addrs, err := r.LookupNetIP(context.Background(), tt.network, tt.name)
			if err != nil {
				t.Fatalf("LookupNetIP(%s, %s): got %v, want %v", tt.network, tt.name, err, tt.want)
			}
			var got []string
			for _, a := range addrs {
				got = append(got, a.String())
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tt.want))
			if !slices.Equal(got, want) {
				t.Errorf("LookupNetIP(%s, %s): got %v, want %v", tt.network, tt.name, got, want)
			}
		})
	}
}

func TestDNSUnknownName(t *testing.T) {
	t.Parallel()
	d := egresstest.StartDNS(t, map[string][]netip.Addr{"known.test": {netip.MustParseAddr("127.0.0.1")}})
	before := d.Queries()
	_, err := d.Resolver().LookupNetIP(context.Background(), "ip", "unknown.test")
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Fatalf("LookupNetIP(unknown.test): got %v, want a not-found *net.DNSError", err)
	}
	if got := d.Queries(); got <= before {
		t.Errorf("Queries: got %d after a lookup, want more than %d", got, before)
	}
}

// TestDNSTCP asks over TCP, as a resolver does after a truncated answer.
func TestDNSTCP(t *testing.T) {
	t.Parallel()
	d := egresstest.StartDNS(t, map[string][]netip.Addr{"tcp.test": {netip.MustParseAddr("127.0.0.2")}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := d.Resolver().Dial(ctx, "tcp", "ignored:53")
	if err != nil {
		t.Fatalf("Dial tcp: %v", err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}

	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7, RecursionDesired: true})
	_ = b.StartQuestions()
	_ = b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName("tcp.test."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	q, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(binary.BigEndian.AppendUint16(nil, uint16(len(q)))); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(q); err != nil {
		t.Fatal(err)
	}
	var size [2]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		t.Fatalf("reading the answer's length: %v", err)
	}
	resp := make([]byte, binary.BigEndian.Uint16(size[:]))
	if _, err := io.ReadFull(c, resp); err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	var m dnsmessage.Message
	if err := m.Unpack(resp); err != nil {
		t.Fatalf("Unpack: %v", err)
	}
	if m.ID != 7 || !m.Response || m.RCode != dnsmessage.RCodeSuccess {
		t.Errorf("header: got ID %d response %v rcode %v, want 7 true success", m.ID, m.Response, m.RCode)
	}
	if len(m.Answers) != 1 {
		t.Fatalf("answers: got %d, want 1", len(m.Answers))
	}
	a, ok := m.Answers[0].Body.(*dnsmessage.AResource)
	if !ok {
		t.Fatalf("answer: got %T, want *dnsmessage.AResource", m.Answers[0].Body)
	}
	if got, want := netip.AddrFrom4(a.A), netip.MustParseAddr("127.0.0.2"); got != want {
		t.Errorf("answer: got %s, want %s", got, want)
	}
	if got := d.Queries(); got != 1 {
		t.Errorf("Queries: got %d, want 1", got)
	}
}
