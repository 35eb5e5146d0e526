package egress_test

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/exprd/exprd/internal/egress"
)

// TestParse lists one entry of each kind and checks it allows what Public
// refuses (and no more than it should).
func TestParse(t *testing.T) {
	t.Parallel()
	type probe struct {
		host  string
		addr  string
		allow bool
	}
	tests := []struct {
		name   string
		entry  string
		probes []probe
	}{
		{"IPv4", "10.1.2.3", []probe{{"", "10.1.2.3", true}, {"", "10.1.2.4", false}, {"", "::ffff:10.1.2.3", true}}},
		{"IPv6", "::1", []probe{{"", "::1", true}, {"", "127.0.0.1", false}}},
		{"IPv4-mapped IP is IPv4", "::ffff:10.1.2.3", []probe{{"", "10.1.2.3", true}, {"", "::ffff:10.1.2.3", true}}},
		{"IPv4 CIDR", "10.0.0.0/8", []probe{{"", "10.255.0.1", true}, {"", "11.0.0.1", true}, {"", "192.168.0.1", false}}},
		{"CIDR with host bits", "10.1.2.3/16", []probe{{"", "10.1.200.200", true}, {"", "10.2.0.1", false}}},
		{"IPv6 CIDR", "fd00::/8", []probe{{"", "fd12::1", true}, {"", "fd00:ec2::254", true}, {"", "fc00::1", false}}},
		{"IPv4-mapped CIDR is IPv4", "::ffff:10.0.0.0/104", []probe{{"", "10.9.9.9", true}, {"", "11.0.0.1", true}, {"", "192.168.0.1", false}}},
		{"name", "svc.ns.svc.cluster.local", []probe{
			{"svc.ns.svc.cluster.local", "10.0.0.7", true},
			{"SVC.NS.Svc.Cluster.Local.", "10.0.0.7", true},
			{"other.ns.svc.cluster.local", "10.0.0.7", false},
			{"", "10.0.0.7", false},
		}},
		{"name with trailing dot and capitals", "Svc.Example.", []probe{{"svc.example", "10.0.0.7", true}, {"svc.example.", "10.0.0.7", true}}},
		{"localhost", "localhost", []probe{{"localhost", "127.0.0.1", true}, {"", "127.0.0.1", false}}},
		{"wildcard", "*.svc.cluster.local", []probe{
			{"a.ns.svc.cluster.local", "10.0.0.1", true},
			{"b.svc.cluster.local", "10.0.0.1", true},
			{"svc.cluster.local", "10.0.0.1", false},
			{"evilsvc.cluster.local", "10.0.0.1", false},
			{"a.svc.cluster.local.evil.example", "10.0.0.1", false},
		}},
		{"loopback keyword", "loopback", []probe{
			{"", "127.0.0.1", true},
			{"", "127.8.9.10", true},
			{"", "::1", true},
			{"", "::ffff:127.0.0.1", true},
			{"localhost", "::1", true},
			{"", "169.254.169.254", false},
			{"", "10.0.0.1", false},
		}},
		{"loopback keyword, any case, spaces", "  LoopBack ", []probe{{"", "127.0.0.1", true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := egress.Parse([]string{tt.entry})
			if err != nil {
				t.Fatalf("Parse(%q): got error %v, want nil", tt.entry, err)
			}
			if got, want := p.Entries(), []string{tt.entry}; !slices.Equal(got, want) {
				t.Errorf("Entries: got %q, want %q", got, want)
			}
			for _, pr := range tt.probes {
				err := p.Check(pr.host, netip.MustParseAddr(pr.addr))
				if got := err == nil; got != pr.allow {
					t.Errorf("Check(%q, %s): got allowed %v (err %v), want %v", pr.host, pr.addr, got, err, pr.allow)
				}
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		entry   string
		wantErr string
	}{
		{"", "empty entry"},
		{"   ", "empty entry"},
		{"10.0.0.0/33", "bad CIDR"},
		{"10.0.0.0/", "bad CIDR"},
		{"fd00::/129", "bad CIDR"},
		{"example.com/8", "bad CIDR"},
		{"10.0.0.1:80", "has a port"},
		{"::1::2", "bad IP"},
		{"fe80::1%eth0", "zone"},
		{"10.0.0.256", "looks like an IP address"},
		{"10.0.0", "looks like an IP address"},
		{"exa_mple.com", "only [A-Za-z0-9.-]"},
		{"http://example.com", "a URL"},
		{"example.com:443", "has a port"},
		{"[::1]:443", "has a port"},
		{"[::1]", "bad IP"},
		{"bücher.example", "only [A-Za-z0-9.-]"},
		{"a b", "only [A-Za-z0-9.-]"},
		{"a..b", "empty label"},
		{".svc.cluster.local", "empty label"},
		{"*", "wildcard"},
		{"*.", "wildcard"},
		{"*.*.example.com", "wildcard"},
		{"a.*.example.com", "wildcard"},
		{"*example.com", "wildcard"},
		{"example.*", "wildcard"},
		{"**.example.com", "wildcard"},
		{".", "empty host name"},
		{strings.Repeat("a", 64) + ".example", "longer than 63"},
	}
	for _, tt := range tests {
		t.Run(tt.entry, func(t *testing.T) {
			t.Parallel()
			p, err := egress.Parse([]string{"10.0.0.0/8", tt.entry, "example.com"})
			if err == nil {
				t.Fatalf("Parse(%q): got policy %v, want an error", tt.entry, p.Entries())
			}
			if p != nil {
				t.Errorf("Parse(%q): got a policy with the error, want nil", tt.entry)
			}
			if got, want := err.Error(), `"`+tt.entry+`"`; !strings.Contains(got, want) {
				t.Errorf("Parse(%q): got error %q, want it to name the entry %s", tt.entry, got, want)
			}
			if got := err.Error(); !strings.Contains(got, tt.wantErr) {
				t.Errorf("Parse(%q): got error %q, want it to contain %q", tt.entry, got, tt.wantErr)
			}
		})
	}
}

func TestParseNilIsPublic(t *testing.T) {
	t.Parallel()
	for name, mk := range map[string]func() (*egress.Policy, error){
		"nil":    func() (*egress.Policy, error) { return egress.Parse(nil) },
		"empty":  func() (*egress.Policy, error) { return egress.Parse([]string{}) },
		"Public": func() (*egress.Policy, error) { return egress.Public(), nil },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, err := mk()
			if err != nil {
				t.Fatalf("got error %v, want nil", err)
			}
			if got := p.Entries(); len(got) != 0 {
				t.Errorf("Entries: got %q, want none", got)
			}
			if err := p.Check("", netip.MustParseAddr("8.8.8.8")); err != nil {
				t.Errorf("Check(8.8.8.8): got %v, want allowed", err)
			}
			if err := p.Check("localhost", netip.MustParseAddr("127.0.0.1")); err == nil {
				t.Errorf("Check(localhost, 127.0.0.1): got allowed, want refused")
			}
		})
	}
}

func TestEntriesIsACopy(t *testing.T) {
	t.Parallel()
	in := []string{"10.0.0.0/8", "svc.local"}
	p, err := egress.Parse(in)
	if err != nil {
		t.Fatal(err)
	}
	in[0] = "changed"
	got := p.Entries()
	got[1] = "changed too"
	if got, want := p.Entries(), []string{"10.0.0.0/8", "svc.local"}; !slices.Equal(got, want) {
		t.Errorf("Entries: got %q, want %q", got, want)
	}
}

func TestMustParse(t *testing.T) {
	t.Parallel()
	p := egress.MustParse("loopback", "10.0.0.0/8")
	if got, want := p.Entries(), []string{"loopback", "10.0.0.0/8"}; !slices.Equal(got, want) {
		t.Errorf("Entries: got %q, want %q", got, want)
	}
	if got := egress.MustParse().Entries(); len(got) != 0 {
		t.Errorf("MustParse().Entries(): got %q, want none", got)
	}
	defer func() {
		r := recover()
		err, ok := r.(error)
		if !ok || !strings.Contains(err.Error(), `"10.0.0.0/33"`) {
			t.Errorf("MustParse(bad): got panic %v, want an error naming the entry", r)
		}
	}()
	egress.MustParse("10.0.0.0/33")
	t.Errorf("MustParse(bad): got no panic, want one")
}
