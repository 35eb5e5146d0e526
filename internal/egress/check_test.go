package egress_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/exprd/exprd/internal/egress"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		entries []string // nil: Public
		host    string
		addr    string
		wantWhy string // "": allowed
	}{
		// Every refused range, under Public.
		{name: "unspecified v4", addr: "0.0.0.0", wantWhy: "unspecified"},
		{name: "this network", addr: "0.1.2.3", wantWhy: "0.0.0.0/8"},
		{name: "private 10/8", addr: "10.0.0.1", wantWhy: "private"},
		{name: "private 10/8 top", addr: "10.255.255.255", wantWhy: "private"},
		{name: "CGNAT", addr: "100.64.0.1", wantWhy: "carrier-grade NAT"},
		{name: "CGNAT top", addr: "100.127.255.255", wantWhy: "carrier-grade NAT"},
		{name: "loopback v4", addr: "127.0.0.1", wantWhy: "loopback"},
		{name: "loopback v4 other", addr: "127.255.255.254", wantWhy: "loopback"},
		{name: "cloud metadata v4", addr: "169.254.169.254", wantWhy: "link-local (cloud metadata"},
		{name: "link-local v4", addr: "169.254.0.1", wantWhy: "link-local"},
		{name: "private 172.16/12", addr: "172.16.0.1", wantWhy: "private"},
		{name: "private 172.16/12 top", addr: "172.31.255.255", wantWhy: "private"},
		{name: "IETF protocol assignments", addr: "192.0.0.8", wantWhy: "IETF protocol assignments"},
		{name: "TEST-NET-1", addr: "192.0.2.1", wantWhy: "documentation"},
		{name: "private 192.168/16", addr: "192.168.1.1", wantWhy: "private"},
		{name: "benchmarking", addr: "198.18.0.1", wantWhy: "benchmarking"},
		{name: "benchmarking top", addr: "198.19.255.255", wantWhy: "benchmarking"},
		{name: "TEST-NET-2", addr: "198.51.100.7", wantWhy: "documentation"},
		{name: "TEST-NET-3", addr: "203.0.113.9", wantWhy: "documentation"},
		{name: "multicast v4", addr: "224.0.0.1", wantWhy: "multicast"},
		{name: "multicast v4 SSDP", addr: "239.255.255.250", wantWhy: "multicast"},
		{name: "reserved 240/4", addr: "240.0.0.1", wantWhy: "reserved"},
		{name: "broadcast", addr: "255.255.255.255", wantWhy: "broadcast"},
		{name: "unspecified v6", addr: "::", wantWhy: "unspecified"},
		{name: "loopback v6", addr: "::1", wantWhy: "loopback"},
		{name: "IPv4-compatible", addr: "::7f00:1", wantWhy: "IPv4-compatible"},
		{name: "link-local v6", addr: "fe80::1", wantWhy: "link-local"},
		{name: "link-local v6 with zone", addr: "fe80::1%eth0", wantWhy: "link-local"},
		{name: "unique local fc", addr: "fc00::1", wantWhy: "private"},
		{name: "unique local fd", addr: "fd12:3456::1", wantWhy: "private"},
		{name: "cloud metadata v6", addr: "fd00:ec2::254", wantWhy: "cloud metadata"},
		{name: "site-local", addr: "fec0::1", wantWhy: "site-local"},
		{name: "multicast v6", addr: "ff02::1", wantWhy: "multicast"},
		{name: "NAT64 of metadata", addr: "64:ff9b::a9fe:a9fe", wantWhy: "NAT64"},
		{name: "local-use NAT64", addr: "64:ff9b:1::a00:1", wantWhy: "NAT64"},
		{name: "6to4 of metadata", addr: "2002:a9fe:a9fe::1", wantWhy: "6to4"},
		{name: "Teredo", addr: "2001::1", wantWhy: "Teredo"},
		{name: "documentation v6", addr: "2001:db8::1", wantWhy: "documentation"},
		{name: "discard-only", addr: "100::1", wantWhy: "discard-only"},
		// IPv4-mapped IPv6 is judged as IPv4.
		{name: "mapped metadata", addr: "::ffff:169.254.169.254", wantWhy: "link-local"},
		{name: "mapped loopback", addr: "::ffff:127.0.0.1", wantWhy: "loopback"},
		{name: "mapped private", addr: "::ffff:10.0.0.1", wantWhy: "private"},
		{name: "mapped public", addr: "::ffff:8.8.8.8"},
		// Public addresses, including the neighbours of refused ranges.
		{name: "public v4", addr: "8.8.8.8"},
		{name: "public v4 with host", host: "dns.google", addr: "8.8.4.4"},
		{name: "above 172.16/12", addr: "172.32.0.1"},
		{name: "above CGNAT", addr: "100.128.0.1"},
		{name: "below 240/4", addr: "223.255.255.255"},
		{name: "public v6", addr: "2606:4700:4700::1111"},
		{name: "public v6 under 2001::/16, not Teredo", addr: "2001:4860:4860::8888"},
		// Listed IPs and CIDRs.
		{name: "listed CIDR allows private", entries: []string{"10.0.0.0/8"}, addr: "10.1.2.3"},
		{name: "listed CIDR allows mapped private", entries: []string{"10.0.0.0/8"}, addr: "::ffff:10.1.2.3"},
		{name: "listed CIDR, other private", entries: []string{"10.0.0.0/8"}, addr: "192.168.1.1", wantWhy: "private"},
		{name: "listed CIDR, public still allowed", entries: []string{"10.0.0.0/8"}, addr: "8.8.8.8"},
		{name: "listed IP", entries: []string{"10.1.2.3"}, host: "10.1.2.3", addr: "10.1.2.3"},
		{name: "listed IP, neighbour", entries: []string{"10.1.2.3"}, addr: "10.1.2.4", wantWhy: "private"},
		{name: "listed v6 CIDR covers metadata", entries: []string{"fd00::/8"}, addr: "fd00:ec2::254"},
		{name: "listed metadata IP", entries: []string{"169.254.169.254"}, addr: "169.254.169.254"},
		// Listed names and wildcards.
		{name: "listed name allows private", entries: []string{"svc.ns.svc.cluster.local"}, host: "svc.ns.svc.cluster.local", addr: "10.0.0.7"},
		{name: "listed name, any case, trailing dot", entries: []string{"svc.ns.svc.cluster.local"}, host: "Svc.NS.svc.cluster.local.", addr: "10.0.0.7"},
		{name: "listed name, other name", entries: []string{"svc.ns.svc.cluster.local"}, host: "db.ns.svc.cluster.local", addr: "10.0.0.8", wantWhy: "private"},
		{name: "listed name allows whatever it resolves to", entries: []string{"metadata.internal"}, host: "metadata.internal", addr: "169.254.169.254"},
		{name: "wildcard match", entries: []string{"*.svc.cluster.local"}, host: "api.ns.svc.cluster.local", addr: "10.0.0.9"},
		{name: "wildcard, bare suffix", entries: []string{"*.svc.cluster.local"}, host: "svc.cluster.local", addr: "10.0.0.9", wantWhy: "private"},
		{name: "wildcard, suffix without dot", entries: []string{"*.svc.cluster.local"}, host: "evilsvc.cluster.local", addr: "10.0.0.9", wantWhy: "private"},
		{name: "wildcard, suffix in the middle", entries: []string{"*.svc.cluster.local"}, host: "x.svc.cluster.local.evil.example", addr: "10.0.0.9", wantWhy: "private"},
		{name: "IP-literal host does not match a name", entries: []string{"svc.local"}, host: "10.0.0.1", addr: "10.0.0.1", wantWhy: "private"},
		// The loopback keyword.
		{name: "loopback keyword v4", entries: []string{"loopback"}, addr: "127.0.0.1"},
		{name: "loopback keyword 127/8", entries: []string{"loopback"}, addr: "127.1.2.3"},
		{name: "loopback keyword v6", entries: []string{"loopback"}, addr: "::1"},
		{name: "loopback keyword mapped", entries: []string{"loopback"}, addr: "::ffff:127.0.0.1"},
		{name: "loopback keyword localhost name", entries: []string{"loopback"}, host: "localhost", addr: "127.0.0.1"},
		{name: "loopback keyword, metadata", entries: []string{"loopback"}, addr: "169.254.169.254", wantWhy: "link-local"},
		{name: "loopback keyword, unspecified", entries: []string{"loopback"}, addr: "0.0.0.0", wantWhy: "unspecified"},
		{name: "loopback keyword, private", entries: []string{"loopback"}, addr: "10.0.0.1", wantWhy: "private"},
		// Not an address.
		{name: "invalid addr", addr: "", wantWhy: "not a valid IP address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := egress.Parse(tt.entries)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.entries, err)
			}
			var addr netip.Addr
			if tt.addr != "" {
				addr = netip.MustParseAddr(tt.addr)
			}
			err = p.Check(tt.host, addr)
			if tt.wantWhy == "" {
				if err != nil {
					t.Fatalf("Check(%q, %s): got %v, want allowed", tt.host, tt.addr, err)
				}
				return
			}
			var e *egress.Error
			if !errors.As(err, &e) {
				t.Fatalf("Check(%q, %s): got %v (%T), want an *egress.Error", tt.host, tt.addr, err, err)
			}
			if !strings.Contains(e.Why, tt.wantWhy) {
				t.Errorf("Check(%q, %s): got Why %q, want it to contain %q", tt.host, tt.addr, e.Why, tt.wantWhy)
			}
			if e.Host != tt.host || e.Addr != addr {
				t.Errorf("Check(%q, %s): got Host %q Addr %s, want %q %s", tt.host, tt.addr, e.Host, e.Addr, tt.host, addr)
			}
			if !strings.Contains(err.Error(), "--egress-allow") {
				t.Errorf("Check(%q, %s): got message %q, want it to name --egress-allow", tt.host, tt.addr, err)
			}
		})
	}
}

// TestInvalidPolicyRefuses: nil and zero policies fail closed.
func TestInvalidPolicyRefuses(t *testing.T) {
	t.Parallel()
	for name, p := range map[string]*egress.Policy{"nil": nil, "zero": {}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var e *egress.Error
			if err := p.Check("", netip.MustParseAddr("8.8.8.8")); !errors.As(err, &e) || !strings.Contains(e.Why, "no egress policy") {
				t.Errorf("Check(8.8.8.8): got %v, want an *egress.Error saying no egress policy", err)
			}
			if err := p.CheckHost("example.com"); !errors.As(err, &e) {
				t.Errorf("CheckHost(example.com): got %v, want an *egress.Error", err)
			}
			if p.PlaintextAllowed("localhost") {
				t.Errorf("PlaintextAllowed(localhost): got true, want false")
			}
			if got := p.Entries(); len(got) != 0 {
				t.Errorf("Entries: got %q, want none", got)
			}
		})
	}
}

func TestErrorMessage(t *testing.T) {
	t.Parallel()
	metadata := netip.MustParseAddr("169.254.169.254")
	tests := []struct {
		name string
		err  *egress.Error
		want string
	}{
		{
			name: "address only",
			err:  &egress.Error{Addr: metadata, Why: "link-local (cloud metadata lives there)"},
			want: "egress refused: 169.254.169.254 is link-local (cloud metadata lives there); list it in --egress-allow to allow it",
		},
		{
			name: "IP literal host",
			err:  &egress.Error{Host: "169.254.169.254", Addr: metadata, Why: "link-local (cloud metadata lives there)"},
			want: "egress refused: 169.254.169.254 is link-local (cloud metadata lives there); list it in --egress-allow to allow it",
		},
		{
			name: "name",
			err:  &egress.Error{Host: "metadata.google.internal", Addr: metadata, Why: "link-local (cloud metadata lives there)"},
			want: "egress refused: metadata.google.internal resolves to 169.254.169.254, which is link-local (cloud metadata lives there); list the name or the address in --egress-allow to allow it",
		},
		{
			name: "plaintext",
			err:  &egress.Error{Host: "api.example.com", Why: "not listed for plaintext"},
			want: "egress refused: api.example.com is not listed for plaintext; list it in --egress-allow to allow it",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error():\ngot  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestPlaintextAllowed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		entries []string
		host    string
		want    bool
	}{
		{"public name", nil, "example.com", false},
		{"public IP", nil, "8.8.8.8", false},
		{"localhost unlisted", nil, "localhost", false},
		{"empty host", nil, "", false},
		{"loopback: localhost", []string{"loopback"}, "localhost", true},
		{"loopback: LOCALHOST.", []string{"loopback"}, "LOCALHOST.", true},
		{"loopback: 127.0.0.1", []string{"loopback"}, "127.0.0.1", true},
		{"loopback: [::1]", []string{"loopback"}, "[::1]", true},
		{"loopback: ::1", []string{"loopback"}, "::1", true},
		{"loopback: mapped", []string{"loopback"}, "::ffff:127.0.0.1", true},
		{"loopback: sub.localhost", []string{"loopback"}, "sub.localhost", false},
		{"loopback: public name", []string{"loopback"}, "example.com", false},
		{"CIDR: inside", []string{"10.0.0.0/8"}, "10.1.1.1", true},
		{"CIDR: outside", []string{"10.0.0.0/8"}, "11.0.0.1", false},
		{"CIDR: name", []string{"10.0.0.0/8"}, "svc.local", false},
		{"listed public IP", []string{"8.8.8.8"}, "8.8.8.8", true},
		{"name", []string{"api.example.com"}, "api.example.com", true},
		{"name, case and dot", []string{"api.example.com"}, "API.Example.com.", true},
		{"name, subdomain", []string{"api.example.com"}, "x.api.example.com", false},
		{"wildcard: match", []string{"*.example.com"}, "a.example.com", true},
		{"wildcard: bare suffix", []string{"*.example.com"}, "example.com", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := egress.Parse(tt.entries)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.entries, err)
			}
			if got := p.PlaintextAllowed(tt.host); got != tt.want {
				t.Errorf("PlaintextAllowed(%q) under %q: got %v, want %v", tt.host, tt.entries, got, tt.want)
			}
		})
	}
}

func TestCheckHost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		entries []string
		host    string
		wantWhy string // "": nil
	}{
		{"metadata IP", nil, "169.254.169.254", "link-local"},
		{"mapped metadata", nil, "::ffff:169.254.169.254", "link-local"},
		{"bracketed loopback v6", nil, "[::1]", "loopback"},
		{"loopback v6", nil, "::1", "loopback"},
		{"bracketed metadata v6", nil, "[fd00:ec2::254]", "cloud metadata"},
		{"private IP", nil, "10.0.0.1", "private"},
		{"unspecified", nil, "0.0.0.0", "unspecified"},
		{"localhost", nil, "localhost", "loopback"},
		{"LocalHost.", nil, "LocalHost.", "loopback"},
		{"sub.localhost", nil, "app.localhost", "loopback"},
		{"empty host", nil, "", "loopback"},
		{"public IP", nil, "8.8.8.8", ""},
		{"public v6", nil, "[2606:4700:4700::1111]", ""},
		{"name: checked when dialed", nil, "example.com", ""},
		{"metadata name: checked when dialed", nil, "metadata.google.internal", ""},
		{"localhost-ish name", nil, "localhost.example.com", ""},
		{"loopback: localhost", []string{"loopback"}, "localhost", ""},
		{"loopback: 127.0.0.1", []string{"loopback"}, "127.0.0.1", ""},
		{"loopback: sub.localhost", []string{"loopback"}, "app.localhost", ""},
		{"loopback: metadata", []string{"loopback"}, "169.254.169.254", "link-local"},
		{"CIDR", []string{"10.0.0.0/8"}, "10.2.3.4", ""},
		{"listed localhost name", []string{"localhost"}, "localhost", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := egress.Parse(tt.entries)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.entries, err)
			}
			err = p.CheckHost(tt.host)
			if tt.wantWhy == "" {
				if err != nil {
					t.Errorf("CheckHost(%q): got %v, want nil", tt.host, err)
				}
				return
			}
			var e *egress.Error
			if !errors.As(err, &e) {
				t.Fatalf("CheckHost(%q): got %v, want an *egress.Error", tt.host, err)
			}
			if !strings.Contains(e.Why, tt.wantWhy) {
				t.Errorf("CheckHost(%q): got Why %q, want it to contain %q", tt.host, e.Why, tt.wantWhy)
			}
			if e.Host != tt.host {
				t.Errorf("CheckHost(%q): got Host %q, want %q", tt.host, e.Host, tt.host)
			}
		})
	}
}
