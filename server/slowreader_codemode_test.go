package server_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/server"
)

// A CodeMode.Run client that never reads what the run sends is ended
// RESOURCE_EXHAUSTED after the slow-reader timeout, and its run stops,
// instead of the run blocking on a full stream for ever.
func TestCodeModeRunClientThatDoesNotReadIsEnded(t *testing.T) {
	t.Parallel()
	events, last := runNotRead(t)
	t.Logf("%d events read before the end", events)
	if status.Code(last) != codes.ResourceExhausted || quotaSubject(status.Convert(last)) != "slow_reader_timeout" {
		t.Fatalf("after %d events the stream ended with %v, want RESOURCE_EXHAUSTED slow_reader_timeout", events, last)
	}
}

// runNotRead starts a CodeMode run whose events fill the stream, on a
// server with a slow-reader timeout of 200 ms, and reads nothing for 20
// times that; it returns the events then read and how the stream ended.
func runNotRead(t *testing.T) (int, error) {
	t.Helper()
	const timeout = 200 * time.Millisecond
	// A client whose windows are fixed (no bandwidth estimate growing
	// them), so that not reading stops what exprd may send.
	conn, err := grpc.NewClient(codeModeConnWith(t, nil, server.WithSlowReaderTimeout(timeout)).Target(),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := exprdv1.NewCodeModeClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := c.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Each call's start event carries its 600 KB of arguments: the run's
	// 64 calls send more than any flow-control window (16 MiB at most)
	// and the queue hold.
	code := `map(1..5000, codemode.CallTool("catalog.search", {"query": "mug", "p1": repeat("x", 99000), "p2": repeat("x", 99000), "p3": repeat("x", 99000), "p4": repeat("x", 99000), "p5": repeat("x", 99000), "p6": repeat("x", 99000)}))`
	if err := stream.Send(&exprdv1.RunRequest{Msg: &exprdv1.RunRequest_Start{Start: &exprdv1.RunStart{
		Source: &exprdv1.RunStart_Code{Code: code}, Tools: []string{"catalog.search"}, TimeoutMs: 60000}}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * timeout) // the property is a timeout's: let it pass without reading
	events := 0
	for {
		m, err := stream.Recv()
		if err != nil {
			return events, err
		}
		events++
		if m.GetResult() != nil {
			t.Fatalf("the run finished (%v) after %d events: it did not fill the stream", m.GetResult().GetError(), events)
		}
	}
}
