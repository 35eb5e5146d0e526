package main

import (
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc/credentials"

	"github.com/exprd/exprd/internal/testkit/testcert"
	"github.com/exprd/exprd/server"
)

// closedAddr is a loopback address nothing listens on any more.
func closedAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	if err := lis.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// Every command says when it cannot reach the server, naming it.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	addr := closedAddr(t)
	for _, tc := range []struct {
		cmd  string
		args []string
	}{
		{"describe", []string{"describe"}},
		{"expr", []string{"expr", "--call", `{}`}},
		{"call", []string{"call", "--call", `{}`}},
		{"agent", []string{"agent", "--prompt", "hi"}},
		{"codemode run", []string{"codemode", "run", "--code", "1"}},
		{"tools list", []string{"tools", "list"}},
		{"tools search", []string{"tools", "search", "add"}},
		{"tools register", []string{"tools", "register", "x", "--url", "https://x.example/utcp"}},
		{"tools deregister", []string{"tools", "deregister", "x"}},
	} {
		t.Run(tc.cmd, func(t *testing.T) {
			t.Parallel()
			got := runCmd("", append([]string{"--addr", addr}, tc.args...)...)
			check(t, got, exitError, "", "exprctl "+tc.cmd+": the server at "+addr+" could not be reached: ")
		})
	}
}

// writeTLS writes a CA and a server certificate it signed for 127.0.0.1,
// and returns the CA's path and the server's credentials.
func writeTLS(t *testing.T, dir string) (caPath string, creds credentials.TransportCredentials) {
	t.Helper()
	ca := testcert.NewCA(t, "exprctl test CA")
	caPath, _ = ca.WritePEM(t, dir, "ca")
	srv := ca.Issue(t, "exprd", "127.0.0.1")
	return caPath, credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{srv.TLS}, MinVersion: tls.VersionTLS12})
}

func TestTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	caPath, creds := writeTLS(t, dir)
	tlsAddr := startTools(t, server.WithTransportCredentials(creds))
	plainAddr := startTools(t)
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{
			name:       "--tls-ca",
			args:       []string{"--addr", tlsAddr, "--tls-ca", caPath, "tools", "list"},
			wantStdout: demoTools,
		},
		{
			name:       "--tls-ca after the command, with --tls",
			args:       []string{"codemode", "run", "--code", "1 + 1", "--addr", tlsAddr, "--tls", "--tls-ca", caPath},
			wantStdout: "value 2\n",
		},
		{
			name:       "--tls: the system's roots do not know the CA",
			args:       []string{"--addr", tlsAddr, "--tls", "tools", "list"},
			wantCode:   exitError,
			wantStderr: "exprctl tools list: the server at " + tlsAddr + " could not be reached: ",
		},
		{
			name:       "plaintext to a TLS server",
			args:       []string{"--addr", tlsAddr, "tools", "list"},
			wantCode:   exitError,
			wantStderr: "exprctl tools list: the connection to the server at " + tlsAddr + " failed (if it serves TLS, add --tls or --tls-ca): ",
		},
		{
			name:       "TLS to a plaintext server",
			args:       []string{"--addr", plainAddr, "--tls-ca", caPath, "tools", "list"},
			wantCode:   exitError,
			wantStderr: "exprctl tools list: the server at " + plainAddr + " could not be reached: ",
		},
		{
			name:       "--tls-ca missing",
			args:       []string{"--addr", tlsAddr, "--tls-ca", filepath.Join(dir, "missing.pem"), "tools", "list"},
			wantCode:   exitUsage,
			wantStderr: "exprctl tools list: --tls-ca: open ",
		},
		{
			name:       "--tls-ca not PEM",
			args:       []string{"--addr", tlsAddr, "--tls-ca", notPEM, "tools", "list"},
			wantCode:   exitUsage,
			wantStderr: "exprctl tools list: --tls-ca: no PEM certificate in " + notPEM,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			check(t, runCmd("", tc.args...), tc.wantCode, tc.wantStdout, tc.wantStderr)
		})
	}
}
