package main

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// startGRPC serves gRPC's health service on loopback, with a header list
// bound of 64 KiB.
func startGRPC(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.MaxHeaderListSize(64 << 10))
	healthpb.RegisterHealthServer(s, health.NewServer())
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

// TestRawConn holds the raw client to what a gRPC server answers: a
// status in trailers, a first message, a refusal of a header list past
// its bound, and a connection still serving after a burst of resets.
func TestRawConn(t *testing.T) {
	t.Parallel()
	addr := startGRPC(t)
	c, err := dialRaw(addr, netip.MustParseAddr("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	ask := func(method string, extra []hpack.HeaderField, untilData bool) outcome {
		t.Helper()
		st, err := c.open(grpcHeaders(c.authority, method, extra...), false, untilData)
		if err != nil {
			t.Fatalf("open %s: %v", method, err)
		}
		if err := c.send(ctx, st, emptyMessage, true); err != nil && !st.answered() {
			t.Fatalf("send %s: %v", method, err)
		}
		o, ok := st.wait(ctx)
		if !ok {
			t.Fatalf("%s: no outcome", method)
		}
		return o
	}
	if o := ask(healthCheck, nil, false); o.kind != "grpc OK" || !o.typed {
		t.Errorf("Check: %+v, want grpc OK", o)
	}
	if o := ask(healthWatch, nil, true); o.kind != "a response message" {
		t.Errorf("Watch: %+v, want its first message", o)
	}
	if o := ask("/no.Such/Method", nil, false); o.kind != "grpc Unimplemented" {
		t.Errorf("an unknown method: %+v, want grpc Unimplemented", o)
	}
	big := hpack.HeaderField{Name: hpackName, Value: strings.Repeat("QUFB", hpackValue/4)}
	var repeats []hpack.HeaderField
	for range 100 { // 400 KB decoded, past the server's 64 KiB
		repeats = append(repeats, big)
	}
	if o := ask(healthCheck, repeats, false); !o.typed || o.kind == "grpc OK" {
		t.Errorf("a header list past the bound: %+v, want a typed refusal", o)
	}
	n, err := c.rapidReset(ctx, grpcHeaders(c.authority, healthCheck), 2000)
	if err != nil || n != 2000 {
		t.Fatalf("rapidReset: %d, %v", n, err)
	}
	if o := ask(healthCheck, nil, false); !o.typed {
		t.Errorf("Check after 2,000 resets: %+v, want a typed outcome", o)
	}
}

// TestRawConnHeld: a stream the server holds (a unary call whose
// message never ends) is "held until the client let go" when the client
// closes.
func TestRawConnHeld(t *testing.T) {
	t.Parallel()
	addr := startGRPC(t)
	c, err := dialRaw(addr, netip.MustParseAddr("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.open(grpcHeaders(c.authority, healthCheck), false, false)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	// 2 MiB claimed, 1 MiB sent, within the windows the server grants.
	body := append(grpcPrefix(2<<20), make([]byte, 1<<20)...)
	if err := c.send(ctx, st, body, false); err != nil {
		t.Errorf("send: %v", err)
	}
	if st.answered() {
		t.Fatalf("the server answered a message it has not had: %+v", st.out)
	}
	c.close()
	o, ok := st.wait(context.Background())
	if !ok || !o.ours || !o.typed {
		t.Errorf("a held stream at the close: %+v", o)
	}
}
