package grpctransport

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"

	"google.golang.org/grpc"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/exprd/exprd/utcp"
)

// The reflection service, v1 first; v1alpha has the same messages under
// another name, so one client speaks both.
const (
	reflectionV1      = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
	reflectionV1Alpha = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
)

// MaxReflectionFiles bounds the descriptor files one service may need (its
// own and every import, transitively).
const MaxReflectionFiles = 512

var reflectionStream = &grpc.StreamDesc{StreamName: "ServerReflectionInfo", ServerStreams: true, ClientStreams: true}

// serviceCache keeps a service's descriptor for one connection: it lives in
// Env.Shared, so every tool of the registry calling the same service on the
// same provider asks reflection once.
type serviceCache struct {
	sd atomic.Pointer[serviceDesc]
}

type serviceDesc struct{ protoreflect.ServiceDescriptor }

func (*serviceCache) Close() error { return nil }

// serviceCacheFor returns the cache of (connection, service).
func (c *conns) serviceCacheFor(service string) (*serviceCache, error) {
	cl, err := c.env.Shared.Get("grpctransport-reflection/"+c.key()+"/"+service, func() (io.Closer, error) {
		return &serviceCache{}, nil
	})
	if err != nil {
		return nil, err
	}
	sc, _ := cl.(*serviceCache)
	if sc == nil {
		return nil, fmt.Errorf("grpctransport: shared key of another type")
	}
	return sc, nil
}

// describe returns the service's descriptor, from the cache or reflection.
// Concurrent first calls may each ask; the last answer is kept (asking is
// idempotent, and no caller waits on another's context).
func (s *spec) describe(ctx context.Context, cc *grpc.ClientConn, cache *serviceCache, tool string) (protoreflect.ServiceDescriptor, error) {
	if d := cache.sd.Load(); d != nil {
		return d.ServiceDescriptor, nil
	}
	sd, err := s.reflect(ctx, cc, reflectionV1, tool)
	if err != nil && isUnimplemented(err) {
		sd, err = s.reflect(ctx, cc, reflectionV1Alpha, tool)
		if err != nil && isUnimplemented(err) {
			return nil, s.unimplemented(tool, "the provider does not offer server reflection (v1 or v1alpha)")
		}
	}
	if err != nil {
		if te, ok := err.(*utcp.TransportError); ok {
			return nil, te
		}
		return nil, s.rpcError(ctx, err, tool, false)
	}
	cache.sd.Store(&serviceDesc{sd})
	return sd, nil
}

// reflect asks one reflection service for the file defining the service and
// every file it imports, and builds the service's descriptor. gRPC errors
// are returned as they are (the caller classifies them); what the
// reflection service refuses is a *utcp.TransportError.
func (s *spec) reflect(ctx context.Context, cc *grpc.ClientConn, method, tool string) (protoreflect.ServiceDescriptor, error) {
	ctx, cancel := context.WithCancel(s.outgoing(ctx))
	defer cancel()
	cs, err := cc.NewStream(ctx, reflectionStream, method)
	if err != nil {
		return nil, err
	}
	stream := &grpc.GenericClientStream[rpb.ServerReflectionRequest, rpb.ServerReflectionResponse]{ClientStream: cs}
	ask := func(req *rpb.ServerReflectionRequest) ([][]byte, error) {
		if err := stream.Send(req); err != nil {
			if err == io.EOF { // the stream ended: its status comes with Recv
				_, err = stream.Recv()
			}
			return nil, err
		}
		resp, err := stream.Recv()
		if err != nil {
			return nil, err
		}
		if e := resp.GetErrorResponse(); e != nil {
			return nil, s.reflectionError(tool, req, e.GetErrorCode(), e.GetErrorMessage())
		}
		fdr := resp.GetFileDescriptorResponse()
		if fdr == nil {
			return nil, &utcp.TransportError{Tool: tool, Reason: utcp.ReasonMalformed, Body: "the reflection service answered without descriptors"}
		}
		return fdr.GetFileDescriptorProto(), nil
	}

	files := map[string]*descriptorpb.FileDescriptorProto{}
	add := func(raws [][]byte) error {
		for _, raw := range raws {
			fd := &descriptorpb.FileDescriptorProto{}
			if err := proto.Unmarshal(raw, fd); err != nil {
				return &utcp.TransportError{Tool: tool, Reason: utcp.ReasonMalformed, Body: "the reflection service sent a descriptor that does not decode"}
			}
			files[fd.GetName()] = fd
		}
		if len(files) > MaxReflectionFiles {
			return &utcp.TransportError{Tool: tool, Reason: utcp.ReasonTooLarge, Body: fmt.Sprintf("the service needs more than %d descriptor files", MaxReflectionFiles)}
		}
		return nil
	}
	raws, err := ask(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: s.service}})
	if err != nil {
		return nil, err
	}
	if err := add(raws); err != nil {
		return nil, err
	}
	// A server sends the imports it has not sent on this stream; ask for any
	// still missing, falling back to the files compiled into exprd (the
	// well-known types) when the server has none.
	for dep := missingDep(files); dep != ""; dep = missingDep(files) {
		raws, err := ask(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_FileByFilename{FileByFilename: dep}})
		if _, refused := err.(*utcp.TransportError); err != nil && !refused {
			return nil, err
		}
		if err == nil {
			if err := add(raws); err != nil {
				return nil, err
			}
		}
		if files[dep] == nil {
			fd, gerr := protoregistry.GlobalFiles.FindFileByPath(dep)
			if gerr != nil {
				return nil, &utcp.TransportError{Tool: tool, Reason: utcp.ReasonMalformed, Body: fmt.Sprintf("the reflection service has no descriptor for %q, which the service imports", dep)}
			}
			files[dep] = protodesc.ToFileDescriptorProto(fd)
		}
	}
	_ = stream.CloseSend()

	set := &descriptorpb.FileDescriptorSet{}
	for _, fd := range files {
		set.File = append(set.File, fd)
	}
	reg, err := protodesc.NewFiles(set)
	if err != nil {
		return nil, (&utcp.TransportError{Tool: tool, Reason: utcp.ReasonMalformed, Body: "the provider's descriptors do not build"}).WithCause(err)
	}
	d, err := reg.FindDescriptorByName(protoreflect.FullName(s.service))
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if err != nil || !ok {
		return nil, s.notFound(tool, fmt.Sprintf("%s is not a service of the provider", s.service))
	}
	return sd, nil
}

// missingDep returns an import no file of the set provides, "" when none.
func missingDep(files map[string]*descriptorpb.FileDescriptorProto) string {
	for _, fd := range files {
		for _, dep := range fd.GetDependency() {
			if files[dep] == nil {
				return dep
			}
		}
	}
	return ""
}
