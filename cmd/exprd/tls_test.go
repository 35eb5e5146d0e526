package main

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/internal/testkit/testcert"
	"github.com/exprd/exprd/server"
)

// With --tls-client-ca, a client must show a certificate the CA signed.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, "exprd test CA")
	caPath, _ := ca.WritePEM(t, dir, "ca")
	srvCert, srvKey := ca.Issue(t, "exprd", "127.0.0.1").WritePEM(t, dir, "server")
	client := ca.Issue(t, "backend", "127.0.0.1")
	stranger := testcert.NewCA(t, "other CA").Issue(t, "stranger", "127.0.0.1")

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

	describe := func(c *testcert.Cert) error {
		cfg := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
		if c != nil {
			cfg.Certificates = []tls.Certificate{c.TLS}
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
