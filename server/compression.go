package server

import (
	"context"
	"fmt"
	"sync/atomic"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"

	"github.com/exprd/exprd/server/internal/rpcstatus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/stats"
)

// Compressed messages. grpc-go decompresses every message whose
// grpc-encoding names a compressor registered in the process, and gzip
// is (the OTLP exporters import it): a 16 KB message inflates to 16 MiB,
// which the receive gate, reading its length, would not count. So unless
// the operator turns it on (WithCompressedMessages), a call whose
// grpc-encoding is anything but identity is refused UNIMPLEMENTED before
// its first message is read. When it is on, the gate reserves for each
// compressed message the most it may inflate to (recvgate.WithCompressed)
// before grpc-go may decompress it.
//
// grpc-go does not give the tap a stream's grpc-encoding (it is not in
// tap.Info.Header), so the refusal is made where a call starts, before it
// reads: the first stream interceptor for streams, and a wrapper of each
// unary method's handler (which reads its request before any unary
// interceptor runs) for the services the server registers. A service
// registered on GRPC() directly gets the stream check, not the unary one.

// encodingKey holds a call's grpc-encoding, as the stats handler saw it.
type encodingKey struct{}

// encodingStats is the stats.Handler that records each call's
// grpc-encoding (InHeader comes before its handler starts).
type encodingStats struct{}

func (encodingStats) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, encodingKey{}, new(atomic.Pointer[string]))
}

func (encodingStats) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if h, ok := s.(*stats.InHeader); ok && !h.Client {
		if p, ok := ctx.Value(encodingKey{}).(*atomic.Pointer[string]); ok {
			p.Store(&h.Compression)
		}
	}
}

func (encodingStats) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (encodingStats) HandleConn(context.Context, stats.ConnStats)                       {}

// callEncoding is the grpc-encoding of ctx's call ("" when it has none).
func callEncoding(ctx context.Context) string {
	if p, ok := ctx.Value(encodingKey{}).(*atomic.Pointer[string]); ok {
		if e := p.Load(); e != nil {
			return *e
		}
	}
	return ""
}

// checkEncoding refuses a call whose messages are compressed, unless the
// server takes them.
func (s *Server) checkEncoding(ctx context.Context) error {
	enc := callEncoding(ctx)
	if enc == "" || enc == encoding.Identity || s.opts.conn.compressed {
		return nil
	}
	return rpcstatus.New(codes.Unimplemented,
		fmt.Sprintf("grpc-encoding %q: this server does not take compressed messages; send them uncompressed (identity)", enc),
		rpcstatus.Info(exprdv1.ErrorReason_COMPRESSION_REFUSED))
}

// encodingStream refuses a stream whose messages are compressed before
// its handler reads.
func (s *Server) encodingStream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if err := s.checkEncoding(ss.Context()); err != nil {
			return err
		}
		return handler(srv, ss)
	}
}

// registrar registers services on the server's grpc.Server with each unary
// method's handler checking the call's encoding before it reads the
// request.
type registrar struct{ s *Server }

var _ reflection.GRPCServer = registrar{}

func (r registrar) RegisterService(desc *grpc.ServiceDesc, impl any) {
	d := *desc
	d.Methods = make([]grpc.MethodDesc, len(desc.Methods))
	for i, m := range desc.Methods {
		h := m.Handler
		m.Handler = func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			if err := r.s.checkEncoding(ctx); err != nil {
				return nil, err
			}
			return h(srv, ctx, dec, icpt)
		}
		d.Methods[i] = m
	}
	r.s.grpc.RegisterService(&d, impl)
}

func (r registrar) GetServiceInfo() map[string]grpc.ServiceInfo { return r.s.grpc.GetServiceInfo() }
