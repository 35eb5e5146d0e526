// Package testcert makes TLS certificates for tests: self-signed ones, and
// a CA that issues server and client certificates, in memory or written
// as PEM files for the flags that read them.
package testcert

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
)

// Cert is a certificate with its key; TLS.Leaf is set.
type Cert struct {
	TLS tls.Certificate
	key *ecdsa.PrivateKey
}

// SelfSigned is a certificate for hosts (IP addresses or DNS names),
// valid for an hour either side of now, and the pool that trusts it.
func SelfSigned(t testing.TB, hosts ...string) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	c := newCert(t, "exprd test", nil, hosts)
	return c.TLS, c.Pool()
}

// NewCA is a self-signed CA named name, valid for an hour either side of
// now.
func NewCA(t testing.TB, name string) *Cert {
	t.Helper()
	return newCert(t, name, nil, nil)
}

// Issue is a certificate named name for hosts, for servers and clients
// alike, that ca signed.
func (ca *Cert) Issue(t testing.TB, name string, hosts ...string) *Cert {
	t.Helper()
	return newCert(t, name, ca, hosts)
}

// Pool is a pool that trusts c (and what it signed, if c is a CA).
func (c *Cert) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(c.TLS.Leaf)
	return pool
}

// WritePEM writes c and its key into dir as name.pem and name-key.pem.
func (c *Cert) WritePEM(t testing.TB, dir, name string) (certPath, keyPath string) {
	t.Helper()
	kb, err := x509.MarshalECPrivateKey(c.key)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	for _, f := range []struct {
		path, kind string
		der        []byte
	}{{certPath, "CERTIFICATE", c.TLS.Certificate[0]}, {keyPath, "EC PRIVATE KEY", kb}} {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.kind, Bytes: f.der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return certPath, keyPath
}

// newCert is a certificate for hosts signed by parent, or self-signed and
// a CA when parent is nil.
func newCert(t testing.TB, name string, parent *Cert, hosts []string) *Cert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	signer, signerKey := tmpl, key
	if parent == nil {
		tmpl.IsCA, tmpl.KeyUsage = true, tmpl.KeyUsage|x509.KeyUsageCertSign
	} else {
		signer, signerKey = parent.TLS.Leaf, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &Cert{TLS: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, key: key}
}
