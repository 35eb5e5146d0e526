package grpctransport_test

import (
	"context"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/exprd/exprd/internal/egress"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/grpctransport"
	_ "github.com/exprd/exprd/utcp/grpctransport" // the grpc call template
)

// A method of any service with server reflection is a tool: here
// grpc.health.v1.Health/Check.
func Example_reflection() {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	reflection.Register(srv)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	r, err := utcp.New(utcp.WithEgress(egress.MustParse("loopback")), utcp.WithTransport(grpctransport.Type, grpctransport.New))
	if err != nil {
		panic(err)
	}
	defer r.Close()
	manual := fmt.Sprintf(`{"utcp_version": "1.1.0", "tools": [{
	  "name": "check", "description": "Is the service up?",
	  "inputs": {"type": "object", "properties": {"service": {"type": "string"}}},
	  "tool_call_template": {"call_template_type": "grpc", "host": "127.0.0.1", "port": %d,
	    "service_name": "grpc.health.v1.Health", "method_name": "Check"}}]}`, lis.Addr().(*net.TCPAddr).Port)
	if _, err := r.Register(context.Background(), "health", utcp.FromText(manual).AllowProtocols("grpc")); err != nil {
		panic(err)
	}

	v, err := r.Call(context.Background(), "health.check", map[string]any{"service": ""})
	fmt.Println(v, err)

	_, err = r.Call(context.Background(), "health.check", map[string]any{"service": "", "verbose": true})
	fmt.Println(err)
	// Output:
	// map[status:SERVING] <nil>
	// tool "health.check": invalid arguments: unknown field "verbose": grpc.health.v1.HealthCheckRequest has service
}
