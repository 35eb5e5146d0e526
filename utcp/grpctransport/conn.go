package grpctransport

import (
	"context"
	"crypto/tls"
	"errors"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"io"
	"net"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/exprd/exprd/gen/grpcpb"
	"github.com/exprd/exprd/internal/egress"
	"github.com/exprd/exprd/utcp"
)

// userAgent prefixes grpc-go's own user agent on every connection.
const userAgent = "exprd-utcp"

// sharedConn is one provider's connection, kept in the registry's
// Env.Shared and closed with it.
type sharedConn struct {
	cc   *grpc.ClientConn
	utcp grpcpb.UTCPServiceClient
	// refused is the egress policy's refusal of the last dial, nil once a
	// dial gets through: gRPC reports a refused dial as UNAVAILABLE, like
	// any other, and this tells the two apart.
	refused atomic.Pointer[egress.Error]
}

func (c *sharedConn) Close() error { return c.cc.Close() }

// conns finds a template's connection: the one the registry shares for the
// same address and security, opened on first use.
type conns struct {
	spec   *spec
	env    utcp.Env
	tls    *tls.Config
	cached atomic.Pointer[sharedConn]
}

// get returns the connection, refusing plaintext to a host the operator did
// not allow.
func (c *conns) get(tool string) (*sharedConn, error) {
	if sc := c.cached.Load(); sc != nil {
		return sc, nil
	}
	if !c.spec.useSSL && !c.env.PlaintextAllowed(c.spec.host) {
		return nil, &utcp.TransportError{Tool: tool, Reason: utcp.ReasonInsecureURL,
			Body: "set use_ssl: true in the call template to reach this host over TLS"}
	}
	if err := c.env.CheckHost(c.spec.host); err != nil {
		return nil, utcp.EgressError(tool, err)
	}
	cl, err := c.env.Shared.Get(c.key(), c.dial)
	if err != nil {
		// The registry is closed, or the address does not parse.
		return nil, &utcp.TransportError{Tool: tool, Reason: utcp.ReasonUnreachable}
	}
	sc, ok := cl.(*sharedConn)
	if !ok {
		return nil, &utcp.TransportError{Tool: tool, Reason: utcp.ReasonUnreachable}
	}
	c.cached.Store(sc)
	c.spec.conn.Store(sc)
	return sc, nil
}

// key names the connection in Env.Shared: one per address and security.
func (c *conns) key() string {
	mode := "plain"
	if c.spec.useSSL {
		mode = "tls"
	}
	return "grpctransport/" + mode + "/" + c.spec.addr
}

// dial builds the client; grpc.NewClient does no I/O, the connection is made
// by the first RPC and kept (and re-made) by grpc-go.
func (c *conns) dial() (io.Closer, error) {
	var creds credentials.TransportCredentials
	if c.spec.useSSL {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if c.tls != nil {
			cfg = c.tls.Clone()
			cfg.MinVersion = max(cfg.MinVersion, tls.VersionTLS12)
		}
		creds = credentials.NewTLS(cfg) // ServerName defaults to the target's host
	} else {
		creds = insecure.NewCredentials()
	}
	limit := c.env.MaxResponseBytes
	if limit <= 0 {
		limit = utcp.DefaultMaxResponseBytes
	}
	sc := &sharedConn{}
	// passthrough: the egress dialer, not gRPC's resolver, resolves the
	// host, so the policy sees the name it lists and judges every address.
	cc, err := grpc.NewClient("passthrough:///"+c.spec.addr,
		grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			conn, err := c.env.DialContext(ctx, "tcp", addr)
			var ee *egress.Error
			switch {
			case errors.As(err, &ee):
				sc.refused.Store(ee)
			case err == nil:
				sc.refused.Store(nil)
			}
			return conn, err
		}),
		grpc.WithUserAgent(userAgent),
		// A span per call, and the caller's trace context sent on to the
		// provider, with OpenTelemetry's global providers.
		grpc.WithStatsHandler(otelgrpc.NewClientHandler()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(int(limit))),
	)
	if err != nil {
		return nil, err
	}
	sc.cc, sc.utcp = cc, grpcpb.NewUTCPServiceClient(cc)
	return sc, nil
}

// outgoing adds the template's metadata (target, auth) to ctx.
func (s *spec) outgoing(ctx context.Context) context.Context {
	if len(s.md) == 0 {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, s.md...)
}
