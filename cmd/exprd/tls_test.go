package main

import (
	"context"
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

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/server"
)

type keyPair struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	der  []byte
}

func newCert(t *testing.T, name string, parent *keyPair, isCA bool) *keyPair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		IsCA:        isCA, BasicConstraintsValid: true,
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &keyPair{cert: cert, key: key, der: der}
}

func (k *keyPair) write(t *testing.T, dir, name string) (certPath, keyPath string) {
	t.Helper()
	certPath, keyPath = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	kb, _ := x509.MarshalECPrivateKey(k.key)
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: k.der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certPath, keyPath
}

// With --tls-client-ca, a client must show a certificate the CA signed.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newCert(t, "exprd test CA", nil, true)
	caPath, _ := ca.write(t, dir, "ca")
	srvCert, srvKey := newCert(t, "exprd", ca, false).write(t, dir, "server")
	client := newCert(t, "backend", ca, false)
	stranger := newCert(t, "stranger", newCert(t, "other CA", nil, true), false)

	c := config{tlsCert: srvCert, tlsKey: srvKey, tlsClientCA: caPath}
	creds, err := c.transportCredentials()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	describe := func(kp *keyPair) error {
		cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if kp != nil {
			cfg.Certificates = []tls.Certificate{{Certificate: [][]byte{kp.der}, PrivateKey: kp.key}}
		}
		conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			return err
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = exprdv1.NewExprToolClient(conn).Describe(ctx, &exprdv1.DescribeRequest{})
		return err
	}
	if err := describe(client); err != nil {
		t.Errorf("a client with a certificate from the CA: %v", err)
	}
	if err := describe(nil); err == nil {
		t.Error("a client without a certificate got through")
	}
	if err := describe(stranger); err == nil {
		t.Error("a client with another CA's certificate got through")
	}
}
