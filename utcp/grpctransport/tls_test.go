package grpctransport_test

import (
	"context"
	"crypto/tls"
	"reflect"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/exprd/exprd/gen/grpcpb"
	"github.com/exprd/exprd/internal/testkit/testcert"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/grpctransport"
)

func TestTLS(t *testing.T) {
	t.Parallel()
	cert, pool := testcert.SelfSigned(t, "127.0.0.1")
	p := newProvider()
	s := startServer(t, func(s *grpc.Server) { grpcpb.RegisterUTCPServiceServer(s, p) },
		grpc.Creds(credentials.NewServerTLSFromCert(&cert)))
	tmpl := mustJSON(t, s.template(map[string]any{"use_ssl": true}))

	t.Run("trusted", func(t *testing.T) {
		f, err := grpctransport.NewFactory(grpctransport.WithTLSConfig(&tls.Config{RootCAs: pool}))
		if err != nil {
			t.Fatal(err)
		}
		r := newRegistry(t, utcp.WithTransport(grpctransport.Type, f))
		if _, err := r.Register(context.Background(), "calc", utcp.FromTemplate(tmpl)); err != nil {
			t.Fatalf("Register: %v", err)
		}
		got, err := r.Call(context.Background(), "calc.add", map[string]any{"a": 1, "b": 2})
		if err != nil || !reflect.DeepEqual(got, map[string]any{"result": 3.0}) {
			t.Errorf("got %v, %v; want map[result:3]", got, err)
		}
	})
	t.Run("system roots", func(t *testing.T) {
		r := newRegistry(t)
		_, err := r.Register(context.Background(), "calc", utcp.FromTemplate(tmpl))
		if te := transportError(t, err); te.Reason != utcp.ReasonUnreachable {
			t.Errorf("got %s, want %s (the certificate is not trusted)", te.Reason, utcp.ReasonUnreachable)
		}
	})
	t.Run("plaintext to a TLS server", func(t *testing.T) {
		r := newRegistry(t)
		_, err := r.Register(context.Background(), "calc", utcp.FromTemplate(mustJSON(t, s.template(nil))))
		if te := transportError(t, err); te.Reason != utcp.ReasonUnreachable {
			t.Errorf("got %s, want %s", te.Reason, utcp.ReasonUnreachable)
		}
	})
}

func TestWithTLSConfigNil(t *testing.T) {
	t.Parallel()
	if _, err := grpctransport.NewFactory(grpctransport.WithTLSConfig(nil)); err == nil {
		t.Error("got no error for WithTLSConfig(nil)")
	}
}
