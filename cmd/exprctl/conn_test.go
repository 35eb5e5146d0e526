package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"

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
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	now := time.Now()
	caKey := newKey()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "exprctl test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	srvKey := newKey()
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "exprd"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caPath = filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert := tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}
	return caPath, credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
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
