package main

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exprd/exprd/mcpserve"
	"github.com/exprd/exprd/utcp"
)

func TestMCPFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--mcp-max-body-bytes", "0"}, "mcp-max-body-bytes: 0, want a positive value"},
		{[]string{"--mcp-max-in-flight", "-1"}, "mcp-max-in-flight: -1, want a positive value"},
		{[]string{"--mcp-max-in-flight-per-caller", "0"}, "mcp-max-in-flight-per-caller: 0, want a positive value"},
		{[]string{"--mcp-page-size", "0"}, "mcp-page-size: 0, want a positive value"},
		{[]string{"--mcp-write-timeout", "0s"}, "mcp-write-timeout: 0s, want a positive duration"},
		{[]string{"--mcp-expose", "all"}, `mcp-expose: "all": want code, tools or both`},
		{[]string{"--mcp-expose", "both", "--mcp-listen", "127.0.0.1:0"}, ""},
	}
	for _, tt := range tests {
		_, err := parseConfig(tt.args, io.Discard)
		if (tt.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: %v, want %q", tt.args, err, tt.want)
		}
	}
}

// The endpoint serves where --mcp-listen says; off by default; the
// demo's address taken, the demo goes on without it, and an address
// asked for that is taken stops exprd.
func TestStartMCP(t *testing.T) {
	reg, err := utcp.New()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	log := slog.New(slog.DiscardHandler)
	c, err := parseConfig(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := startMCP(c, reg, nil, nil, log); m != nil || err != nil {
		t.Fatalf("off by default: %v, %v", m, err)
	}
	taken, err := net.Listen("tcp", demoMCPListen)
	if err != nil {
		t.Skipf("the demo's address: %v", err)
	}
	defer taken.Close()
	c.demo = true
	if m, err := startMCP(c, reg, nil, nil, log); m != nil || err != nil {
		t.Errorf("the demo's address taken: %v, %v; want no endpoint and no error", m, err)
	}
	c.mcp.listen = demoMCPListen
	if _, err := startMCP(c, reg, nil, nil, log); err == nil || !strings.Contains(err.Error(), "mcp-listen") {
		t.Errorf("an address asked for and taken: %v", err)
	}
	c.mcp.listen = "127.0.0.1:0"
	m, err := startMCP(c, reg, nil, nil, log)
	if err != nil || m == nil {
		t.Fatalf("127.0.0.1:0: %v, %v", m, err)
	}
	defer m.close()
	resp, err := http.Post("http://"+m.addr.String()+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest { // no Accept of both types: the SDK's 400, from the endpoint
		t.Errorf("POST /mcp: %d", resp.StatusCode)
	}
}

// --mcp-approval-key-file: a key of MinApprovalKeyBytes is taken (its
// trailing newline not counted), a shorter one or a missing file stops
// exprd.
func TestMCPApprovalKeyFile(t *testing.T) {
	reg, err := utcp.New()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		file string
		want string
	}{
		{write("ok", strings.Repeat("k", mcpserve.MinApprovalKeyBytes)+"\n"), ""},
		{write("short", strings.Repeat("k", mcpserve.MinApprovalKeyBytes-1)+"\n"), "want at least 32"},
		{filepath.Join(dir, "missing"), "mcp-approval-key-file"},
	} {
		c, err := parseConfig([]string{"--mcp-listen", "127.0.0.1:0", "--mcp-approval-key-file", tc.file}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		m, err := startMCP(c, reg, nil, nil, slog.New(slog.DiscardHandler))
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", filepath.Base(tc.file), err, tc.want)
		}
		if m != nil {
			m.close()
		}
	}
}
