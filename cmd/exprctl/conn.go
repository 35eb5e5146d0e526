package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/exprd/exprd/client"
)

// connFlags say how every command reaches exprd. They may come before the
// command's name or after it.
type connFlags struct {
	addr  string
	token string
	tls   bool
	tlsCA string
}

// connFromEnv is the defaults: $EXPRCTL_ADDR (else defaultAddr) and
// $EXPRCTL_TOKEN.
func connFromEnv() connFlags {
	c := connFlags{addr: defaultAddr, token: strings.TrimSpace(os.Getenv("EXPRCTL_TOKEN"))}
	if v := os.Getenv("EXPRCTL_ADDR"); v != "" {
		c.addr = v
	}
	return c
}

func (c *connFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.addr, "addr", c.addr, "exprd's address, `HOST:PORT` (env EXPRCTL_ADDR)")
	fs.Var((*secretFlag)(&c.token), "token", "a bearer `TOKEN`, sent as \"authorization: Bearer TOKEN\" (env EXPRCTL_TOKEN, which keeps it out of ps)")
	fs.BoolVar(&c.tls, "tls", c.tls, "connect over TLS, checking the server's certificate against the system's roots")
	fs.StringVar(&c.tlsCA, "tls-ca", c.tlsCA, "connect over TLS, checking the server's certificate against the CA certificates (PEM) in `FILE`")
}

// secretFlag is a flag whose value --help never shows: a token from the
// environment stays off the screen.
type secretFlag string

func (*secretFlag) String() string { return "" }

func (s *secretFlag) Set(v string) error {
	*s = secretFlag(strings.TrimSpace(v))
	return nil
}

// dialOptions are the credentials the flags ask for. Without --tls the
// connection is plaintext (exprd on loopback, or behind a mesh that
// encrypts), and so is a --token sent on it.
func (c connFlags) dialOptions() ([]grpc.DialOption, error) {
	var opts []grpc.DialOption
	if c.tls || c.tlsCA != "" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if c.tlsCA != "" {
			pem, err := os.ReadFile(c.tlsCA)
			if err != nil {
				return nil, usagef("--tls-ca: %v", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, usagef("--tls-ca: no PEM certificate in %s", c.tlsCA)
			}
		}
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	}
	if c.token != "" {
		if strings.ContainsAny(c.token, " \t\r\n") {
			return nil, usagef("--token: a bearer token has no spaces or line breaks")
		}
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(c.token)))
	}
	return opts, nil
}

// bearer sends a token as the authorization metadata of every RPC.
type bearer string

var _ credentials.PerRPCCredentials = bearer("")

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

// RequireTransportSecurity is false: exprd is often served plaintext on
// loopback or inside a mesh, where a token still has to be sent.
func (bearer) RequireTransportSecurity() bool { return false }

// dial connects to the server the flags name.
func (e *env) dial() (*client.Client, error) {
	opts, err := e.conn.dialOptions()
	if err != nil {
		return nil, err
	}
	return client.Dial(e.conn.addr, append(opts, grpc.WithStatsHandler(&e.watch))...)
}

// connWatch notes what the connection got as far as: a transport made (TCP,
// and TLS when asked for) and an answer from the server. An Unavailable
// before either is the client's failure to get there, not the server's
// answer, and is told as such.
type connWatch struct {
	made, answered atomic.Bool
}

var _ stats.Handler = (*connWatch)(nil)

func (w *connWatch) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

func (w *connWatch) HandleRPC(_ context.Context, s stats.RPCStats) {
	switch s.(type) {
	case *stats.InHeader, *stats.InTrailer:
		w.answered.Store(true)
	}
}

func (w *connWatch) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

func (w *connWatch) HandleConn(_ context.Context, s stats.ConnStats) {
	if _, ok := s.(*stats.ConnBegin); ok {
		w.made.Store(true)
	}
}

// errorText puts a gRPC error as "Code: message", without grpc's prefix,
// and a connection that failed as what it is.
func (e *env) errorText(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return err.Error()
	}
	if st.Code() == codes.Unavailable && !e.watch.answered.Load() {
		if !e.watch.made.Load() {
			return fmt.Sprintf("the server at %s could not be reached: %s", e.conn.addr, st.Message())
		}
		hint := ""
		if !e.conn.tls && e.conn.tlsCA == "" {
			hint = " (if it serves TLS, add --tls or --tls-ca)"
		}
		return fmt.Sprintf("the connection to the server at %s failed%s: %s", e.conn.addr, hint, st.Message())
	}
	return fmt.Sprintf("%s: %s", st.Code(), st.Message())
}
