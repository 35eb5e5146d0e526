package grpctransport

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/manual"
)

// reflectTransport calls one unary or server-streaming method of any
// service that offers server reflection. Arguments map onto the input
// message through protojson (names as in the .proto or in lowerCamelCase);
// the output comes back as protojson with the .proto's names, unpopulated
// fields left out, decoded to map[string]any.
type reflectTransport struct {
	spec       *spec
	conns      *conns
	fullMethod string // "/pkg.Svc/Method"
	method     atomic.Pointer[methodDesc]
}

var _ utcp.Transport = (*reflectTransport)(nil)

// methodDesc is a resolved method.
type methodDesc struct {
	in, out         protoreflect.MessageDescriptor
	serverStreaming bool
	cache           *serviceCache
}

var (
	protoIn  = protojson.UnmarshalOptions{}
	protoOut = protojson.MarshalOptions{UseProtoNames: true}
)

// MaxListedFields bounds the field names an unknown-field error lists.
const MaxListedFields = 20

// Call invokes a unary method and returns its output; a server-streaming
// method's outputs are collected into a list.
func (x *reflectTransport) Call(ctx context.Context, t *manual.Tool, args map[string]any) (any, error) {
	sc, m, err := x.resolve(ctx, t.Name)
	if err != nil {
		return nil, err
	}
	if m.serverStreaming {
		st, err := x.stream(ctx, t, sc, m, args)
		if err != nil {
			return nil, err
		}
		return collect(st, x.conns.env.ResponseLimit(ctx))
	}
	in, err := input(t.Name, m, args)
	if err != nil {
		return nil, err
	}
	out := dynamicpb.NewMessage(m.out)
	if err := sc.cc.Invoke(x.spec.outgoing(ctx), x.fullMethod, in, out, grpc.MaxCallRecvMsgSize(int(x.conns.env.ResponseLimit(ctx)))); err != nil {
		x.forgetIfGone(m, err)
		return nil, x.spec.rpcError(ctx, err, t.Name, false)
	}
	v, _, err := output(t.Name, out)
	return v, err
}

// Stream yields a server-streaming method's outputs as they arrive; a unary
// method's output is the only chunk.
func (x *reflectTransport) Stream(ctx context.Context, t *manual.Tool, args map[string]any) (utcp.Stream, error) {
	sc, m, err := x.resolve(ctx, t.Name)
	if err != nil {
		return nil, err
	}
	if !m.serverStreaming {
		v, err := x.Call(ctx, t, args)
		if err != nil {
			return nil, err
		}
		return &oneChunk{v: v}, nil
	}
	return x.stream(ctx, t, sc, m, args)
}

var serverStream = &grpc.StreamDesc{ServerStreams: true}

func (x *reflectTransport) stream(ctx context.Context, t *manual.Tool, sc *sharedConn, m *methodDesc, args map[string]any) (*rpcStream, error) {
	in, err := input(t.Name, m, args)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(x.spec.outgoing(ctx))
	cs, err := sc.cc.NewStream(sctx, serverStream, x.fullMethod, grpc.MaxCallRecvMsgSize(int(x.conns.env.ResponseLimit(ctx))))
	if err != nil {
		cancel()
		return nil, x.spec.rpcError(ctx, err, t.Name, false)
	}
	// A failed send ends the stream; its status comes with the first Recv.
	if err := cs.SendMsg(in); err == nil {
		_ = cs.CloseSend()
	}
	first := true
	return &rpcStream{ctx: ctx, cancel: cancel, spec: x.spec, tool: t.Name, recv: func() (any, int, error) {
		out := dynamicpb.NewMessage(m.out)
		if err := cs.RecvMsg(out); err != nil {
			if first && err != io.EOF {
				x.forgetIfGone(m, err)
			}
			return nil, 0, err
		}
		first = false
		return output(t.Name, out)
	}}, nil
}

// resolve returns the connection and the method's descriptors, asking the
// provider's reflection service the first time.
func (x *reflectTransport) resolve(ctx context.Context, tool string) (*sharedConn, *methodDesc, error) {
	sc, err := x.conns.get(tool)
	if err != nil {
		return nil, nil, err
	}
	if m := x.method.Load(); m != nil {
		return sc, m, nil
	}
	cache, err := x.conns.serviceCacheFor(x.spec.service)
	if err != nil {
		return nil, nil, &utcp.TransportError{Tool: tool, Reason: utcp.ReasonUnreachable}
	}
	sd, err := x.spec.describe(ctx, sc.cc, cache, tool)
	if err != nil {
		return nil, nil, err
	}
	md := sd.Methods().ByName(protoreflect.Name(x.spec.method))
	if md == nil {
		var have []string
		for i := 0; i < sd.Methods().Len(); i++ {
			have = append(have, string(sd.Methods().Get(i).Name()))
		}
		return nil, nil, x.spec.notFound(tool, fmt.Sprintf("%s has no method %s (it has: %s)", x.spec.service, x.spec.method, strings.Join(have, ", ")))
	}
	if md.IsStreamingClient() {
		return nil, nil, x.spec.unimplemented(tool, fmt.Sprintf("%s/%s takes a client stream; only unary and server-streaming methods can be called as tools", x.spec.service, x.spec.method))
	}
	m := &methodDesc{in: md.Input(), out: md.Output(), serverStreaming: md.IsStreamingServer(), cache: cache}
	x.method.Store(m)
	return sc, m, nil
}

// forgetIfGone drops the cached descriptors when the provider no longer
// has the method (it was redeployed), so that the next call asks again.
func (x *reflectTransport) forgetIfGone(m *methodDesc, err error) {
	if isUnimplemented(err) {
		x.method.CompareAndSwap(m, nil)
		m.cache.sd.Store(nil)
	}
}

// input maps the arguments onto the method's input message.
func input(tool string, m *methodDesc, args map[string]any) (*dynamicpb.Message, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, &manual.InvalidArgumentsError{Tool: tool, Problems: []string{"arguments are not JSON: " + err.Error()}}
	}
	in := dynamicpb.NewMessage(m.in)
	if err := protoIn.Unmarshal(raw, in); err != nil {
		return nil, &manual.InvalidArgumentsError{Tool: tool, Problems: []string{argumentProblem(err, m.in)}}
	}
	return in, nil
}

// protojsonNoise is what a protojson error says that means nothing to the
// caller: its prefix (protobuf-go varies its space on purpose) and a
// position in the JSON exprd encoded, not the caller's.
var protojsonNoise = regexp.MustCompile(`^proto:[\s\x{00a0}]*(\(line \d+:\d+\):\s*)?`)

// argumentProblem words a protojson error, naming the message and, for an
// unknown field, the fields it has.
func argumentProblem(err error, md protoreflect.MessageDescriptor) string {
	msg := protojsonNoise.ReplaceAllString(err.Error(), "")
	if !strings.Contains(msg, "unknown field") {
		return fmt.Sprintf("%s (input message %s)", msg, md.FullName())
	}
	fields := md.Fields()
	var names []string
	for i := 0; i < fields.Len() && i < MaxListedFields; i++ {
		names = append(names, string(fields.Get(i).Name()))
	}
	if fields.Len() > MaxListedFields {
		names = append(names, "…")
	}
	if len(names) == 0 {
		return fmt.Sprintf("%s: %s takes no arguments", msg, md.FullName())
	}
	return fmt.Sprintf("%s: %s has %s", msg, md.FullName(), strings.Join(names, ", "))
}

// output turns an output message into JSON values, and says its size.
func output(tool string, out proto.Message) (any, int, error) {
	raw, err := protoOut.Marshal(out)
	if err != nil {
		return nil, 0, &utcp.TransportError{Tool: tool, Reason: utcp.ReasonMalformed, Body: "the provider's answer does not map to JSON"}
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, 0, &utcp.TransportError{Tool: tool, Reason: utcp.ReasonMalformed, Body: "the provider's answer does not map to JSON"}
	}
	return v, len(raw), nil
}
